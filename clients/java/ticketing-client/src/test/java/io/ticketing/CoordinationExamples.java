package io.ticketing;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Discovery;
import io.ticketing.coordination.Election;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.Mutex;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.Publication;
import io.ticketing.coordination.Session;
import io.ticketing.coordination.Subscription;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The coordination recipes as an application uses them, one method each
 * (docs/coordination.md, "Examples"), printing what they see to out.
 * CoordinationExamplesTest runs every one against a real ticketd and checks
 * its output; run one by hand with {@code main(ADDR, EXAMPLE)}.
 */
public final class CoordinationExamples {
    private CoordinationExamples() {}

    public static void main(String[] args) throws Exception {
        String addr = args[0];
        switch (args[1]) {
            case "workers" -> workers(addr, System.out);
            case "mutex" -> mutex(addr, System.out);
            case "election" -> election(addr, System.out);
            case "discovery" -> discovery(addr, System.out);
            case "publication" -> publication(addr, System.out);
            case "listSessions" -> listSessions(addr, System.out);
            default -> throw new IllegalArgumentException("no example " + args[1]);
        }
    }

    static void createNode(CoordinationClient c, String path) {
        try {
            c.createNodeBlocking(path, NodeConfig.defaults());
        } catch (io.ticketing.coordination.AlreadyExistsException e) {
            // made by an earlier run
        }
    }

    /** A semaphore with limit 3: one unit held, fenced by its token. */
    static void workers(String addr, PrintStream out) {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/jobs");
            try (Session s = c.sessionBlocking("/jobs", Duration.ofSeconds(10), "worker-1")) {
                s.createSemaphoreBlocking("workers", 3, new byte[0]);
                Lease lease = s.acquireBlocking("workers", AcquireOptions.shared());
                out.println("held " + lease.count() + " of " + s.describeSemaphoreBlocking("workers", true, false).limit() + ", valid " + lease.isValid());
                lease.releaseBlocking();
                s.deleteSemaphoreBlocking("workers", false);
            }
        }
    }

    /** A lock: a second session's try fails while it is held and succeeds, with a larger token, after the unlock. */
    static void mutex(String addr, PrintStream out) {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/jobs");
            try (Session a = c.sessionBlocking("/jobs", Duration.ofSeconds(10), "a");
                    Session b = c.sessionBlocking("/jobs", Duration.ofSeconds(10), "b")) {
                Mutex lock = a.mutex("nightly-report");
                Lease held = lock.lockBlocking();
                // every write of the job is fenced with held.token()
                Mutex other = b.mutex("nightly-report");
                out.println("b's try while a holds it: " + (other.tryLockBlocking() != null));
                lock.unlockBlocking();
                Lease next = other.tryLockBlocking();
                out.println("b's try after the unlock: " + (next != null) + ", larger token: " + (next.token() > held.token()));
                other.unlockBlocking();
            }
        }
    }

    /** An election: an observer sees nobody, the campaigner, then nobody after it resigns. */
    static void election(String addr, PrintStream out) throws Exception {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/svc");
            try (Session s = c.sessionBlocking("/svc", Duration.ofSeconds(10), "observer");
                    Session candidate = c.sessionBlocking("/svc", Duration.ofSeconds(10), "10.0.0.7")) {
                BlockingQueue<Election.Leader> leaders = new LinkedBlockingQueue<>();
                try (Subscription watching = s.election("primary").observe(leaders::add)) {
                    out.println("leader: " + describe(leaders.poll(30, TimeUnit.SECONDS)));
                    Election e = candidate.election("primary");
                    Election.Leadership l = e.campaignBlocking("10.0.0.7:8080".getBytes(StandardCharsets.UTF_8));
                    // lead while l.lease().isValid(); fence every write with l.token()
                    out.println("leader: " + describe(leaders.poll(30, TimeUnit.SECONDS)));
                    e.resignBlocking();
                    out.println("leader: " + describe(leaders.poll(30, TimeUnit.SECONDS)));
                }
            }
        }
    }

    private static String describe(Election.Leader l) {
        return l == null ? "(no change within 30 s)" : l.session() == 0 ? "nobody" : new String(l.data(), StandardCharsets.UTF_8);
    }

    /** Service discovery: a watcher follows two registrations and a member whose session ends. */
    static void discovery(String addr, PrintStream out) throws Exception {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/svc");
            try (Session s = c.sessionBlocking("/svc", Duration.ofSeconds(10), "client")) {
                BlockingQueue<List<Discovery.Endpoint>> lists = new LinkedBlockingQueue<>();
                try (Subscription watching = s.discovery("api").watch(lists::add)) {
                    out.println("api at " + endpoints(lists.poll(30, TimeUnit.SECONDS)));
                    Session one = c.sessionBlocking("/svc", Duration.ofSeconds(10), "api-1");
                    one.discovery("api").registerBlocking("10.0.0.7:8080".getBytes(StandardCharsets.UTF_8));
                    out.println("api at " + endpoints(lists.poll(30, TimeUnit.SECONDS)));
                    try (Session two = c.sessionBlocking("/svc", Duration.ofSeconds(10), "api-2")) {
                        two.discovery("api").registerBlocking("10.0.0.8:8080".getBytes(StandardCharsets.UTF_8));
                        out.println("api at " + endpoints(lists.poll(30, TimeUnit.SECONDS)));
                        one.close(); // deregisters; a crashed instance is gone once its session timeout passes
                        out.println("api at " + endpoints(lists.poll(30, TimeUnit.SECONDS)));
                    }
                }
            }
        }
    }

    private static String endpoints(List<Discovery.Endpoint> eps) {
        if (eps == null) {
            return "(no change within 30 s)";
        }
        return eps.stream().map(e -> new String(e.data(), StandardCharsets.UTF_8)).toList().toString();
    }

    /** Configuration publication: a watcher follows two published values. */
    static void publication(String addr, PrintStream out) throws Exception {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/svc");
            try (Session s = c.sessionBlocking("/svc", Duration.ofSeconds(10), "reader");
                    Session admin = c.sessionBlocking("/svc", Duration.ofSeconds(10), "admin")) {
                BlockingQueue<String> values = new LinkedBlockingQueue<>();
                try (Subscription watching = s.publication("limits").watch(v -> values.add(v == null ? "unset" : new String(v, StandardCharsets.UTF_8)))) {
                    out.println("limits: " + values.poll(30, TimeUnit.SECONDS));
                    Publication limits = admin.publication("limits");
                    limits.publishBlocking("max=5".getBytes(StandardCharsets.UTF_8));
                    out.println("limits: " + values.poll(30, TimeUnit.SECONDS));
                    limits.publishBlocking("max=7".getBytes(StandardCharsets.UTF_8));
                    out.println("limits: " + values.poll(30, TimeUnit.SECONDS));
                    out.println("get: " + new String(s.publication("limits").getBlocking(), StandardCharsets.UTF_8));
                }
            }
        }
    }

    /** A node's sessions, with their descriptions. */
    static void listSessions(String addr, PrintStream out) {
        try (TicketBroker broker = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(broker)) {
            createNode(c, "/list");
            try (Session a = c.sessionBlocking("/list", Duration.ofSeconds(10), "worker-1");
                    Session b = c.sessionBlocking("/list", Duration.ofSeconds(10), "worker-2")) {
                for (CoordinationClient.SessionInfo i : c.listSessionsBlocking("/list")) {
                    out.println(i.description() + " attached " + i.attached() + ", timeout " + i.timeout().toSeconds() + " s");
                }
            }
        }
    }
}
