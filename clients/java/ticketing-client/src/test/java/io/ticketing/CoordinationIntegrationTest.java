package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.AlreadyExistsException;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.LostException;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.NodeDescription;
import io.ticketing.coordination.SemaphoreDescription;
import io.ticketing.coordination.Session;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The coordination client against one real ticketd built from this repository. */
@Timeout(120)
class CoordinationIntegrationTest {
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

    static final byte[] NO_DATA = new byte[0];

    /**
     * Sessions of one broker share its connection and the semaphore's
     * queue: a try-once acquire of a held semaphore is not acquired, the
     * description lists the owner and the waiter, a watch fires when the
     * owner releases, the waiter then holds it with a larger token, and a
     * forced delete ends the waiter's lease as lost.
     */
    @Test
    void sessionsShareASemaphore() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(b)) {
            c.createNodeBlocking("/java/share", NodeConfig.defaults());
            assertThrows(AlreadyExistsException.class, () -> c.createNodeBlocking("/java/share", NodeConfig.defaults()));
            try (Session a = c.sessionBlocking("/java/share", Duration.ofSeconds(10), "a");
                    Session w = c.sessionBlocking("/java/share", Duration.ofSeconds(10), "w")) {
                a.createSemaphoreBlocking("s", 1, "cfg".getBytes());
                Lease held = a.acquireBlocking("s", AcquireOptions.exclusive().timeout(Duration.ZERO));
                assertTrue(held.isValid());
                assertThrows(NotAcquiredException.class, () -> w.acquireBlocking("s", AcquireOptions.shared().timeout(Duration.ZERO)));
                CompletableFuture<Lease> waiting = w.acquireAsync("s", AcquireOptions.shared());
                SemaphoreDescription d = eventually("the waiter is queued", () -> {
                    SemaphoreDescription x = a.describeSemaphoreBlocking("s", true, true);
                    return x.waiters().size() == 1 ? x : null;
                });
                assertEquals(1, d.limit());
                assertEquals("cfg", new String(d.data()));
                assertEquals(List.of(a.id()), d.owners().stream().map(h -> h.session()).toList());
                assertEquals(held.token(), d.owners().get(0).orderId());
                assertEquals(w.id(), d.waiters().get(0).session());
                Session.Watched watched = w.watchSemaphoreBlocking("s", false, true);
                held.releaseBlocking();
                assertFalse(held.isValid());
                assertEquals(2, watched.changed().get(30, TimeUnit.SECONDS) & 2, "the owners changed");
                Lease next = waiting.get(30, TimeUnit.SECONDS);
                assertTrue(next.token() > held.token(), "a later hold has a larger fencing token");
                a.deleteSemaphoreBlocking("s", true);
                assertInstanceOf(LostException.class, next.ended().get(30, TimeUnit.SECONDS));
                NodeDescription nd = c.describeNodeBlocking("/java/share");
                assertEquals(2, nd.sessions());
            }
            c.dropNodeBlocking("/java/share");
        }
    }

    /**
     * An acquire of a semaphore the session already holds that is
     * interrupted before its answer is withdrawn with a release, and the
     * release gives up the whole hold: the lease the session had ends with
     * it (ReleasedException) before another session can be granted the
     * semaphore, never left looking valid. The interrupt races with the
     * answer (an answer already there is returned: the same hold), so the
     * test repeats until the interrupt wins.
     */
    @Test
    void anInterruptedReacquireEndsTheHold() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(b)) {
            c.createNodeBlocking("/java/reacquire", NodeConfig.defaults());
            try (Session a = c.sessionBlocking("/java/reacquire", Duration.ofSeconds(10), "a");
                    Session o = c.sessionBlocking("/java/reacquire", Duration.ofSeconds(10), "o")) {
                a.createSemaphoreBlocking("r", 1, NO_DATA);
                boolean withdrawn = false;
                for (int round = 0; round < 500 && !withdrawn; round++) {
                    Lease held = a.acquireBlocking("r", AcquireOptions.exclusive());
                    Thread.currentThread().interrupt();
                    try {
                        Lease again = a.acquireBlocking("r", AcquireOptions.exclusive());
                        assertEquals(held, again, "an answered re-acquire is the same hold");
                        held.releaseBlocking();
                        continue;
                    } catch (java.util.concurrent.CancellationException e) {
                        withdrawn = true;
                    } finally {
                        Thread.interrupted();
                    }
                    Lease other = o.acquireBlocking("r", AcquireOptions.exclusive().timeout(Duration.ofSeconds(10)));
                    assertFalse(held.isValid(), "a's lease still looks valid while o holds the semaphore");
                    assertInstanceOf(io.ticketing.coordination.ReleasedException.class, held.ended().get(10, TimeUnit.SECONDS));
                    other.releaseBlocking();
                }
                assertTrue(withdrawn, "the interrupt never came before the re-acquire's answer in 500 rounds");
            }
            c.dropNodeBlocking("/java/reacquire");
        }
    }

    /**
     * Ten sessions on one broker connection take a semaphore of limit 3 in
     * turns: at no time do more than 3 of them hold a valid lease, as the
     * holders see it (counted after the acquire's answer, uncounted before
     * the release is sent).
     */
    @Test
    void holdersNeverSeeASemaphoreOverItsLimit() throws Exception {
        try (TicketBroker b = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(b)) {
            c.createNodeBlocking("/java/limit", NodeConfig.defaults());
            List<Session> sessions = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                sessions.add(c.sessionBlocking("/java/limit", Duration.ofSeconds(10), "s" + i));
            }
            sessions.get(0).createSemaphoreBlocking("pool", 3, NO_DATA);
            AtomicInteger holding = new AtomicInteger();
            AtomicInteger most = new AtomicInteger();
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (Session s : sessions) {
                Thread t = new Thread(() -> {
                    try {
                        for (int k = 0; k < 10; k++) {
                            Lease l = s.acquireBlocking("pool", AcquireOptions.shared().timeout(Duration.ofSeconds(30)));
                            if (l.isValid()) {
                                most.accumulateAndGet(holding.incrementAndGet(), Math::max);
                                // Hold across a round trip, so that holds overlap.
                                int owners = s.describeSemaphoreBlocking("pool", true, false).owners().size();
                                if (owners > 3) {
                                    failures.add(new AssertionError(owners + " owners of a semaphore of limit 3"));
                                }
                                holding.decrementAndGet();
                            }
                            l.releaseBlocking();
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                });
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join(60_000);
            }
            assertTrue(failures.isEmpty(), "failures: " + failures);
            assertTrue(most.get() >= 2 && most.get() <= 3, "holds overlapped, and never more than 3 at once: saw " + most.get());
            for (Session s : sessions) {
                s.close();
            }
            c.dropNodeBlocking("/java/limit");
        }
    }

    /**
     * The broker's connection is cut (by a relay in front of ticketd): the
     * session is restored on the broker's next connection with its id, and
     * its hold, kept by the server, is answered again with the same token.
     */
    @Test
    void aSessionIsRestoredAfterItsConnectionDrops() throws Exception {
        try (Relay relay = new Relay(addr); TicketBroker b = TicketBroker.connect(relay.addr()); CoordinationClient c = CoordinationClient.create(b)) {
            c.createNodeBlocking("/java/restore", NodeConfig.defaults());
            try (Session s = c.sessionBlocking("/java/restore", Duration.ofSeconds(20), "r")) {
                long id = s.id();
                Lease l = s.acquireBlocking("m", AcquireOptions.exclusive().ephemeral().timeout(Duration.ZERO));
                relay.cut();
                eventually("the session is restored on a new connection", () -> relay.accepted() >= 2 && s.isAttached() ? true : null);
                assertEquals(id, s.id());
                Lease again = s.acquireBlocking("m", AcquireOptions.exclusive().ephemeral().timeout(Duration.ZERO));
                assertEquals(l.token(), again.token(), "the server kept the hold across the restore");
                assertTrue(again.isValid());
            }
            c.dropNodeBlocking("/java/restore");
        }
    }

    interface Probe<T> {
        T get() throws Exception;
    }

    static <T> T eventually(String what, Probe<T> p) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            T v = p.get();
            if (v != null) {
                return v;
            }
            if (System.nanoTime() > end) {
                fail("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    /** A TCP relay to a server whose connections can be cut: the network fault only a test double can make. */
    static final class Relay implements AutoCloseable {
        final ServerSocket ln = new ServerSocket();
        final String target;
        final List<Socket> open = new CopyOnWriteArrayList<>();
        final AtomicInteger accepted = new AtomicInteger();

        Relay(String target) throws IOException {
            this.target = target;
            ln.bind(new InetSocketAddress("127.0.0.1", 0));
            Thread t = new Thread(this::accept, "relay");
            t.setDaemon(true);
            t.start();
        }

        String addr() {
            return "127.0.0.1:" + ln.getLocalPort();
        }

        int accepted() {
            return accepted.get();
        }

        void accept() {
            while (true) {
                try {
                    Socket in = ln.accept();
                    String[] hp = target.split(":");
                    Socket out = new Socket(hp[0], Integer.parseInt(hp[1]));
                    open.add(in);
                    open.add(out);
                    accepted.incrementAndGet();
                    pipe(in, out);
                    pipe(out, in);
                } catch (IOException e) {
                    return;
                }
            }
        }

        void pipe(Socket from, Socket to) {
            Thread t = new Thread(() -> {
                try (InputStream i = from.getInputStream(); OutputStream o = to.getOutputStream()) {
                    i.transferTo(o);
                } catch (IOException ignored) {
                    // cut
                } finally {
                    close(from);
                    close(to);
                }
            }, "relay pipe");
            t.setDaemon(true);
            t.start();
        }

        void cut() {
            for (Socket s : open) {
                close(s);
            }
            open.clear();
        }

        static void close(Socket s) {
            try {
                s.close();
            } catch (IOException ignored) {
                // closing is best effort
            }
        }

        @Override
        public void close() throws IOException {
            ln.close();
            cut();
        }
    }
}
