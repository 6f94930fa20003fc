package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.Session;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Three real ticketd processes; 50 sessions on one broker connection take a
 * semaphore of limit 5 in turns while the leader is killed (SIGKILL): the
 * sessions are restored on the new leader and go on, and at no time do more
 * than 5 of them hold a valid lease, as the holders see it.
 */
@Timeout(180)
class CoordinationFailoverTest {
    @Test
    void aLeaderKillWithFiftySessionsNeverOverfillsASemaphore() throws Exception {
        try (Ticketd cluster = new Ticketd(3)) {
            Ticketd.Node leader = cluster.awaitLeader(60_000);
            try (TicketBroker b = TicketBroker.connect(cluster.addrs()); CoordinationClient c = CoordinationClient.create(b)) {
                c.createNodeBlocking("/failover", NodeConfig.defaults());
                List<Session> sessions = new ArrayList<>();
                for (int i = 0; i < 50; i++) {
                    sessions.add(c.sessionBlocking("/failover", Duration.ofSeconds(30), "s" + i));
                }
                sessions.get(0).createSemaphoreBlocking("pool", 5, new byte[0]);
                AtomicInteger holding = new AtomicInteger();
                AtomicInteger most = new AtomicInteger();
                AtomicBoolean killed = new AtomicBoolean();
                AtomicBoolean stop = new AtomicBoolean();
                AtomicInteger before = new AtomicInteger();
                AtomicInteger after = new AtomicInteger();
                List<Throwable> overfilled = new CopyOnWriteArrayList<>();
                List<Thread> threads = new ArrayList<>();
                for (Session s : sessions) {
                    Thread t = new Thread(() -> {
                        while (!stop.get()) {
                            boolean afterKill = killed.get();
                            try {
                                Lease l = s.acquireBlocking("pool", AcquireOptions.shared().timeout(Duration.ofSeconds(20)));
                                if (l.isValid()) {
                                    int now = holding.incrementAndGet();
                                    most.accumulateAndGet(now, Math::max);
                                    try {
                                        if (now > 5) {
                                            overfilled.add(new AssertionError(now + " valid holders of a semaphore of limit 5"));
                                        }
                                        // Hold across a round trip, so that holds overlap.
                                        s.describeSemaphoreBlocking("pool", false, false);
                                    } finally {
                                        holding.decrementAndGet();
                                    }
                                }
                                (afterKill ? after : before).incrementAndGet();
                                l.releaseBlocking();
                            } catch (RuntimeException e) {
                                // a failover's outcomes (indeterminate, unavailable): try again
                            }
                        }
                    }, "failover worker");
                    t.setDaemon(true);
                    t.start();
                    threads.add(t);
                }
                waitUntil("workers take the semaphore before the kill", () -> before.get() >= 100);
                killed.set(true);
                cluster.kill(leader);
                waitUntil("workers take the semaphore from the new leader", () -> after.get() >= 100);
                stop.set(true);
                for (Thread t : threads) {
                    t.join(60_000);
                }
                assertTrue(overfilled.isEmpty(), "over the limit: " + overfilled);
                assertTrue(most.get() >= 2 && most.get() <= 5, "holds overlapped, and never more than 5 at once: saw " + most.get());
            }
        }
    }

    static void waitUntil(String what, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(20);
        }
    }
}
