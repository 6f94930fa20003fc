package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** One multiplexed connection serves any number of threads: virtual threads on JDK 21 and newer (platform threads on 17). */
class VirtualThreadsTest extends FakeServerFixture {
    @Test
    void manyVirtualThreadsShareOneConnection() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        TicketBroker b = broker(srv.addr());
        b.waitReadyBlocking(Duration.ofSeconds(10));
        Set<Long> tokens = ConcurrentHashMap.newKeySet();
        List<Thread> ts = new ArrayList<>();
        AtomicInteger failures = new AtomicInteger();
        for (int i = 0; i < 200; i++) {
            String key = "k" + i;
            ts.add(Threads.start("rule14-" + i, () -> {
                try {
                    for (int j = 0; j < 5; j++) {
                        Ticket t = b.acquireBlocking(key, Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
                        tokens.add(t.getToken());
                        t.releaseBlocking();
                    }
                } catch (RuntimeException e) {
                    failures.incrementAndGet();
                }
            }));
        }
        for (Thread t : ts) {
            t.join();
        }
        assertEquals(0, failures.get());
        assertEquals(1000, tokens.size(), "tokens were handed out twice");
        assertEquals(1, srv.connections.get(), "the broker used more than one connection");
    }
}
