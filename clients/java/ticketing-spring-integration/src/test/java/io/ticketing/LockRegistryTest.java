package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Session;
import io.ticketing.spring.integration.TicketingLock;
import io.ticketing.spring.integration.TicketingLockRegistry;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The lock registry's rules against a real ticketd. */
@Timeout(120)
class LockRegistryTest {
    static Ticketd cluster;
    static TicketBroker brokerA;
    static TicketBroker brokerB;
    static TicketingLockRegistry a;
    static TicketingLockRegistry b;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Ticketd(1);
        String addr = cluster.awaitLeader(30_000).addr;
        brokerA = TicketBroker.connect(addr);
        brokerB = TicketBroker.connect(addr);
        a = TicketingLockRegistry.create(brokerA);
        b = TicketingLockRegistry.create(brokerB);
    }

    @AfterAll
    static void stop() throws Exception {
        a.close();
        b.close();
        brokerA.close();
        brokerB.close();
        cluster.close();
    }

    /**
     * A lock is reentrant for its thread, exclusive for other threads of the
     * process and for other processes, and each new hold has a larger token.
     */
    @Test
    void exclusiveAcrossThreadsAndProcessesReentrantForItsThread() throws Exception {
        TicketingLock la = a.obtain("orders");
        assertSame(la, a.obtain("orders"));
        assertTrue(la.tryLock(1, TimeUnit.SECONDS));
        long t1 = la.token();
        assertTrue(la.tryLock(), "reentrant for the holding thread");
        assertFalse(CompletableFuture.supplyAsync(la::tryLock).get(), "another thread of the process");
        assertFalse(b.obtain("orders").tryLock(100, TimeUnit.MILLISECONDS), "another process");
        la.unlock();
        assertFalse(b.obtain("orders").tryLock(), "still held once");
        la.unlock();
        TicketingLock lb = b.obtain("orders");
        assertTrue(lb.tryLock(5, TimeUnit.SECONDS), "free after the last unlock");
        assertTrue(lb.token() > t1);
        lb.unlock();
        assertThrows(IllegalMonitorStateException.class, lb::unlock);
    }

    /**
     * When the hold ends under its holder (here the semaphore is deleted by
     * force), the holder's next tryLock is refused, which is how
     * LockRegistryLeaderInitiator learns it no longer leads, and a later one
     * takes a new hold.
     */
    @Test
    void aHoldThatEndedIsRefusedToItsHolder() throws Exception {
        TicketingLock l = a.obtain("lost");
        assertTrue(l.tryLock(1, TimeUnit.SECONDS));
        long before = l.token();
        try (CoordinationClient c = CoordinationClient.create(brokerB);
                Session s = c.sessionBlocking(a.node(), Duration.ofSeconds(10), "deleter")) {
            s.deleteSemaphoreBlocking(TicketingLockRegistry.DEFAULT_PREFIX + "lost", true);
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (l.isHeldByCurrentThread() && System.nanoTime() < end) {
            Thread.onSpinWait(); // the lease ends when the server's notice arrives
        }
        assertFalse(l.tryLock(100, TimeUnit.MILLISECONDS), "the holder's reentry after its hold ended");
        assertTrue(l.tryLock(5, TimeUnit.SECONDS), "a new hold");
        assertNotSame(0L, l.token());
        assertTrue(l.token() > before);
        l.unlock();
        assertEquals(0, l.token());
    }

    /** expireUnusedOlderThan forgets idle locks and keeps held ones. */
    @Test
    void expiryForgetsOnlyIdleLocks() throws Exception {
        TicketingLock held = a.obtain("kept");
        TicketingLock idle = a.obtain("idle");
        assertTrue(held.tryLock(5, TimeUnit.SECONDS));
        a.expireUnusedOlderThan(0);
        assertSame(held, a.obtain("kept"), "a held lock stays");
        assertNotSame(idle, a.obtain("idle"), "an idle lock is forgotten");
        held.unlock();
    }
}
