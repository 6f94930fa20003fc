package io.ticketing;

import static io.ticketing.FakeServer.type;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.ticketing.wire.Codec;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every behaviour rule of the client, each provoked against the scriptable
 * {@link FakeServer}. The rules and their meaning are those of the Go client
 * (its package documentation and docs/protocol.md).
 */
@Timeout(60)
class RulesTest {
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

    // ---- Rule 1: argument ranges, round-up, no clamping, rejection before send ----

    @Test
    void rule1_invalidArgumentsAreRejectedBeforeSending() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        TicketBroker b = broker(srv.addr());
        b.waitReadyBlocking(Duration.ofSeconds(10));
        String k1025 = "k".repeat(1025);
        Object[][] cases = {
            {"empty key", "", S, S, ZERO},
            {"key over 1024 bytes", k1025, S, S, ZERO},
            {"key over 1024 bytes in UTF-8", "é".repeat(513), S, S, ZERO},
            {"negative wait", "k", Duration.ofNanos(-1), S, ZERO},
            {"wait over 255 s after rounding up", "k", Duration.ofSeconds(255).plusNanos(1), S, ZERO},
            {"zero lease", "k", ZERO, ZERO, ZERO},
            {"negative lease", "k", ZERO, S.negated(), ZERO},
            {"lease over 250 s after rounding up", "k", ZERO, Duration.ofSeconds(250).plusMillis(1), ZERO},
            {"negative budget", "k", ZERO, S, Duration.ofNanos(-1)},
            {"budget over the rounded lease", "k", ZERO, Duration.ofMillis(500), Duration.ofMillis(1500)},
            {"work over 250 s", "k", ZERO, Duration.ofSeconds(250), Duration.ofSeconds(251)},
            // A budget no grant of that lease could ever leave is refused before a token is spent on it.
            {"budget equal to the rounded lease", "k", ZERO, Duration.ofMillis(2500), Duration.ofSeconds(3)},
            {"budget above what the lease can leave", "k", ZERO, Duration.ofSeconds(30), Duration.ofMillis(29_700)},
            // The budget rounds up like wait and lease.
            {"budget that rounds up past what the lease leaves", "k", ZERO, Duration.ofSeconds(10), Duration.ofMillis(9500)},
        };
        for (Object[] c : cases) {
            String name = (String) c[0];
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> b.acquireBlocking((String) c[1], (Duration) c[2], (Duration) c[3], (Duration) c[4]), name);
            assertTrue(e.getMessage().contains("nothing was sent"), name + ": " + e.getMessage());
            ExecutionException ae = assertThrows(ExecutionException.class,
                    () -> b.acquireAsync((String) c[1], (Duration) c[2], (Duration) c[3], (Duration) c[4]).get(), name);
            assertInstanceOf(InvalidArgumentException.class, ae.getCause(), name);
        }
        assertThrows(InvalidArgumentException.class, () -> b.describeBlocking(""));
        assertThrows(InvalidArgumentException.class, () -> b.releaseTokenBlocking("k", 0));
        assertThrows(InvalidArgumentException.class, () -> b.releaseTokenBlocking("", 1));

        InvalidArgumentException fit = assertThrows(InvalidArgumentException.class,
                () -> b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), Duration.ofSeconds(45)));
        assertTrue(fit.getMessage().contains("at most 29.6 s of conservative time left")
                && fit.getMessage().contains("use a budget of at most 29 s"), fit.getMessage());

        // Fractions round up: budget 1.5 s is 2 s of a 3 s lease, which fits.
        b.acquireBlocking("round", Duration.ofMillis(1200), Duration.ofMillis(2500), Duration.ofMillis(1500)).releaseBlocking();
        Frame first = srv.await(1, type(Type.ACQUIRE)).get(0);
        assertEquals("round", new String(first.key), "an invalid acquire was sent");
        assertEquals(2, first.waitSec, "wait 1.2 s must go out as 2 s");
        assertEquals(3, first.leaseSec, "lease 2.5 s must go out as 3 s");
        // Boundaries are accepted, not clamped.
        Ticket t = b.acquireBlocking("x".repeat(1024), Duration.ofSeconds(255), Duration.ofSeconds(250), ZERO);
        t.releaseBlocking();
        t = b.acquireBlocking("zero", ZERO, Duration.ofNanos(1), ZERO);
        t.releaseBlocking();
        List<Frame> as = srv.await(3, type(Type.ACQUIRE));
        assertEquals(255, as.get(1).waitSec);
        assertEquals(250, as.get(1).leaseSec);
        assertEquals(0, as.get(2).waitSec);
        assertEquals(1, as.get(2).leaseSec);
        srv.checkScripts();
    }

    // ---- Rule 2: a lost final answer is Indeterminate; never re-sent with the same owner ----

    @Test
    void rule2_lostAnswerIsIndeterminateAndTheAcquireIsNeverResent() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            if (n == 1) {
                s.readRequest(); // the acquire: drop the connection without answering
                s.close();
                return;
            }
            locks.serve(s);
        });
        TicketBroker b = broker(srv.addr());
        IndeterminateException e = assertThrows(IndeterminateException.class,
                () -> b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO));
        assertTrue(e.getMessage().contains("do not enter the critical section"), e.getMessage());
        assertEquals(TicketingException.RetryClass.UNDETERMINED, e.retryClass());
        // On the next connection the client asks the leader to end whatever that
        // owner may hold or wait for on the key: release by owner (U).
        Frame a = srv.await(1, type(Type.ACQUIRE)).get(0);
        Frame u = srv.await(1, type(Type.RELEASE_OWNER)).get(0);
        assertArrayEquals(a.owner, u.owner, "U names another owner");
        assertArrayEquals(a.key, u.key, "U names another key");
        // The broker reconnects; a describe on the new connection proves it is
        // serving, and the server still saw only the one acquire.
        b.waitReadyBlocking(Duration.ofSeconds(10));
        b.describeBlocking("k");
        srv.await(1, type(Type.DESCRIBE));
        assertEquals(1, srv.received(type(Type.ACQUIRE)).size(), "the acquire was re-sent");
        // A new acquire is a new attempt with a new owner.
        b.acquireBlocking("k", ZERO, S, ZERO).releaseBlocking();
        List<Frame> as = srv.await(2, type(Type.ACQUIRE));
        assertFalse(java.util.Arrays.equals(as.get(0).owner, as.get(1).owner), "a new acquire reused the owner");
    }

    /** A server that predates U ends the session with E 3; the client then stops sending U. */
    @Test
    void rule2_aServerWithoutReleaseByOwnerIsNotAskedAgain() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.RELEASE_OWNER) {
                    s.send(FakeServer.error(3, "unknown frame type U"));
                    return;
                }
                if (f.type == Type.ACQUIRE && new String(f.key).startsWith("lost")) {
                    s.close(); // the answer is lost with the connection
                    return;
                }
                Frame a = locks.answer(f);
                if (a != null) {
                    s.send(a);
                }
            }
        });
        TicketBroker b = broker(srv.addr());
        assertThrows(IndeterminateException.class, () -> b.acquireBlocking("lost-1", ZERO, Duration.ofSeconds(30), ZERO));
        srv.await(1, type(Type.RELEASE_OWNER));
        eventually("the client notes that the server does not know U", b::ownerReleaseUnsupported);
        assertThrows(IndeterminateException.class, () -> b.acquireBlocking("lost-2", ZERO, Duration.ofSeconds(30), ZERO));
        // Work goes on, and no second U ends another session.
        b.acquireBlocking("fine", ZERO, Duration.ofSeconds(30), ZERO).releaseBlocking();
        b.describeBlocking("fine");
        assertEquals(1, srv.received(type(Type.RELEASE_OWNER)).size(), "U was sent to a server that does not know it");
    }

    // ---- Rule 3: M, every E and malformed/oversized/unknown frames are session-fatal ----

    @Test
    void rule3_sessionFatalFramesMakePendingAcquiresIndeterminate() throws Exception {
        HexFormat hex = HexFormat.of();
        List<Object[]> cases = List.of(
                new Object[] {"M not leader", (Function<Long, byte[]>) id -> Codec.encode(FakeServer.notLeader(""))},
                new Object[] {"E internal", (Function<Long, byte[]>) id -> Codec.encode(FakeServer.error(12, "internal"))},
                new Object[] {"E shutting down", (Function<Long, byte[]>) id -> Codec.encode(FakeServer.error(11, "stopping"))},
                new Object[] {"malformed (truncated G)", (Function<Long, byte[]>) id -> {
                    byte[] g = Codec.encode(FakeServer.granted(id, 1, 30000, 0));
                    byte[] t = java.util.Arrays.copyOf(g, g.length - 1);
                    t[3]--; // length prefix one shorter: a G without its last byte
                    return t;
                }},
                new Object[] {"oversized length", (Function<Long, byte[]>) id -> hex.parseHex("0001000147")},
                new Object[] {"unknown type", (Function<Long, byte[]>) id -> hex.parseHex("000000057a00000001")},
                new Object[] {"answer for an id not in flight", (Function<Long, byte[]>) id -> Codec.encode(FakeServer.granted(id + 1000, 1, 30000, 0))},
                new Object[] {"R answering an acquire", (Function<Long, byte[]>) id -> Codec.encode(FakeServer.idOnly(Type.RELEASED, id))},
                new Object[] {"server-only frame H from the server", (Function<Long, byte[]>) id -> {
                    Frame h = new Frame(Type.HELLO);
                    h.version = 1;
                    return Codec.encode(h);
                }});
        for (Object[] c : cases) {
            String name = (String) c[0];
            @SuppressWarnings("unchecked")
            Function<Long, byte[]> bad = (Function<Long, byte[]>) c[1];
            FakeServer.Locks locks = new FakeServer.Locks();
            FakeServer srv = server((s, n) -> {
                s.hello();
                if (n == 1) {
                    Frame a = s.readRequest();
                    s.sendRaw(bad.apply(a.id));
                    // The client must end the session at once: no further frame, no waiting.
                    try {
                        Frame more = s.poll(10_000);
                        throw new AssertionError(more == null ? "the client kept the session open" : "the client sent " + more + " instead of closing");
                    } catch (FakeServer.Done expected) {
                        return;
                    }
                }
                locks.serve(s);
            });
            TicketBroker b = broker(srv.addr());
            IndeterminateException e = assertThrows(IndeterminateException.class,
                    () -> b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO), name);
            if (name.startsWith("E")) {
                assertTrue(e.serverErrorCode() == 12 || e.serverErrorCode() == 11, name + ": code " + e.serverErrorCode());
            }
            // The session was replaced by a new one, on which calls work again.
            assertNotNull(b.acquireBlocking("k2", ZERO, S, ZERO), name);
            assertTrue(srv.connections.get() >= 2, name + ": the session was not ended");
            assertEquals(2, srv.received(type(Type.ACQUIRE)).size(), name + ": an acquire was re-sent");
            srv.checkScripts();
        }
    }

    // ---- Rule 4: B is final and returned at once; no internal retry ----

    @Test
    void rule4_capacityRejectIsFinalAndNotRetried() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.ACQUIRE) {
                    s.send(FakeServer.capacity(f.id, CapacityException.KEY_WAITERS));
                } else if (f.type == Type.DESCRIBE) {
                    Frame i = new Frame(Type.INFO);
                    i.id = f.id;
                    s.send(i);
                }
            }
        });
        TicketBroker b = broker(srv.addr());
        CapacityException e = assertThrows(CapacityException.class,
                () -> b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO));
        assertEquals(CapacityException.KEY_WAITERS, e.reason());
        assertEquals(TicketingException.RetryClass.OVERLOADED, e.retryClass());
        b.describeBlocking("k"); // later than any retry would have been sent
        assertEquals(1, srv.received(type(Type.ACQUIRE)).size(), "a capacity reject was retried");
        assertEquals(1, srv.connections.get(), "B must not end the session");
    }

    // ---- Rule 5: release retried with the exact token for an absolute 5 s; R ok, N not held, no answer = error ----

    @Test
    void rule5_releaseRetriesTheExactTokenAcrossReconnects() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            Frame f = s.readRequest();
            if (f.type == Type.ACQUIRE) {
                s.send(FakeServer.granted(f.id, 77, 30000, 0));
                f = s.readRequest();
            }
            if (n == 1) {
                s.close(); // the first release is lost with its connection
                return;
            }
            s.send(FakeServer.idOnly(Type.RELEASED, f.id));
            s.poll(10_000);
        });
        TicketBroker b = broker(srv.addr());
        Ticket t = b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), ZERO);
        assertEquals(77, t.getToken());
        t.releaseBlocking();
        List<Frame> ls = srv.await(2, type(Type.RELEASE));
        for (Frame l : ls) {
            assertEquals(77, l.token, "a release was sent with another token");
            assertEquals("k", new String(l.key));
        }
        t.releaseBlocking(); // a second call reports the first outcome without sending
        assertEquals(2, srv.received(type(Type.RELEASE)).size());
    }

    @Test
    void rule5_releaseWithoutAFinalAnswerIsAnErrorNotSuccess() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.ACQUIRE) {
                    s.send(FakeServer.granted(f.id, 5, 30000, 0));
                } else if (f.type == Type.RELEASE && n % 2 == 1) {
                    s.close(); // every other connection drops the release
                    return;
                }
                // on even connections the release is never answered
            }
        });
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseBound(Duration.ofMillis(800)));
        Ticket t = b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), ZERO);
        IndeterminateException e = assertThrows(IndeterminateException.class, t::releaseBlocking);
        assertTrue(e.getMessage().contains("outcome unknown"), e.getMessage());
        assertTrue(srv.received(type(Type.RELEASE)).size() >= 2, "the release was not retried after the connection was lost");
        for (Frame l : srv.received(type(Type.RELEASE))) {
            assertEquals(5, l.token);
        }
        // The same outcome is reported again, not presumed success.
        assertThrows(IndeterminateException.class, t::releaseBlocking);
    }

    @Test
    void rule5_notHeldIsReported() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        TicketBroker b = broker(srv.addr());
        Ticket t = b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), ZERO);
        b.releaseTokenBlocking("k", t.getToken());
        assertThrows(NotHeldException.class, t::releaseBlocking);
        assertThrows(NotHeldException.class, () -> b.releaseTokenBlocking("k", 12345));
        ExecutionException e = assertThrows(ExecutionException.class, () -> b.releaseTokenAsync("k", 999).get());
        assertInstanceOf(NotHeldException.class, e.getCause());
    }

    /**
     * N to a release sent again after the first attempt's answer was lost is
     * a NotHeldAfterRetryException (still a NotHeldException): the earlier
     * attempt may be what released it. N to a first attempt is a plain
     * NotHeldException (the Go client's TestReleaseNotHeldAfterLostAnswerIsDistinct).
     */
    @Test
    void rule5_notHeldAfterALostAnswerIsDistinct() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.RELEASE && f.token == 1 && n == 1) {
                    s.close(); // released, but the answer is lost with the connection
                    return;
                }
                s.send(FakeServer.idOnly(Type.NOT_HELD, f.id));
            }
        });
        TicketBroker b = broker(srv.addr());
        NotHeldException e = assertThrows(NotHeldException.class, () -> b.releaseTokenBlocking("k", 1));
        assertInstanceOf(NotHeldAfterRetryException.class, e, e.getMessage());
        assertTrue(e.getMessage().contains("earlier attempt"), e.getMessage());
        assertEquals(2, srv.received(type(Type.RELEASE)).size());
        e = assertThrows(NotHeldException.class, () -> b.releaseTokenBlocking("k", 2));
        assertFalse(e instanceof NotHeldAfterRetryException, "N to a first attempt: " + e);
    }

    // ---- Rule 6: a ticket only with positive conservative remaining time >= budget ----

    @Test
    void rule6_ticketOnlyWithEnoughConservativeTimeLeft() throws Exception {
        LinkedBlockingQueue<long[]> grants = new LinkedBlockingQueue<>(); // {lease_ms, queued_ms, token}
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.ACQUIRE) {
                    long[] g = grants.take();
                    s.send(FakeServer.granted(f.id, g[2], g[0], g[1]));
                } else if (f.type == Type.RELEASE) {
                    s.send(FakeServer.idOnly(Type.RELEASED, f.id));
                }
            }
        });
        List<long[]> observed = new java.util.concurrent.CopyOnWriteArrayList<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr())
                .releaseObserver((k, tok, err) -> observed.add(new long[] {tok, err == null ? 0 : 1})));
        // 50 ms lease: the conservative remaining time (x 0.99 - 100 ms) is negative.
        grants.add(new long[] {50, 0, 101});
        assertThrows(BudgetExceededException.class, () -> b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), ZERO));
        // A 2 s grant of a 30 s request (the server may grant less) leaves at most 1.88 s: enough for
        // 1.5 s, but the budget rounds up to 2 s.
        grants.add(new long[] {2000, 0, 102});
        assertThrows(BudgetExceededException.class, () -> b.acquireBlocking("k", ZERO, Duration.ofSeconds(30), Duration.ofMillis(1500)));
        // Every grant was released with its exact token.
        List<Frame> ls = srv.await(2, type(Type.RELEASE));
        assertEquals(Set.of(101L, 102L), Set.of(ls.get(0).token, ls.get(1).token));
        eventually("both compensating releases are reported", () -> observed.size() == 2);
        // A 2 s lease with a 1.95 s budget is refused before sending: no grant could leave it.
        assertThrows(InvalidArgumentException.class, () -> b.acquireBlocking("k", ZERO, Duration.ofSeconds(2), Duration.ofMillis(1950)));
        assertEquals(2, srv.received(type(Type.ACQUIRE)).size(), "an acquire whose budget cannot fit was sent");
        // Queued time counts: lease 1 s but queued 30 s leaves enough for a 20 s budget.
        grants.add(new long[] {1000, 30_000, 103});
        Ticket t = b.acquireBlocking("k", Duration.ofSeconds(40), Duration.ofSeconds(30), Duration.ofSeconds(20));
        assertEquals(103, t.getToken());
        assertTrue(t.getRemaining().compareTo(Duration.ofSeconds(20)) >= 0);
        assertTrue(t.getRemaining().compareTo(Duration.ofMillis(31_000 * 99 / 100 - 100)) <= 0, "deadline later than the formula allows");
        t.releaseBlocking();
    }

    // ---- Rule 7: cancel before send sends nothing; after a possible send: C, and a late grant is released ----

    @Test
    void rule7_cancelBeforeSendSendsNothing() throws Exception {
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
    void rule7_cancelAfterSendSendsCancelAndReleasesTheLateGrantExactly() throws Exception {
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

        // The same through an interrupted blocking call.
        CompletableFuture<Throwable> res = new CompletableFuture<>();
        Thread th = Threads.start("rules-test", () -> {
            try {
                b.acquireBlocking("k2", Duration.ofSeconds(30), Duration.ofSeconds(30), ZERO);
                res.complete(null);
            } catch (Throwable e) {
                res.complete(e);
            }
        });
        srv.await(2, type(Type.ACQUIRE));
        th.interrupt();
        assertInstanceOf(CancellationException.class, res.get(10, TimeUnit.SECONDS));
        srv.await(2, type(Type.CANCEL));
        srv.await(2, type(Type.RELEASE));
        // Other requests on the connection are not affected.
        assertEquals(1, srv.connections.get());
    }

    // ---- Rule 8: pings are answered; a silent server is detected ----

    @Test
    void rule8_pingsAreAnsweredAndASilentServerIsGivenUp() throws Exception {
        FakeServer srv = server((s, n) -> {
            if (n == 1) {
                s.hello(5000, 16);
                Frame p = new Frame(Type.PING);
                p.nonce = 0xfedcba9876543210L;
                s.send(p);
                Frame o = s.read();
                if (o.type != Type.PONG || o.nonce != p.nonce) {
                    throw new AssertionError("ping answered with " + o);
                }
                s.close();
                return;
            }
            s.hello(100, 16); // pings every 100 ms announced, then total silence
            s.readRequest();
            s.poll(30_000);
        });
        TicketBroker b = broker(srv.addr());
        srv.await(1, type(Type.PONG));
        // The acquire must go to the second, silent session.
        eventually("the broker is on the second session", () -> {
            Conn c = b.currentConn();
            return c != null && c.nodeId.equals("fake-2");
        });
        IndeterminateException e = assertThrows(IndeterminateException.class,
                () -> b.acquireBlocking("k", Duration.ofSeconds(20), Duration.ofSeconds(30), ZERO));
        assertTrue(e.getMessage().contains("sent nothing"), e.getMessage());
        srv.checkScripts();
    }

    @Test
    void rule8_withoutServerPingsTheClientPingsItself() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello(0, 16); // interval 0: the server sends no pings
            while (true) {
                Frame f = s.read();
                if (f.type == Type.PING && n > 1) {
                    Frame o = new Frame(Type.PONG);
                    o.nonce = f.nonce;
                    s.send(o);
                }
                // the first connection never answers: the client must give it up
            }
        });
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).clientPing(Duration.ofMillis(100)));
        srv.await(1, type(Type.PING));
        eventually("the silent first connection is replaced", () -> srv.connections.get() >= 2);
        b.waitReadyBlocking(Duration.ofSeconds(10));
    }

    // ---- Rule 9: refusals of the hello are reported promptly ----

    @Test
    void rule9_unauthenticatedIsReportedPromptly() throws Exception {
        FakeServer srv = server((s, n) -> {
            Frame h = s.read();
            if (!"right".equals(new String(h.text))) {
                s.send(FakeServer.error(5, "unknown token"));
                return;
            }
            throw new AssertionError("right token sent?");
        });
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).token("wrong").connectWait(Duration.ofSeconds(30)));
        UnauthenticatedException e = assertThrows(UnauthenticatedException.class, () -> b.waitReadyBlocking(Duration.ofSeconds(30)));
        assertTrue(e.getMessage().contains("token"), e.getMessage());
        assertThrows(UnauthenticatedException.class, () -> b.acquireBlocking("k", ZERO, S, ZERO));
        assertEquals(0, srv.received(type(Type.ACQUIRE)).size());
        assertEquals("wrong", new String(srv.await(1, type(Type.HELLO)).get(0).text));
    }

    @Test
    void rule9_notLeaderHelloRedirectsToTheLeader() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer leader = normalServer(locks);
        FakeServer follower = server((s, n) -> {
            s.read();
            s.send(FakeServer.notLeader(leader.addr()));
        });
        TicketBroker b = broker(follower.addr());
        b.acquireBlocking("k", ZERO, S, ZERO).releaseBlocking();
        assertEquals(1, leader.received(type(Type.ACQUIRE)).size());
        assertEquals(0, follower.received(type(Type.ACQUIRE)).size());
    }

    /**
     * Leader hints are followed at most (addresses + 2) times in a row, then
     * the broker backs off and starts again from its configured addresses (the
     * Go client's rule, docs/protocol.md). A names B, B names C, C names B: a
     * broker configured with A alone follows A→B→C→B (three hints), backs off,
     * and its fifth attempt starts a new round, not at C: at A for an M
     * answering the hello, at B (the last server that accepted a session) for
     * an M ending an established session.
     */
    @Test
    void rule9_leaderHintsAreFollowedAtMostAddressesPlusTwoTimesInARow() throws Exception {
        for (boolean inSession : new boolean[] {false, true}) {
            List<String> order = java.util.Collections.synchronizedList(new ArrayList<>());
            java.util.Map<String, String> names = new java.util.concurrent.ConcurrentHashMap<>();
            java.util.Map<String, String> next = new java.util.concurrent.ConcurrentHashMap<>();
            FakeServer[] srv = new FakeServer[3];
            for (int i = 0; i < 3; i++) {
                String name = "ABC".substring(i, i + 1);
                srv[i] = server((se, n) -> {
                    if (inSession) {
                        se.hello();
                    } else {
                        se.read();
                    }
                    order.add(name);
                    se.send(FakeServer.notLeader(next.get(name)));
                    se.read(); // until the client hangs up
                });
                names.put(name, srv[i].addr());
            }
            next.put("A", names.get("B"));
            next.put("B", names.get("C"));
            next.put("C", names.get("B"));
            TicketBroker b = broker(TicketBroker.builder().addrs(names.get("A")));
            eventually("five attempts", () -> order.size() >= 5);
            // After the limit a new round starts with the last server that
            // accepted a session (B, when the Ms end sessions), else with A.
            assertEquals(List.of("A", "B", "C", "B", inSession ? "B" : "A"), List.copyOf(order).subList(0, 5),
                    (inSession ? "M ending sessions" : "M answering hellos") + ": hints followed after the limit");
            b.close();
        }
    }

    /**
     * A hello refusal by one address only moves the broker on (docs/protocol.md,
     * "Refusals"): with A refusing the token and B serving, waitReady and calls
     * succeed through B, never fail with A's refusal. Only when every address
     * refuses alike is the refusal reported promptly.
     */
    @Test
    void rule9_oneRefusingAddressDoesNotFailCalls() throws Exception {
        CountDownLatch refuse = new CountDownLatch(1);
        FakeServer refusing = server((s, n) -> {
            s.read();
            refuse.await();
            s.send(FakeServer.error(5, "wrong token"));
        });
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer good = normalServer(locks);
        TicketBroker b = broker(TicketBroker.builder().addrs(refusing.addr(), good.addr()));
        refusing.await(1, type(Type.HELLO));
        CompletableFuture<Void> ready = CompletableFuture.runAsync(() -> b.waitReadyBlocking(Duration.ofSeconds(20)));
        CompletableFuture<Ticket> t = b.acquireAsync("k", ZERO, S, ZERO);
        refuse.countDown();
        get(ready);
        get(t).releaseBlocking();

        FakeServer refusing2 = server((s, n) -> {
            s.read();
            s.send(FakeServer.error(5, "wrong token"));
        });
        TicketBroker all = broker(TicketBroker.builder().addrs(refusing.addr(), refusing2.addr()));
        UnauthenticatedException e = assertThrows(UnauthenticatedException.class, () -> all.waitReadyBlocking(Duration.ofSeconds(20)));
        assertEquals(5, e.serverErrorCode(), e.getMessage());
    }

    /**
     * Reconnect order (docs/protocol.md, "Order"): after a session ends
     * without a hint, the next round starts with the last server that accepted
     * a session, then the configured addresses. With A then B configured and
     * A's first session lost, the broker's next session is with A again.
     */
    /**
     * A session that the server ended with a frame (here E 11, stopping) was
     * on a server that answers: the next round starts with it. (A session that
     * died of silence or a drop is the opposite case, see
     * rule9_aSilentServerIsDialedLast.)
     */
    @Test
    void rule9_aLostSessionReconnectsToTheLastGoodServerFirst() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer a = server((s, n) -> {
            s.hello();
            if (n == 1) {
                s.readRequest(); // the first describe: the session ends before its answer
                s.send(FakeServer.error(11, "stopping"));
                s.close();
                return;
            }
            locks.serve(s);
        });
        FakeServer b2 = normalServer(locks);
        TicketBroker b = broker(TicketBroker.builder().addrs(a.addr(), b2.addr()));
        assertThrows(UnavailableException.class, () -> b.describeBlocking("k"));
        assertFalse(b.describeBlocking("k").held());
        assertEquals(2, a.received(type(Type.DESCRIBE)).size(), "the second describe went elsewhere");
        assertEquals(0, b2.connections.get(), "the broker skipped the last good server");
    }

    /**
     * A server that goes silent (paused, or cut off without resets) still
     * accepts TCP connections, so the reconnect after its session was given
     * up tries the other servers first (the Go client's
     * TestSilentServerIsDialedLast). Java dials one address at a time, so the
     * order alone decides which server gets the next session.
     */
    @Test
    void rule9_aSilentServerIsDialedLast() throws Exception {
        FakeServer silent = server((s, n) -> {
            if (n == 1) {
                s.hello(100, 16); // pings every 100 ms announced, then nothing
                s.poll(30_000);
            }
            // later connections: hung up at once (only counted)
        });
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer good = normalServer(locks);
        TicketBroker b = broker(TicketBroker.builder().addrs(silent.addr(), good.addr()));
        eventually("the broker reconnected to the other server", () -> {
            Conn c = b.currentConn();
            return c != null && c.addr.equals(good.addr());
        });
        assertEquals(1, good.connections.get());
        // The first listed server had the first session (and gave it up).
        assertEquals(1, silent.connections.get(), "the silent server was dialed again before the other one");
    }

    /**
     * Within a round the next address is tried at once; the broker backs off
     * only after every address of the round failed. With a backoff of an hour,
     * a first address that hangs up still leaves the broker connected through
     * the second.
     */
    @Test
    void rule9_aFailedAddressMovesOnAtOnceWithinARound() throws Exception {
        FakeServer dead = server((s, n) -> s.close()); // accepts and hangs up at once
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer good = normalServer(locks);
        TicketBroker b = TicketBroker.builder().addrs(dead.addr(), good.addr())
                .backoff(Duration.ofHours(1), Duration.ofHours(1)).connect();
        closers.add(b);
        b.waitReadyBlocking(Duration.ofSeconds(20));
        assertEquals(1, good.connections.get());
    }

    @Test
    void rule9_noConnectionMeansUnavailableWithNothingSent() throws Exception {
        FakeServer srv = server((s, n) -> s.close()); // accepts and hangs up at once
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).connectWait(Duration.ofMillis(300)));
        UnavailableException e = assertThrows(UnavailableException.class, () -> b.acquireBlocking("k", ZERO, S, ZERO));
        assertTrue(e.getMessage().contains("not sent"), e.getMessage());
        assertTrue(e.getMessage().contains("within the connect wait of 300 ms"), e.getMessage());
        e = assertThrows(UnavailableException.class, () -> b.waitReadyBlocking(Duration.ofMillis(100)));
        assertTrue(e.getMessage().contains("within the timeout of 100 ms"), e.getMessage());
    }

    /** A release that finds no connection within its bound says that bound, not the acquire's wait. */
    @Test
    void rule5_aReleaseWithoutConnectionNamesItsBound() throws Exception {
        FakeServer srv = server((s, n) -> s.close()); // accepts and hangs up at once
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseBound(Duration.ofMillis(300)));
        UnavailableException e = assertThrows(UnavailableException.class, () -> b.releaseTokenBlocking("k", 7));
        assertTrue(e.getMessage().contains("not sent"), e.getMessage());
        assertTrue(e.getMessage().contains("within the release's bound of 300 ms"), e.getMessage());
    }

    // ---- Rule 10: the connection's in-flight limit is respected ----

    @Test
    void rule10_inFlightLimitIsRespected() throws Exception {
        LinkedBlockingQueue<Long> ids = new LinkedBlockingQueue<>();
        CountDownLatch answer = new CountDownLatch(1);
        FakeServer srv = server((s, n) -> {
            s.hello(5000, 1);
            Frame a1 = s.readRequest();
            answer.await();
            s.send(FakeServer.granted(a1.id, 1, 30000, 0));
            Frame a2 = s.readRequest();
            ids.add(a1.id);
            ids.add(a2.id);
            s.send(FakeServer.granted(a2.id, 2, 30000, 0));
            s.poll(30_000);
        });
        TicketBroker b = broker(srv.addr());
        CompletableFuture<Ticket> f1 = b.acquireAsync("a", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
        srv.await(1, type(Type.ACQUIRE));
        CompletableFuture<Ticket> f2 = b.acquireAsync("b", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
        eventually("the second acquire waits for a free slot", () -> b.currentConn() != null && b.currentConn().slotWaiters() == 1);
        assertEquals(1, srv.received(type(Type.ACQUIRE)).size(), "a request over the in-flight limit was sent");
        answer.countDown();
        assertEquals(1, get(f1).getToken());
        assertEquals(2, get(f2).getToken());
    }

    @Test
    void rule10_acquiresAndOtherRequestsHaveSeparateInFlightLimits() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello(5000, 1);
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.DESCRIBE) {
                    Frame i = new Frame(Type.INFO);
                    i.id = f.id;
                    s.send(i);
                } else if (f.type == Type.RELEASE) {
                    s.send(FakeServer.idOnly(Type.NOT_HELD, f.id));
                }
                // the acquire waits
            }
        });
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).connectWait(Duration.ofSeconds(20)));
        CompletableFuture<Ticket> waiting = b.acquireAsync("a", Duration.ofSeconds(30), Duration.ofSeconds(30), ZERO);
        srv.await(1, type(Type.ACQUIRE));
        // The one acquire slot is taken; describes and releases have their own.
        assertFalse(b.describeBlocking("a").held());
        assertThrows(NotHeldException.class, () -> b.releaseTokenBlocking("a", 5));
        // A second acquire waits for the acquire slot, having sent nothing.
        CompletableFuture<Ticket> second = b.acquireAsync("b", Duration.ofSeconds(30), Duration.ofSeconds(30), ZERO);
        eventually("the second acquire waits for a slot", () -> b.currentConn() != null && b.currentConn().slotWaiters() == 1);
        assertEquals(1, srv.received(type(Type.ACQUIRE)).size());
        waiting.cancel(true);
        second.cancel(true);
    }

    // ---- Rule 11: queued acquires; a second Q is a protocol error ----

    @Test
    void rule11_queuedThenGranted() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            Frame a = s.readRequest();
            Frame q = new Frame(Type.QUEUED);
            q.id = a.id;
            q.count = 1;
            s.send(q);
            if (n == 1) {
                s.send(FakeServer.granted(a.id, 9, 30000, 1500));
            } else {
                s.send(q); // a second Q: invalid
            }
            s.poll(30_000);
        });
        TicketBroker b = broker(srv.addr());
        Ticket t = b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
        assertEquals(9, t.getToken());
        assertEquals(Duration.ofMillis(1500), t.getQueued());
        srv.connections.get();
        // drop the first session so the next acquire meets the second script
        b.currentConn().fail(new Conn.Failure(Conn.Kind.DROP, "test", "", 0, "test"));
        eventually("reconnected", () -> srv.connections.get() == 2 && b.currentConn() != null);
        assertThrows(IndeterminateException.class, () -> b.acquireBlocking("k", Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO));
    }

    // ---- Rule 12: close ----

    @Test
    void rule12_closeEndsPendingCallsAndLaterCallsAreClosed() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            s.readRequest(); // never answered
            s.poll(30_000);
        });
        TicketBroker b = broker(srv.addr());
        CompletableFuture<Ticket> f = b.acquireAsync("k", Duration.ofSeconds(30), Duration.ofSeconds(30), ZERO);
        srv.await(1, type(Type.ACQUIRE));
        b.close();
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        IndeterminateException ie = assertInstanceOf(IndeterminateException.class, e.getCause());
        assertTrue(ie.brokerClosed());
        assertThrows(ClosedException.class, () -> b.acquireBlocking("k", ZERO, S, ZERO));
        assertThrows(ClosedException.class, () -> b.waitReadyBlocking(S));
        b.close(); // twice is fine
    }

    // ---- Rule 13: close() on a ticket releases in the background on the executor ----

    @Test
    void rule13_ticketCloseReleasesInTheBackgroundOnTheExecutor() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        AtomicInteger ran = new AtomicInteger();
        Executor vt = Threads.releaseExecutor();
        Executor exec = r -> {
            ran.incrementAndGet();
            vt.execute(r);
        };
        LinkedBlockingQueue<Object[]> seen = new LinkedBlockingQueue<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).executor(exec)
                .releaseObserver((k, tok, err) -> seen.add(new Object[] {k, tok, err})));
        long token;
        try (Ticket t = b.acquireBlocking("key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
            token = t.getToken();
            assertTrue(locks.isHeld("key"));
        }
        Object[] o = seen.poll(20, TimeUnit.SECONDS);
        assertNotNull(o, "the background release was not reported");
        assertEquals("key", o[0]);
        assertEquals(token, o[1]);
        assertNull(o[2]);
        assertEquals(1, ran.get(), "the release did not run on the given executor");
        assertFalse(locks.isHeld("key"));
    }

    @Test
    void rule13_fullBackgroundQueueDropsAndReports() throws Exception {
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.ACQUIRE) {
                    s.send(FakeServer.granted(f.id, f.id, 30000, 0));
                }
                // releases are never answered: they stay pending
            }
        });
        LinkedBlockingQueue<TicketingException> seen = new LinkedBlockingQueue<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseQueue(1)
                .releaseObserver((k, tok, err) -> seen.add(err)));
        Ticket t1 = b.acquireBlocking("a", ZERO, S, ZERO);
        Ticket t2 = b.acquireBlocking("b", ZERO, S, ZERO);
        t1.close();
        t2.close();
        assertInstanceOf(ReleaseDroppedException.class, seen.poll(20, TimeUnit.SECONDS));
    }

    // ---- Rule 14: one multiplexed connection, safe from any number of (virtual) threads ----

    @Test
    void rule14_manyVirtualThreadsShareOneConnection() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = normalServer(locks);
        TicketBroker b = broker(srv.addr());
        b.waitReadyBlocking(Duration.ofSeconds(10));
        Set<Long> tokens = ConcurrentHashMap.newKeySet();
        List<Thread> ts = new ArrayList<>();
        AtomicInteger failures = new AtomicInteger();
        for (int i = 0; i < 200; i++) {
            String key = "k" + i;
            ts.add(Threads.start("rule14-" + i, () -> {
                try {
                    for (int j = 0; j < 5; j++) {
                        Ticket t = b.acquireBlocking(key, Duration.ofSeconds(5), Duration.ofSeconds(30), ZERO);
                        tokens.add(t.getToken());
                        t.releaseBlocking();
                    }
                } catch (RuntimeException e) {
                    failures.incrementAndGet();
                }
            }));
        }
        for (Thread t : ts) {
            t.join();
        }
        assertEquals(0, failures.get());
        assertEquals(1000, tokens.size(), "tokens were handed out twice");
        assertEquals(1, srv.connections.get(), "the broker used more than one connection");
    }

    // ---- the listener (metrics) ----

    @Test
    void theListenerSeesAcquiresSessionsLeaderChangesAndBackgroundReleases() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer a = server((s, n) -> {
            if (n > 1) {
                s.close(); // A is gone after its first session
                return;
            }
            s.hello();
            for (int i = 0; i < 2; i++) { // the acquire and the background release
                s.send(locks.answer(s.readRequest()));
            }
            s.close();
        });
        FakeServer b = normalServer(locks);
        java.util.Queue<String> events = new java.util.concurrent.ConcurrentLinkedQueue<>();
        TicketBroker broker = broker(TicketBroker.builder().addrs(a.addr(), b.addr()).listener(new BrokerListener() {
            @Override
            public void acquireFinished(String outcome, long nanos) {
                events.add("acquire " + outcome + (nanos > 0 ? "" : " without a duration"));
            }

            @Override
            public void sessionStarted(String address, boolean reconnect, boolean leaderChanged) {
                events.add("session " + (address.equals(a.addr()) ? "A" : "B") + " reconnect=" + reconnect + " leaderChanged=" + leaderChanged);
            }

            @Override
            public void backgroundReleaseFinished(TicketingException error) {
                events.add("background release " + (error == null ? "released" : error.getClass().getSimpleName()));
            }
        }));
        broker.acquireBlocking("k", ZERO, S, ZERO).close();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!events.contains("session B reconnect=true leaderChanged=true")) {
            assertTrue(System.nanoTime() < end, "no session with B: " + events);
            Thread.sleep(5);
        }
        broker.acquireBlocking("k2", ZERO, S, ZERO);
        assertThrows(NotAcquiredException.class, () -> broker.acquireBlocking("k2", ZERO, S, ZERO));
        List<String> l = new ArrayList<>(events);
        assertEquals(6, l.size(), l.toString());
        assertEquals(List.of("session A reconnect=false leaderChanged=false", "acquire granted"), l.subList(0, 2), l.toString());
        // the release's answer and the end of A's session race: either may be told first
        assertEquals(Set.of("background release released", "session B reconnect=true leaderChanged=true"), Set.copyOf(l.subList(2, 4)), l.toString());
        assertEquals(List.of("acquire granted", "acquire not_acquired"), l.subList(4, 6), l.toString());
    }

    // ---- describe ----

    @Test
    void describeReadsTheKeyAndALostAnswerIsUnavailable() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            if (n == 1) {
                s.readRequest();
                s.close();
                return;
            }
            locks.serve(s);
        });
        TicketBroker b = broker(srv.addr());
        assertThrows(UnavailableException.class, () -> b.describeBlocking("k"));
        Ticket t = b.acquireBlocking("k", ZERO, S, ZERO);
        Description d = get(b.describeAsync("k"));
        assertTrue(d.held());
        assertEquals(t.getToken(), d.token());
        t.releaseBlocking();
        assertFalse(b.describeBlocking("k").held());
    }

    // ---- authorization: F is a final answer, the connection stays open ----

    static Frame forbidden(long id, int reason) {
        Frame f = new Frame(Type.FORBIDDEN);
        f.id = id;
        f.reason = reason;
        return f;
    }

    /**
     * A server that refuses every request on keys under "no/" (acquire and
     * describe by key, releases by owner) and serves the rest; a describe of
     * "busy" is a capacity reject (B 4), which a describe may get too.
     */
    FakeServer refusingServer(FakeServer.Locks locks) throws Exception {
        return server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                String key = new String(f.key, java.nio.charset.StandardCharsets.UTF_8);
                Frame a;
                if (key.startsWith("no/")) {
                    a = switch (f.type) {
                        case Type.ACQUIRE -> forbidden(f.id, PermissionDeniedException.KEY);
                        case Type.DESCRIBE -> forbidden(f.id, PermissionDeniedException.ROLE);
                        case Type.RELEASE, Type.RELEASE_OWNER -> forbidden(f.id, PermissionDeniedException.OWNER);
                        default -> null;
                    };
                } else if (f.type == Type.DESCRIBE && key.equals("busy")) {
                    a = FakeServer.capacity(f.id, CapacityException.IN_FLIGHT);
                } else {
                    a = locks.answer(f);
                }
                if (a != null) {
                    s.send(a);
                }
            }
        });
    }

    @Test
    void forbiddenIsAFinalPermissionDeniedAndTheConnectionStaysOpen() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = refusingServer(locks);
        TicketBroker b = broker(srv.addr());
        b.waitReadyBlocking(Duration.ofSeconds(10));

        PermissionDeniedException e = assertThrows(PermissionDeniedException.class,
                () -> b.acquireBlocking("no/1", Duration.ofSeconds(5), S, ZERO));
        assertEquals(PermissionDeniedException.KEY, e.reason());
        assertEquals(srv.addr(), e.addr());
        assertTrue(e.getMessage().contains("permission denied") && e.getMessage().contains(e.reasonText())
                && e.getMessage().contains("not acquired"), e.getMessage());
        assertEquals(TicketingException.RetryClass.NOT_RETRYABLE, e.retryClass());
        ExecutionException ae = assertThrows(ExecutionException.class,
                () -> b.acquireAsync("no/2", ZERO, S, ZERO).get(30, TimeUnit.SECONDS));
        assertInstanceOf(PermissionDeniedException.class, ae.getCause());

        PermissionDeniedException d = assertThrows(PermissionDeniedException.class, () -> b.describeBlocking("no/1"));
        assertEquals(PermissionDeniedException.ROLE, d.reason());
        CapacityException c = assertThrows(CapacityException.class, () -> b.describeBlocking("busy"));
        assertEquals(CapacityException.IN_FLIGHT, c.reason());

        // A refused release is final: it is sent once, never retried.
        PermissionDeniedException r = assertThrows(PermissionDeniedException.class, () -> b.releaseTokenBlocking("no/1", 7));
        assertEquals(PermissionDeniedException.OWNER, r.reason());
        assertTrue(r.getMessage().contains("not released"), r.getMessage());
        assertEquals(1, srv.received(f -> f.type == Type.RELEASE).size(), "a release answered F was sent again");

        // Every refusal left the connection open: the same one serves the next requests.
        Ticket t = b.acquireBlocking("yes/1", ZERO, S, ZERO);
        t.releaseBlocking();
        assertFalse(b.describeBlocking("yes/1").held());
        assertEquals(1, srv.connections.get(), "a refusal ended the connection");
    }

    @Test
    void aTicketsReleaseRefusedWithForbiddenIsReportedNotRetried() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                s.send(f.type == Type.RELEASE ? forbidden(f.id, PermissionDeniedException.OWNER) : locks.answer(f));
            }
        });
        List<TicketingException> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
        TicketBroker b = broker(TicketBroker.builder().addrs(srv.addr()).releaseObserver((k, tok, err) -> seen.add(err)));
        Ticket t = b.acquireBlocking("k", ZERO, S, ZERO);
        assertThrows(PermissionDeniedException.class, t::releaseBlocking);
        Ticket t2 = b.acquireBlocking("k2", ZERO, S, ZERO);
        t2.close(); // the background release reports the refusal to the observer
        eventually("the observer got the background release's outcome", () -> !seen.isEmpty());
        assertInstanceOf(PermissionDeniedException.class, seen.get(0));
        assertEquals(2, srv.received(f -> f.type == Type.RELEASE).size(), "a release answered F was sent again");
        assertEquals(1, srv.connections.get(), "a refusal ended the connection");
    }
}
