package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The {@link BrokerListener} (metrics) sees acquires, sessions, leader changes and background releases. */
class ListenerTest extends FakeServerFixture {
    @Test
    void theListenerSeesAcquiresSessionsLeaderChangesAndBackgroundReleases() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer a = server((s, n) -> {
            if (n > 1) {
                s.close(); // A is gone after its first session
                return;
            }
            s.hello();
            for (int i = 0; i < 2; i++) { // the acquire and the background release
                s.send(locks.answer(s.readRequest()));
            }
            s.close();
        });
        FakeServer b = normalServer(locks);
        java.util.Queue<String> events = new java.util.concurrent.ConcurrentLinkedQueue<>();
        TicketBroker broker = broker(TicketBroker.builder().addrs(a.addr(), b.addr()).listener(new BrokerListener() {
            @Override
            public void acquireFinished(String outcome, long nanos) {
                events.add("acquire " + outcome + (nanos > 0 ? "" : " without a duration"));
            }

            @Override
            public void sessionStarted(String address, boolean reconnect, boolean leaderChanged) {
                events.add("session " + (address.equals(a.addr()) ? "A" : "B") + " reconnect=" + reconnect + " leaderChanged=" + leaderChanged);
            }

            @Override
            public void backgroundReleaseFinished(TicketingException error) {
                events.add("background release " + (error == null ? "released" : error.getClass().getSimpleName()));
            }
        }));
        broker.acquireBlocking("k", ZERO, S, ZERO).close();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!events.contains("session B reconnect=true leaderChanged=true")) {
            assertTrue(System.nanoTime() < end, "no session with B: " + events);
            Thread.sleep(5);
        }
        broker.acquireBlocking("k2", ZERO, S, ZERO);
        assertThrows(NotAcquiredException.class, () -> broker.acquireBlocking("k2", ZERO, S, ZERO));
        List<String> l = new ArrayList<>(events);
        assertEquals(6, l.size(), l.toString());
        assertEquals(List.of("session A reconnect=false leaderChanged=false", "acquire granted"), l.subList(0, 2), l.toString());
        // the release's answer and the end of A's session race: either may be told first
        assertEquals(Set.of("background release released", "session B reconnect=true leaderChanged=true"), Set.copyOf(l.subList(2, 4)), l.toString());
        assertEquals(List.of("acquire granted", "acquire not_acquired"), l.subList(4, 6), l.toString());
    }
}
