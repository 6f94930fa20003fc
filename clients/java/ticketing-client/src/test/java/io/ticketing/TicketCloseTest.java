package io.ticketing;

import static io.ticketing.FakeServer.type;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * {@link Ticket#close()} (AutoCloseable, try-with-resources) releases in the
 * background on the broker's executor and reports to the release observer:
 * the outcome, a full queue, a refusal.
 */
class TicketCloseTest extends FakeServerFixture {
    static Frame forbidden(long id, int reason) {
        Frame f = new Frame(Type.FORBIDDEN);
        f.id = id;
        f.reason = reason;
        return f;
    }

    @Test
    void closeReleasesInTheBackgroundOnTheExecutor() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        AtomicInteger ran = new AtomicInteger();
        Executor vt = Threads.releaseExecutor();
        Executor exec = r -> {
            ran.incrementAndGet();
            vt.execute(r);
        };
        LinkedBlockingQueue<Object[]> seen = new LinkedBlockingQueue<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).executor(exec)
                .releaseObserver((k, tok, err) -> seen.add(new Object[] {k, tok, err})));
        long token;
        try (Ticket t = b.acquireBlocking("key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
            token = t.getToken();
            assertTrue(locks.isHeld("key"));
        }
        Object[] o = seen.poll(20, TimeUnit.SECONDS);
        assertNotNull(o, "the background release was not reported");
        assertEquals("key", o[0]);
        assertEquals(token, o[1]);
        assertNull(o[2]);
        assertEquals(1, ran.get(), "the release did not run on the given executor");
        assertFalse(locks.isHeld("key"));
    }

    @Test
    void aFullBackgroundQueueDropsAndReports() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.ACQUIRE) {
                    s.send(FakeServer.granted(f.id, f.id, 30000, 0));
                }
                // releases are never answered: they stay pending
            }
        });
        LinkedBlockingQueue<TicketingException> seen = new LinkedBlockingQueue<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseQueue(1)
                .releaseObserver((k, tok, err) -> seen.add(err)));
        Ticket t1 = b.acquireBlocking("a", ZERO, S, ZERO);
        Ticket t2 = b.acquireBlocking("b", ZERO, S, ZERO);
        t1.close();
        t2.close();
        assertInstanceOf(ReleaseDroppedException.class, seen.poll(20, TimeUnit.SECONDS));
    }

    @Test
    void aRefusedReleaseIsThrownOrReportedAndNotRetried() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                s.send(f.type == Type.RELEASE ? forbidden(f.id, PermissionDeniedException.OWNER) : locks.answer(f));
            }
        });
        List<TicketingException> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseObserver((k, tok, err) -> seen.add(err)));
        Ticket t = b.acquireBlocking("k", ZERO, S, ZERO);
        assertThrows(PermissionDeniedException.class, t::releaseBlocking);
        Ticket t2 = b.acquireBlocking("k2", ZERO, S, ZERO);
        t2.close(); // the background release reports the refusal to the observer
        eventually("the observer got the background release's outcome", () -> !seen.isEmpty());
        assertInstanceOf(PermissionDeniedException.class, seen.get(0));
        assertEquals(2, srv.received(f -> f.type == Type.RELEASE).size(), "a release answered F was sent again");
        assertEquals(1, srv.connections.get(), "a refusal ended the connection");
    }
}
