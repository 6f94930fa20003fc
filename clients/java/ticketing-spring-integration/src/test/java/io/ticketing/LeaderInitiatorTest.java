package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Holder;
import io.ticketing.coordination.NotFoundException;
import io.ticketing.coordination.SemaphoreDescription;
import io.ticketing.coordination.Session;
import io.ticketing.spring.integration.TicketingLockRegistry;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Three LockRegistryLeaderInitiators, each in its own JVM, on one real
 * ticketd: exactly one leads while the other two contend; when the
 * leader's process is killed (SIGKILL), another takes over once the dead
 * session times out, with a larger token, and no two processes ever saw
 * themselves leading at the same time.
 */
@Timeout(180)
class LeaderInitiatorTest {
    static final Duration SESSION_TIMEOUT = Duration.ofSeconds(3);
    static final String ROLE = "leader-test";

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

    /** One line a process printed, with the process's index. */
    record Event(int process, String kind, long token, long nanos) {}

    static final class Child {
        final int index;
        final Process proc;
        final List<Event> events = new CopyOnWriteArrayList<>();
        final List<String> output = new CopyOnWriteArrayList<>();
        volatile long killedAt;

        Child(int index, Process proc) {
            this.index = index;
            this.proc = proc;
            Thread t = new Thread(this::read, "leader-process-" + index);
            t.setDaemon(true);
            t.start();
        }

        private void read() {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    output.add(line);
                    String[] f = line.split(" ");
                    switch (f[0]) {
                        case "granted" -> events.add(new Event(index, "granted", Long.parseLong(f[1]), Long.parseLong(f[2])));
                        case "revoked" -> events.add(new Event(index, "revoked", 0, Long.parseLong(f[1])));
                        case "ready" -> events.add(new Event(index, "ready", 0, System.nanoTime()));
                        default -> { } // the child's log
                    }
                }
            } catch (java.io.IOException e) {
                // the process ended
            }
        }

        boolean saw(String kind) {
            return events.stream().anyMatch(e -> e.kind().equals(kind));
        }

        boolean leading() {
            String last = "";
            for (Event e : events) {
                if (!e.kind().equals("ready")) {
                    last = e.kind();
                }
            }
            return last.equals("granted") && killedAt == 0;
        }
    }

    static Child spawn(int index) throws Exception {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-cp", cp, LeaderProcess.class.getName(), addr, ROLE, Long.toString(SESSION_TIMEOUT.toMillis()))
                .redirectErrorStream(true).start();
        return new Child(index, p);
    }

    static void await(String what, Duration limit, BooleanSupplier cond, List<Child> children) throws InterruptedException {
        long end = System.nanoTime() + limit.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                StringBuilder b = new StringBuilder("not within " + limit + ": " + what);
                for (Child c : children) {
                    b.append("\n--- process ").append(c.index).append(":\n").append(String.join("\n", c.output));
                }
                throw new AssertionError(b.toString());
            }
            Thread.sleep(20); // polling interval of the condition, not a stand-in for it
        }
    }

    @Test
    void oneLeaderAndAHandOverWhenItsProcessIsKilled() throws Exception {
        List<Child> children = new ArrayList<>();
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient client = CoordinationClient.create(broker)) {
            for (int i = 0; i < 3; i++) {
                children.add(spawn(i));
            }
            await("one process leads", Duration.ofSeconds(60), () -> children.stream().filter(Child::leading).count() == 1, children);
            Child first = children.stream().filter(Child::leading).findFirst().orElseThrow();

            // The other two contend: each shows up queued on the leader's semaphore.
            Session watcher = awaitSession(client, children);
            String sem = TicketingLockRegistry.DEFAULT_PREFIX + ROLE;
            Set<Long> waiters = new HashSet<>();
            await("both followers queue for the lock", Duration.ofSeconds(60), () -> {
                try {
                    SemaphoreDescription d = watcher.describeSemaphoreBlocking(sem, true, true);
                    assertEquals(1, d.owners().size(), "one owner of the leader's lock");
                    for (Holder h : d.waiters()) {
                        waiters.add(h.session());
                    }
                } catch (NotFoundException e) {
                    throw new AssertionError("the leader's semaphore is gone while it leads");
                }
                return waiters.size() >= 2;
            }, children);
            assertEquals(1, children.stream().filter(Child::leading).count(), "exactly one leader while the others contend");

            long killedAt = System.nanoTime();
            first.killedAt = killedAt;
            first.proc.destroyForcibly();
            assertTrue(first.proc.waitFor(30, TimeUnit.SECONDS));
            await("another process leads after the leader's process was killed", SESSION_TIMEOUT.plusSeconds(20),
                    () -> children.stream().anyMatch(c -> c != first && c.leading()), children);
            Child second = children.stream().filter(c -> c != first && c.leading()).findFirst().orElseThrow();
            Event grant = second.events.stream().filter(e -> e.kind().equals("granted")).reduce((a, b) -> b).orElseThrow();
            Event firstGrant = first.events.stream().filter(e -> e.kind().equals("granted")).findFirst().orElseThrow();
            System.out.printf("leader hand-over after SIGKILL: %d ms (session timeout %d ms)%n",
                    TimeUnit.NANOSECONDS.toMillis(grant.nanos() - killedAt), SESSION_TIMEOUT.toMillis());
            assertTrue(grant.nanos() > killedAt, "the new leader was granted only after the old leader's process died");
            assertTrue(grant.token() > firstGrant.token(), "the new leader's token " + grant.token() + " is above " + firstGrant.token());
            assertNoOverlap(children);
            watcher.close();
        } finally {
            for (Child c : children) {
                c.proc.destroyForcibly();
                c.proc.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }

    private static Session awaitSession(CoordinationClient client, List<Child> children) throws InterruptedException {
        // The node exists once a child's registry opened its session.
        await("the children's node exists", Duration.ofSeconds(60), () -> children.stream().allMatch(c -> c.saw("ready")), children);
        return client.sessionBlocking(TicketingLockRegistry.DEFAULT_NODE, Duration.ofSeconds(10), "watcher");
    }

    /** Each process's leading intervals (granted to revoked, or to its kill) are disjoint from every other's. */
    private static void assertNoOverlap(List<Child> children) {
        record Interval(int process, long from, long to) {}
        List<Interval> all = new ArrayList<>();
        for (Child c : children) {
            Long from = null;
            for (Event e : c.events) {
                if (e.kind().equals("granted")) {
                    from = e.nanos();
                } else if (e.kind().equals("revoked") && from != null) {
                    all.add(new Interval(c.index, from, e.nanos()));
                    from = null;
                }
            }
            if (from != null) {
                all.add(new Interval(c.index, from, c.killedAt != 0 ? c.killedAt : Long.MAX_VALUE));
            }
        }
        for (Interval a : all) {
            for (Interval b : all) {
                if (a != b && a.from() < b.to() && b.from() < a.to()) {
                    throw new AssertionError("two leaders at once: " + a + " and " + b);
                }
            }
        }
    }
}
