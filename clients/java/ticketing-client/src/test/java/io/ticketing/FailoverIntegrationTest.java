package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Three real ticketd processes; the leader is killed (SIGKILL) while clients
 * acquire and release. Every call must end as a grant, an indeterminate
 * outcome or a definite error (none hangs), the broker must find the new
 * leader, and tokens must strictly increase.
 */
@Timeout(180)
class FailoverIntegrationTest {
    static final int WORKERS = 8;

    record Outcome(long token, String error, long startedAfterKill, String node) {}

    @Test
    void leaderKilledUnderLoad() throws Exception {
        try (Ticketd cluster = new Ticketd(3)) {
            Ticketd.Node leader = cluster.awaitLeader(60_000);
            try (TicketBroker broker = TicketBroker.builder().addrs(cluster.addrs()).connectWait(Duration.ofSeconds(15)).connect()) {
                broker.waitReadyBlocking(Duration.ofSeconds(30));
                AtomicBoolean killed = new AtomicBoolean();
                AtomicBoolean stop = new AtomicBoolean();
                Map<Integer, List<Outcome>> results = new ConcurrentHashMap<>();
                List<CompletableFuture<Void>> workers = new ArrayList<>();
                for (int w = 0; w < WORKERS; w++) {
                    int id = w;
                    List<Outcome> mine = new ArrayList<>();
                    results.put(id, mine);
                    workers.add(CompletableFuture.runAsync(() -> {
                        String key = "failover-" + id;
                        int grantsAfterKill = 0;
                        while (!stop.get() && grantsAfterKill < 3) {
                            boolean afterKill = killed.get();
                            // Each call is bounded by the client itself; a hang fails the test below.
                            try {
                                Ticket t = broker.acquireBlocking(key, Duration.ofSeconds(2), Duration.ofSeconds(3), Duration.ZERO);
                                synchronized (mine) {
                                    mine.add(new Outcome(t.getToken(), null, afterKill ? 1 : 0, t.nodeId));
                                }
                                if (afterKill && !t.nodeId.equals(leader.id)) {
                                    grantsAfterKill++;
                                }
                                try {
                                    t.releaseBlocking();
                                } catch (IndeterminateException | UnavailableException | NotHeldException e) {
                                    // an answer lost in the failover, or the lease ran out meanwhile: definite enough
                                }
                            } catch (IndeterminateException | UnavailableException | NotAcquiredException | CapacityException e) {
                                synchronized (mine) {
                                    mine.add(new Outcome(0, e.getClass().getSimpleName(), afterKill ? 1 : 0, ""));
                                }
                            }
                        }
                    }, r -> Threads.start("failover-test", r)));
                }
                // Let every worker get grants from the first leader, then kill it.
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (results.values().stream().anyMatch(l -> count(l) < 3)) {
                    if (System.nanoTime() > end) {
                        fail("workers made no progress before the kill: " + results);
                    }
                    Thread.sleep(20);
                }
                killed.set(true);
                cluster.kill(leader);
                try {
                    CompletableFuture.allOf(workers.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    stop.set(true);
                    fail("calls did not end after the leader was killed (a call hangs, or no new leader was found): " + results);
                }
                Ticketd.Node next = cluster.awaitLeader(30_000);
                assertTrue(next != leader, "the killed node is still the leader?");
                long grantsAfter = 0;
                long maxOld = 0;
                for (List<Outcome> l : results.values()) {
                    for (Outcome o : l) {
                        if (o.error() == null && o.node().equals(leader.id)) {
                            maxOld = Math.max(maxOld, o.token());
                        }
                    }
                }
                for (List<Outcome> l : results.values()) {
                    long prev = 0;
                    for (Outcome o : l) {
                        if (o.error() != null) {
                            continue;
                        }
                        assertTrue(o.token() > prev, "tokens of one worker did not strictly increase: " + l);
                        prev = o.token();
                        if (!o.node().equals(leader.id)) {
                            grantsAfter++;
                            assertTrue(o.token() > maxOld, "a token granted by the new leader is not above every token of the old one");
                        }
                    }
                }
                assertTrue(grantsAfter >= 3L * WORKERS, "every worker must get grants from the new leader");
                System.out.println("failover: outcomes per worker: " + summary(results));
            }
        }
    }

    static long count(List<Outcome> l) {
        synchronized (l) {
            return l.stream().filter(o -> o.error() == null).count();
        }
    }

    static String summary(Map<Integer, List<Outcome>> r) {
        Map<String, Integer> c = new java.util.TreeMap<>();
        for (List<Outcome> l : r.values()) {
            synchronized (l) {
                for (Outcome o : l) {
                    c.merge(o.error() == null ? "granted" : o.error(), 1, Integer::sum);
                }
            }
        }
        return c.toString();
    }
}
