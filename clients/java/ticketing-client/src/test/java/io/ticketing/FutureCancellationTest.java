package io.ticketing;

import static io.ticketing.FakeServer.type;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The JVM's cancellation handles: {@link CompletableFuture#cancel} and a
 * thread's interrupt (the conformance scenarios cancel blocking calls by
 * interrupt). Before the send nothing goes out and an interrupted caller
 * keeps its interrupt flag; after it a C goes out, and a late grant is
 * released with its exact token and reported to the observer.
 */
class FutureCancellationTest extends FakeServerFixture {
    @Test
    void cancelledFutureOrInterruptBeforeTheSendSendsNothingAndKeepsTheInterruptFlag() throws Exception {
        CountDownLatch letHello = new CountDownLatch(1);
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            letHello.await();
            s.hello();
            locks.serve(s);
        });
        TicketBroker b = broker(srv.addr());
        CompletableFuture<Ticket> f = b.acquireAsync("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
        assertTrue(f.cancel(true));
        // A blocking acquire interrupted while waiting for the connection: nothing sent either.
        AtomicInteger outcome = new AtomicInteger();
        Thread th = Threads.start("rules-test", () -> {
            try {
                b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
                outcome.set(1);
            } catch (CancellationException e) {
                outcome.set(Thread.currentThread().isInterrupted() && e.getMessage().contains("nothing was sent") ? 2 : 3);
            }
        });
        eventually("the blocking acquire waits for the connection", () -> th.getState() == Thread.State.WAITING
                || th.getState() == Thread.State.TIMED_WAITING);
        th.interrupt();
        th.join();
        assertEquals(2, outcome.get(), "interrupted blocking acquire: 1 returned a ticket, 3 wrong exception or interrupt flag lost");
        letHello.countDown();
        b.waitReadyBlocking(Duration.ofSeconds(10));
        b.describeBlocking("probe");
        srv.await(1, type(Type.DESCRIBE));
        assertEquals(0, srv.received(type(Type.ACQUIRE)).size(), "a cancelled acquire was sent");
    }

    @Test
    void cancelledFutureAfterTheSendSendsCAndReleasesTheLateGrantExactly() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.CANCEL) {
                    s.send(FakeServer.granted(f.id, 4242, 30000, 0)); // granted anyway
                } else if (f.type == Type.RELEASE) {
                    s.send(FakeServer.idOnly(Type.RELEASED, f.id));
                }
                // acquires wait
            }
        });
        List<TicketingException> outcomes = new java.util.concurrent.CopyOnWriteArrayList<>();
        List<Long> tokens = new java.util.concurrent.CopyOnWriteArrayList<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseObserver((k, tok, err) -> {
            tokens.add(tok);
            outcomes.add(err);
        }));
        CompletableFuture<Ticket> f = b.acquireAsync("k", Duration.ofSeconds(30), Duration.ofSeconds(30), ZERO);
        Frame a = srv.await(1, type(Type.ACQUIRE)).get(0);
        assertTrue(f.cancel(true));
        Frame c = srv.await(1, type(Type.CANCEL)).get(0);
        assertEquals(a.id, c.id, "the cancel names another request");
        assertArrayEquals(a.owner, c.owner, "the cancel names another owner");
        Frame l = srv.await(1, type(Type.RELEASE)).get(0);
        assertEquals(4242, l.token, "the late grant was not released with its exact token");
        eventually("the compensating release is reported", () -> outcomes.size() == 1);
        assertNull(outcomes.get(0));
        assertEquals(List.of(4242L), tokens);

        // Other requests on the connection are not affected.
        assertEquals(1, srv.connections.get());
    }
}
