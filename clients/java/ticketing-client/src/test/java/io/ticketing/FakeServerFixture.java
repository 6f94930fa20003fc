package io.ticketing;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;

/**
 * What the tests of the Java client's own API share: scriptable
 * {@link FakeServer}s and brokers closed after each test. The client rules
 * every language shares are the conformance scenarios ({@link ConformanceTest});
 * the tests built on this fixture are for what only the JVM has.
 */
@Timeout(60)
abstract class FakeServerFixture {
    static final Duration S = Duration.ofSeconds(1);
    static final Duration ZERO = Duration.ZERO;

    private final List<AutoCloseable> closers = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
    }

    FakeServer server(FakeServer.Script s) throws Exception {
        FakeServer f = new FakeServer(s);
        closers.add(f);
        return f;
    }

    TicketBroker broker(String addr) {
        return broker(TicketBroker.builder().addrs(addr));
    }

    TicketBroker broker(TicketBroker.Builder b) {
        TicketBroker t = b.backoff(Duration.ofMillis(10), Duration.ofMillis(100)).connect();
        closers.add(t);
        return t;
    }

    /** A server whose every connection says hello and then serves the lock table. */
    FakeServer normalServer(FakeServer.Locks locks) throws Exception {
        return server((s, n) -> {
            s.hello();
            locks.serve(s);
        });
    }

    static <T> T get(CompletableFuture<T> f) throws Exception {
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception x) {
                throw x;
            }
            throw e;
        }
    }

    /** Waits for a condition with a deadline (no sleeps standing in for it). */
    static void eventually(String what, java.util.function.BooleanSupplier c) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            if (System.nanoTime() > end) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(5);
        }
    }
}
