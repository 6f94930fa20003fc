package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The client against one real ticketd built from this repository. */
@Timeout(120)
class SingleNodeIntegrationTest {
    static Ticketd cluster;
    static String addr;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Ticketd(1);
        addr = cluster.awaitLeader(30_000).addr;
    }

    @AfterAll
    static void stop() throws Exception {
        cluster.close();
    }

    static void eventually(String what, java.util.function.BooleanSupplier c) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!c.getAsBoolean()) {
            if (System.nanoTime() > end) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    /** The document's Java example, as written (with the mandatory budget). */
    @Test
    void theDocumentsJavaExampleWorksAsWritten() {
        TicketBroker broker = TicketBroker.connect(addr);
        try {
            broker.waitReadyBlocking(Duration.ofSeconds(5));

            try (Ticket ticket = broker.acquireBlocking(
                    "key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
                long token = ticket.getToken();
                // In the same DB transaction: verify/update token high-water and perform the business write.
                assertTrue(token > 0);
                assertTrue(ticket.getRemaining().compareTo(Duration.ofSeconds(2)) >= 0);
            }
            // close() released it in the background: the key can be had again.
            Ticket again = broker.acquireBlocking("key", Duration.ofSeconds(10), Duration.ofSeconds(30), Duration.ZERO);
            again.releaseBlocking();
        } finally {
            broker.close();
        }
    }

    @Test
    void contentionQueueingAndStrictlyIncreasingTokens() throws Exception {
        try (TicketBroker a = TicketBroker.connect(addr); TicketBroker b = TicketBroker.builder().addrs(addr).connect()) {
            Ticket t1 = a.acquireBlocking("contended", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO);
            assertThrows(NotAcquiredException.class,
                    () -> b.acquireBlocking("contended", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO));
            Description d = b.describeBlocking("contended");
            assertTrue(d.held());
            assertEquals(t1.getToken(), d.token());
            // the owner is a value: equal descriptions are equal, and it prints as hexadecimal
            assertEquals(d.owner(), b.describeBlocking("contended").owner());
            assertFalse(d.owner().isZero());
            assertTrue(d.toString().contains("owner=" + d.owner()) && d.owner().toString().matches("[0-9a-f]{32}"), d.toString());
            assertTrue(b.describeBlocking("free-key").owner().isZero());
            CompletableFuture<Ticket> waiting = b.acquireAsync("contended", Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ZERO);
            eventually("the second acquire is queued", () -> b.describeBlocking("contended").waiters() == 1);
            t1.releaseBlocking();
            Ticket t2 = waiting.get(30, TimeUnit.SECONDS);
            assertTrue(t2.getToken() > t1.getToken(), "tokens must strictly increase");
            t1.releaseBlocking(); // a second call reports the first outcome (released) without sending again
            t2.releaseBlocking();
            // A stale token never ends a newer grant.
            Ticket t3 = a.acquireBlocking("contended", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO);
            assertThrows(NotHeldException.class, () -> b.releaseTokenBlocking("contended", t2.getToken()));
            assertTrue(a.describeBlocking("contended").held());
            b.releaseTokenBlocking("contended", t3.getToken()); // another broker may release by key and token
            assertFalse(a.describeBlocking("contended").held());
        }
    }

    @Test
    void cancellingAQueuedAcquireWithdrawsIt() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr)) {
            Ticket holder = b.acquireBlocking("cancel-me", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO);
            CompletableFuture<Ticket> f = b.acquireAsync("cancel-me", Duration.ofSeconds(60), Duration.ofSeconds(30), Duration.ZERO);
            eventually("the acquire is queued", () -> b.describeBlocking("cancel-me").waiters() == 1);
            f.cancel(true);
            eventually("the cancel withdrew the waiter", () -> b.describeBlocking("cancel-me").waiters() == 0);
            holder.releaseBlocking();
            assertFalse(b.describeBlocking("cancel-me").held(), "a cancelled acquire was granted and kept");
        }
    }

    @Test
    void anExpiredLeaseIsNotHeldAndTheKeyPassesOn() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr)) {
            Ticket short1 = b.acquireBlocking("expiring", Duration.ZERO, Duration.ofSeconds(1), Duration.ZERO);
            Ticket next = b.acquireBlocking("expiring", Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ZERO);
            assertTrue(next.getToken() > short1.getToken());
            assertThrows(NotHeldException.class, short1::releaseBlocking);
            next.releaseBlocking();
        }
    }

    @Test
    void serverCheckedTokenAuthentication() throws Exception {
        try (Ticketd secured = new Ticketd(1, "-client-token", "s3cret")) {
            String a = secured.awaitLeader(30_000).addr;
            try (TicketBroker wrong = TicketBroker.builder().addrs(a).token("nope").connect()) {
                assertThrows(UnauthenticatedException.class, () -> wrong.waitReadyBlocking(Duration.ofSeconds(20)));
            }
            try (TicketBroker right = TicketBroker.builder().addrs(a).token("s3cret").connect()) {
                right.waitReadyBlocking(Duration.ofSeconds(20));
                right.acquireBlocking("auth", Duration.ZERO, Duration.ofSeconds(5), Duration.ZERO).releaseBlocking();
            }
        }
    }

    @Test
    void asyncFacesCompose() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr)) {
            b.waitReadyAsync(Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
            long token = b.acquireAsync("async", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(1))
                    .thenCompose(t -> t.releaseAsync().thenApply(v -> t.getToken()))
                    .get(20, TimeUnit.SECONDS);
            assertTrue(token > 0);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> b.releaseTokenAsync("async", token).get(20, TimeUnit.SECONDS));
            assertInstanceOf(NotHeldException.class, e.getCause());
        }
    }
}
