package io.ticketing;

import static io.ticketing.CoordinationIntegrationTest.eventually;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Discovery;
import io.ticketing.coordination.Election;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.NotFoundException;
import io.ticketing.coordination.Publication;
import io.ticketing.coordination.Session;
import io.ticketing.coordination.Subscription;
import io.ticketing.coordination.WrongKindException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Service discovery, configuration publication, observing an election,
 * listing a node's sessions, session state listeners and withdrawing a
 * cancelled acquire, against one real ticketd built from this repository.
 */
@Timeout(120)
class RecipesIntegrationTest {
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

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static <T> T next(BlockingQueue<T> q, String what) throws InterruptedException {
        T v = q.poll(30, TimeUnit.SECONDS);
        if (v == null) {
            fail("no callback within 30 s: " + what);
        }
        return v;
    }

    static List<String> endpoints(List<Discovery.Endpoint> eps) {
        List<String> out = new ArrayList<>();
        for (Discovery.Endpoint e : eps) {
            out.add(new String(e.data(), StandardCharsets.UTF_8));
        }
        return out;
    }

    /**
     * A watcher sees a service's members come and go (nobody, one, two,
     * one), in registration order, each endpoint with its member's session;
     * a member registering again replaces its endpoint; a semaphore of the
     * service's name made by hand is refused.
     */
    @Test
    void discoveryListsAndWatchesTheMembers() throws Exception {
        try (TicketBroker br = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/discovery", NodeConfig.defaults());
            try (Session w = c.sessionBlocking("/java/discovery", Duration.ofSeconds(10), "watcher");
                    Session a = c.sessionBlocking("/java/discovery", Duration.ofSeconds(10), "a");
                    Session m = c.sessionBlocking("/java/discovery", Duration.ofSeconds(10), "b")) {
                assertEquals(List.of(), w.discovery("api").listBlocking());
                BlockingQueue<List<Discovery.Endpoint>> seen = new LinkedBlockingQueue<>();
                try (Subscription sub = w.discovery("api").watch(seen::add)) {
                    assertEquals(List.of(), next(seen, "the empty service"));
                    Lease la = a.discovery("api").registerBlocking(b("10.0.0.1:80"));
                    List<Discovery.Endpoint> one = next(seen, "a registered");
                    assertEquals(List.of("10.0.0.1:80"), endpoints(one));
                    assertEquals(a.id(), one.get(0).session());
                    assertEquals(la.token(), one.get(0).token());
                    m.discovery("api").registerBlocking(b("10.0.0.2:80"));
                    assertEquals(List.of("10.0.0.1:80", "10.0.0.2:80"), endpoints(next(seen, "b registered")));
                    a.discovery("api").registerBlocking(b("10.0.0.1:81"));
                    assertEquals(List.of("10.0.0.1:81", "10.0.0.2:80"), endpoints(next(seen, "a registered again")));
                    la.releaseBlocking();
                    assertEquals(List.of("10.0.0.2:80"), endpoints(next(seen, "a left")));
                    assertEquals(List.of("10.0.0.2:80"), endpoints(w.discovery("api").listBlocking()));
                }
                a.createSemaphoreBlocking("recipe/discovery/by-hand", 5, b("x"));
                assertThrows(WrongKindException.class, () -> a.discovery("by-hand").registerBlocking(b("e")));
                assertThrows(WrongKindException.class, () -> a.discovery("by-hand").listBlocking());
                BlockingQueue<Optional<RuntimeException>> end = new LinkedBlockingQueue<>();
                Subscription refused = a.discovery("by-hand").watch(x -> fail("a watch of a semaphore made by hand was given " + x));
                refused.ended().thenAccept(e -> end.add(Optional.ofNullable(e)));
                assertInstanceOf(WrongKindException.class, next(end, "the refused watch ends").orElse(null));
            }
            c.dropNodeBlocking("/java/discovery");
        }
    }

    /**
     * A watcher of a configuration value sees it unset, then each value
     * published (an empty value told from none); get reads it; a second
     * publish of the same value changes nothing a watcher is told of.
     */
    @Test
    void publicationPublishesAndWatchesAValue() throws Exception {
        try (TicketBroker br = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/publication", NodeConfig.defaults());
            try (Session w = c.sessionBlocking("/java/publication", Duration.ofSeconds(10), "watcher");
                    Session p = c.sessionBlocking("/java/publication", Duration.ofSeconds(10), "publisher")) {
                Publication cfg = p.publication("limits");
                assertThrows(NotFoundException.class, cfg::getBlocking);
                BlockingQueue<Optional<byte[]>> seen = new LinkedBlockingQueue<>();
                try (Subscription sub = w.publication("limits").watch(v -> seen.add(Optional.ofNullable(v)))) {
                    assertTrue(next(seen, "unset").isEmpty());
                    assertThrows(NotFoundException.class, cfg::getBlocking, "a watched value not published yet is still unset");
                    cfg.publishBlocking(b("max=5"));
                    assertArrayEquals(b("max=5"), next(seen, "the first value").orElseThrow());
                    cfg.publishBlocking(b("max=5"));
                    cfg.publishBlocking(new byte[0]);
                    assertArrayEquals(new byte[0], next(seen, "the empty value").orElseThrow(), "an empty value, not unset");
                    cfg.publishBlocking(b("max=7"));
                    assertArrayEquals(b("max=7"), next(seen, "the third value").orElseThrow());
                    assertArrayEquals(b("max=7"), w.publication("limits").getBlocking());
                }
                p.createSemaphoreBlocking("recipe/publication/by-hand", 1, b("x"));
                assertThrows(WrongKindException.class, () -> p.publication("by-hand").publishBlocking(b("v")));
            }
            c.dropNodeBlocking("/java/publication");
        }
    }

    /**
     * An observer sees nobody leading, then the first leader with its data
     * and token, then the next one when the first resigns.
     */
    @Test
    void observingAnElectionSeesEachLeader() throws Exception {
        try (TicketBroker br = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/observe", NodeConfig.defaults());
            try (Session o = c.sessionBlocking("/java/observe", Duration.ofSeconds(10), "observer");
                    Session a = c.sessionBlocking("/java/observe", Duration.ofSeconds(10), "a");
                    Session bs = c.sessionBlocking("/java/observe", Duration.ofSeconds(10), "b")) {
                BlockingQueue<Election.Leader> seen = new LinkedBlockingQueue<>();
                try (Subscription sub = o.election("primary").observe(seen::add)) {
                    assertEquals(0, next(seen, "nobody leads").session());
                    Election ea = a.election("primary");
                    Election.Leadership la = ea.campaignBlocking(b("a:1"));
                    Election.Leader first = next(seen, "a leads");
                    assertEquals(a.id(), first.session());
                    assertEquals(la.token(), first.token());
                    assertArrayEquals(b("a:1"), first.data());
                    CompletableFuture<Election.Leadership> lb = bs.election("primary").campaignAsync(b("b:1"));
                    eventually("b campaigns", () -> o.describeSemaphoreBlocking("recipe/election/primary", false, true).waiters().size() == 1 ? true : null);
                    ea.resignBlocking();
                    Election.Leader second = next(seen, "b leads");
                    assertEquals(bs.id(), second.session());
                    assertEquals(lb.get(30, TimeUnit.SECONDS).token(), second.token());
                    assertTrue(second.token() > first.token());
                }
            }
            c.dropNodeBlocking("/java/observe");
        }
    }

    /** A node's sessions are listed by id with their descriptions and timeouts; a stopped one is gone. */
    @Test
    void listSessionsReportsTheNodesSessions() throws Exception {
        try (TicketBroker br = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/list", NodeConfig.defaults());
            try (Session a = c.sessionBlocking("/java/list", Duration.ofSeconds(10), "first");
                    Session bs = c.sessionBlocking("/java/list", Duration.ofSeconds(12), "second")) {
                List<CoordinationClient.SessionInfo> l = c.listSessionsBlocking("/java/list");
                assertEquals(List.of(a.id(), bs.id()), l.stream().map(CoordinationClient.SessionInfo::id).toList());
                assertEquals(List.of("first", "second"), l.stream().map(CoordinationClient.SessionInfo::description).toList());
                assertEquals(Duration.ofSeconds(12), l.get(1).timeout());
                assertTrue(l.get(0).attached() && l.get(1).attached());
                a.close();
                assertEquals(List.of(bs.id()), c.listSessionsAsync("/java/list").get(30, TimeUnit.SECONDS).stream()
                        .map(CoordinationClient.SessionInfo::id).toList());
            }
            c.dropNodeBlocking("/java/list");
        }
    }

    /**
     * A state listener hears DETACHED when the connection is cut, ATTACHED
     * when the session is restored, and EXPIRED when it is closed; state()
     * agrees.
     */
    @Test
    void aStateListenerHearsEachChange() throws Exception {
        try (CoordinationIntegrationTest.Relay relay = new CoordinationIntegrationTest.Relay(addr); TicketBroker br = TicketBroker.connect(relay.addr());
                CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/states", NodeConfig.defaults());
            Session s = c.sessionBlocking("/java/states", Duration.ofSeconds(20), "s");
            BlockingQueue<Session.State> seen = new LinkedBlockingQueue<>();
            s.addStateListener(seen::add);
            assertEquals(Session.State.ATTACHED, s.state());
            relay.cut();
            assertEquals(Session.State.DETACHED, next(seen, "detached"));
            assertEquals(Session.State.ATTACHED, next(seen, "restored"));
            assertEquals(Session.State.ATTACHED, s.state());
            s.close();
            assertEquals(Session.State.EXPIRED, next(seen, "closed"));
            assertEquals(Session.State.EXPIRED, s.state());
            assertNull(seen.poll(), "no other change");
            c.dropNodeBlocking("/java/states");
        }
    }

    /**
     * Cancelling a queued acquire's future withdraws it from the queue:
     * when the holder releases, the semaphore goes to the next waiter, not
     * to the cancelled one.
     */
    @Test
    void aCancelledAcquireIsWithdrawn() throws Exception {
        try (TicketBroker br = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(br)) {
            c.createNodeBlocking("/java/withdraw", NodeConfig.defaults());
            try (Session a = c.sessionBlocking("/java/withdraw", Duration.ofSeconds(10), "a");
                    Session w = c.sessionBlocking("/java/withdraw", Duration.ofSeconds(10), "w")) {
                a.createSemaphoreBlocking("s", 1, new byte[0]);
                Lease held = a.acquireBlocking("s", AcquireOptions.exclusive());
                CompletableFuture<Lease> queued = w.acquireAsync("s", AcquireOptions.shared());
                eventually("the acquire is queued", () -> a.describeSemaphoreBlocking("s", false, true).waiters().size() == 1 ? true : null);
                queued.cancel(true);
                eventually("the cancelled acquire left the queue", () -> a.describeSemaphoreBlocking("s", false, true).waiters().isEmpty() ? true : null);
                held.releaseBlocking();
                assertTrue(a.describeSemaphoreBlocking("s", true, false).owners().isEmpty(), "nobody holds it after the release");
                Lease again = w.acquireBlocking("s", AcquireOptions.shared().timeout(Duration.ZERO));
                assertTrue(again.isValid(), "the session's next acquire is not withdrawn");
            }
            c.dropNodeBlocking("/java/withdraw");
        }
    }
}
