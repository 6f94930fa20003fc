package io.ticketing;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import org.jspecify.annotations.Nullable;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The Ticketing client: one per process, safe for use from any number of
 * threads. It keeps one connection to the cluster leader and multiplexes every
 * request over it, reconnecting in the background (to the leader named by an
 * {@code M} frame, otherwise to the listed addresses in turn, with jittered
 * exponential backoff).
 *
 * <pre>{@code
 * TicketBroker broker = TicketBroker.connect("127.0.0.1:5225");
 * broker.waitReadyBlocking(Duration.ofSeconds(5));
 * try (Ticket ticket = broker.acquireBlocking(
 *         "key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
 *     long token = ticket.getToken();
 *     // In the same DB transaction: verify/update the token high-water mark and do the business write.
 * }
 * }</pre>
 *
 * <p>Every call comes in a blocking form ({@code *Blocking}) and a
 * {@link CompletableFuture} form ({@code *Async}); the Kotlin module adds
 * {@code suspend} functions. All share the one connection. The blocking calls
 * park only on the answer and hold no monitor ({@code synchronized}) while
 * waiting or doing I/O, so Spring MVC controllers on virtual threads can call
 * them without pinning a carrier thread.
 *
 * <p>Arguments: wait is 0..255 s (0 is one immediate attempt that never
 * queues), lease 1..250 s, and the work budget (required, may be zero) at
 * most what an immediate grant of that lease leaves conservatively,
 * lease × 0.99 − 0.1 s (29 whole seconds of a 30 s lease). Fractions of a
 * second are rounded up to whole seconds, the budget's too; values out of
 * range, a budget no grant of that lease could leave and keys outside 1..1024
 * bytes are rejected with {@link InvalidArgumentException} before anything is
 * sent (the message gives the largest budget that fits), never clamped. Work
 * longer than 250 s is not supported.
 *
 * <p>Cancellation: interrupting a blocking call, or cancelling the future of an
 * async call, before the request was sent sends nothing. After it may have
 * been sent, the client sends a cancel ({@code C}) for the acquire and, should
 * the server grant it anyway, releases that exact token in the background. A
 * cancelled call ends with {@link CancellationException}.
 */
public final class TicketBroker implements AutoCloseable {
    /** Longest wait: 0 is one immediate attempt. */
    public static final Duration MAX_WAIT = Duration.ofSeconds(Type.MAX_WAIT);
    /** Shortest lease. */
    public static final Duration MIN_LEASE = Duration.ofSeconds(Type.MIN_LEASE);
    /** Longest lease, and the longest work budget. */
    public static final Duration MAX_LEASE = Duration.ofSeconds(Type.MAX_LEASE);
    /** Longest key in bytes. */
    public static final int MAX_KEY = Type.MAX_KEY;
    /**
     * How long a release (explicit, background or compensating) keeps retrying
     * the exact token, across reconnects, from the call (or from when a
     * background release was queued).
     */
    public static final Duration RELEASE_BOUND = Duration.ofSeconds(5);
    /** How many background releases may be pending at once; more are dropped and reported. */
    public static final int DEFAULT_RELEASE_QUEUE = 1024;
    /** Assumed worst-case clock rate difference, percent of lease plus queued time. */
    public static final int CLOCK_DRIFT_PERCENT = 1;
    /** Fixed margin subtracted from the conservative deadline (truncation to ms). */
    public static final Duration CLOCK_DRIFT_MARGIN = Duration.ofMillis(100);

    private static final System.Logger LOG = System.getLogger(TicketBroker.class.getName());
    private static final SecureRandom RANDOM = new SecureRandom();

    /** Receives the outcome of every background release (null error = the server answered R). */
    @FunctionalInterface
    public interface ReleaseObserver {
        /**
         * Called on the client's own threads; must not block.
         *
         * @param error null when released (R); {@link NotHeldException} for N;
         *     {@link PermissionDeniedException} for F (not retried);
         *     {@link ReleaseDroppedException} when it could not be queued; another
         *     exception when no final answer came within {@link #RELEASE_BOUND}
         * @param key the ticket's key
         * @param token the ticket's token
         */
        void released(String key, long token, @Nullable TicketingException error);
    }

    final Config cfg;
    private final ReentrantLock mu = new ReentrantLock();
    private final Condition changed = mu.newCondition();
    private Conn cur;
    private boolean closed; // close() was called: no new calls
    private boolean torn; // teardown started: no connections at all
    private TicketingException rejected; // a persistent hello refusal by every listed address alike, reported promptly
    private final java.util.Map<String, TicketingException> refusals = new java.util.HashMap<>(); // address -> its latest refusal
    private String lastErr; // why the last connection attempt or connection failed
    private final Thread manager;

    private final Semaphore bgPermits;
    private int bgActive;
    private boolean bgShut;
    private final Condition bgDone = mu.newCondition();

    private TicketBroker(Config cfg) {
        this.cfg = cfg;
        this.bgPermits = new Semaphore(cfg.releaseQueue);
        this.manager = Threads.unstarted("ticketing-manager", this::run);
        manager.start();
    }

    /**
     * A broker for a comma-separated list of "host:port" addresses, connecting in the background.
     *
     * @param addrs "host:port" addresses, comma-separated
     * @return the broker, connecting
     */
    public static TicketBroker connect(String addrs) {
        return builder().addrs(addrs).connect();
    }

    /**
     * A builder for the options: addresses, token, TLS, executor, release observer, timeouts.
     *
     * @return a builder with the defaults
     */
    public static Builder builder() {
        return new Builder();
    }

    /** Options of a broker; {@link #connect()} checks them and returns at once. */
    public static final class Builder {
        private final Config c = new Config();
        private String[] addrs;

        private Builder() {}

        /**
         * Server addresses, "host:port"; each may itself be a comma-separated list.
         *
         * @param addrs the addresses
         * @return this builder
         */
        public Builder addrs(String... addrs) {
            this.addrs = addrs;
            return this;
        }

        /**
         * The client token sent in the hello; it must match one of the server's client_tokens (at most 1024 bytes).
         *
         * @param token the token
         * @return this builder
         */
        public Builder token(String token) {
            c.token = Objects.requireNonNull(token);
            return this;
        }

        /**
         * The TLS mode (default off).
         *
         * @param mode the mode
         * @return this builder
         */
        public Builder tls(TlsMode mode) {
            c.tlsMode = Objects.requireNonNull(mode);
            return this;
        }

        /**
         * The executor that runs background releases ({@link Ticket#close()} and
         * compensating releases). By default each runs on its own virtual
         * thread, so releases never queue behind a fixed-size pool. Pass the
         * application's executor (Spring's applicationTaskExecutor) to use it.
         * @param executor the executor of background releases
         * @return this builder
         */
        public Builder executor(Executor executor) {
            c.executor = Objects.requireNonNull(executor);
            return this;
        }

        /**
         * Receives the outcome of every background release.
         *
         * @param observer the observer
         * @return this builder
         */
        public Builder releaseObserver(@Nullable ReleaseObserver observer) {
            c.observer = observer;
            return this;
        }

        /**
         * Receives acquire outcomes and latencies, session starts and
         * background release outcomes, for metrics.
         *
         * @param listener the listener
         * @return this builder
         */
        public Builder listener(BrokerListener listener) {
            c.listener = Objects.requireNonNull(listener);
            return this;
        }

        /**
         * Bounds one connection attempt: TCP connect, TLS handshake and hello (default 5 s).
         *
         * @param d the bound, positive
         * @return this builder
         */
        public Builder dialTimeout(Duration d) {
            c.dialTimeoutMs = positiveMs(d, "dial timeout");
            return this;
        }

        /**
         * How long a call waits for a connection to the leader (and for a free
         * in-flight slot) before giving up with nothing sent (default 10 s).
         * @param d the wait, positive
         * @return this builder
         */
        public Builder connectWait(Duration d) {
            c.connectWaitMs = positiveMs(d, "connect wait");
            return this;
        }

        /**
         * How many background releases may be pending at once (default {@link #DEFAULT_RELEASE_QUEUE}).
         *
         * @param n the most pending releases, positive
         * @return this builder
         */
        public Builder releaseQueue(int n) {
            if (n < 1) {
                throw new InvalidArgumentException("the release queue size must be at least 1");
            }
            c.releaseQueue = n;
            return this;
        }

        Builder releaseBound(Duration d) {
            c.releaseBoundMs = d.toMillis();
            return this;
        }

        Builder clientPing(Duration d) {
            c.clientPingMs = d.toMillis();
            return this;
        }

        Builder answerGrace(Duration d) {
            c.answerGraceMs = d.toMillis();
            return this;
        }

        Builder backoff(Duration base, Duration max) {
            c.backoffBaseMs = base.toMillis();
            c.backoffMaxMs = max.toMillis();
            return this;
        }

        private static long positiveMs(Duration d, String what) {
            if (d.isNegative() || d.isZero()) {
                throw new InvalidArgumentException("the " + what + " must be positive");
            }
            return Math.max(1, d.toMillis());
        }

        /**
         * Returns the broker at once; it connects in the background (use
         * {@link TicketBroker#waitReadyBlocking(Duration)}). Fails only for a bad
         * configuration: no or malformed addresses, an unreadable CA file or
         * client certificate, a token over 1024 bytes.
         * @return the broker, connecting in the background
         */
        public TicketBroker connect() {
            c.addrs = List.copyOf(HostPort.parseList(addrs == null ? new String[0] : addrs));
            if (c.token.getBytes(StandardCharsets.UTF_8).length > Type.MAX_TOKEN) {
                throw new InvalidArgumentException("the token is longer than " + Type.MAX_TOKEN + " bytes");
            }
            c.ssl = c.tlsMode.build();
            if (c.executor == null) {
                c.executor = Threads.releaseExecutor();
                c.ownExecutor = true;
            }
            return new TicketBroker(c);
        }
    }

    // ---- connection management ----

    private void run() {
        // One round of attempts, as in the Go client: the last server that
        // accepted a session, then the configured addresses in order, each
        // once; the broker backs off only after a whole round failed.
        java.util.ArrayDeque<String> round = new java.util.ArrayDeque<>();
        String lastGood = "";
        int sessions = 0;
        String lastDead = ""; // the server whose session just died (silent or dropped): dialed last
        int failures = 0;
        int follows = 0; // leader hints followed since the last backoff (the Go client's rule)
        String hint = "";
        Conn.Hooks hooks = new Conn.Hooks() {
            @Override
            public void lateGrant(String key, long token) {
                TicketBroker.this.lateGrant(key, token);
            }

            @Override
            public void orphaned(String key, byte[] owner, long untilNanos) {
                TicketBroker.this.orphaned(key, owner, untilNanos);
            }
        };
        while (!isTorn()) {
            String addr = hint;
            hint = "";
            if (addr.isEmpty()) {
                if (round.isEmpty()) {
                    java.util.LinkedHashSet<String> order = new java.util.LinkedHashSet<>();
                    if (!lastGood.isEmpty()) {
                        order.add(lastGood);
                    }
                    order.addAll(cfg.addrs);
                    if (!lastDead.isEmpty()) {
                        // A paused or cut-off server still accepts TCP (the
                        // kernel answers), so dialing it first would cost the
                        // failover a dial; try it after the others.
                        order.remove(lastDead);
                        order.add(lastDead);
                    }
                    round.addAll(order);
                }
                addr = round.poll();
            } else {
                round.remove(addr); // tried now, not again in this round
            }
            Conn c;
            try {
                c = Conn.dial(addr, cfg, 0, hooks);
            } catch (Conn.HelloException e) {
                if (isTorn()) {
                    return;
                }
                mu.lock();
                try {
                    lastErr = e.getMessage();
                    if (e.rejected) {
                        refusals.put(addr, e.error);
                    } else {
                        refusals.remove(addr);
                    }
                    rejected = refusedByAll();
                    changed.signalAll();
                } finally {
                    mu.unlock();
                }
                LOG.log(Level.DEBUG, "ticketing: connection attempt failed: {0}", e.getMessage());
                if (!e.hint.isEmpty() && !e.hint.equals(addr) && follows < maxFollows()) {
                    follows++;
                    hint = e.hint;
                    continue;
                }
                if (!round.isEmpty()) {
                    continue; // the next address of this round at once
                }
                follows = 0;
                failures++;
                if (!sleep(backoff(failures))) {
                    return;
                }
                continue;
            }
            boolean reconnect = sessions++ > 0;
            boolean leaderChanged = reconnect && !addr.equals(lastGood);
            String sessionAddr = addr;
            tell(l -> l.sessionStarted(sessionAddr, reconnect, leaderChanged));
            lastGood = addr;
            lastDead = "";
            round.clear(); // after this session, a new round starts with it
            mu.lock();
            try {
                if (torn) {
                    c.fail(new Conn.Failure(Conn.Kind.CLOSED, addr, "", 0, ""));
                    return;
                }
                cur = c;
                refusals.remove(addr);
                rejected = null;
                lastErr = null;
                changed.signalAll();
            } finally {
                mu.unlock();
            }
            LOG.log(Level.DEBUG, "ticketing: connected to {0} (node {1})", addr, c.nodeId);
            Conn.Failure f;
            try {
                f = c.done.get();
            } catch (InterruptedException | ExecutionException e) {
                c.fail(new Conn.Failure(Conn.Kind.CLOSED, addr, "", 0, ""));
                return;
            }
            mu.lock();
            try {
                if (cur == c) {
                    cur = null;
                }
                if (!f.closed()) {
                    lastErr = f.what();
                }
                changed.signalAll();
            } finally {
                mu.unlock();
            }
            if (isTorn()) {
                return;
            }
            LOG.log(Level.INFO, "ticketing: connection ended: {0}", f.what());
            if (f.kind() == Conn.Kind.SILENT || f.kind() == Conn.Kind.DROP) {
                lastDead = addr;
            }
            if (System.nanoTime() - c.bornNanos > TimeUnit.SECONDS.toNanos(1)) {
                failures = 0;
                follows = 0;
            }
            if (f.kind() == Conn.Kind.NOT_LEADER && !f.hint().isEmpty() && !f.hint().equals(addr) && follows < maxFollows()) {
                follows++;
                hint = f.hint();
                continue;
            }
            follows = 0;
            failures++;
            if (!sleep(backoff(failures))) {
                return;
            }
        }
    }

    /**
     * The refusal to report when every listed address refused the hello for
     * the same reason (same exception type and server code), else null: as in
     * the Go client, a refusal by one node only moves the broker on to the
     * next, and calls wait for a connection. mu is held.
     */
    private TicketingException refusedByAll() {
        TicketingException first = refusals.get(cfg.addrs.get(0));
        if (first == null) {
            return null;
        }
        for (String a : cfg.addrs) {
            TicketingException r = refusals.get(a);
            if (r == null || r.getClass() != first.getClass() || r.serverErrorCode() != first.serverErrorCode()) {
                return null;
            }
        }
        return first;
    }

    /**
     * How many leader hints (M naming a leader, answering a hello or ending a
     * session) are followed in a row before a backoff, as in the Go client
     * (docs/protocol.md): the whole list once plus a leader change, never a
     * storm between two servers that name each other.
     */
    private int maxFollows() {
        return cfg.addrs.size() + 2;
    }

    private boolean isTorn() {
        mu.lock();
        try {
            return torn;
        } finally {
            mu.unlock();
        }
    }

    /** Exponential backoff with jitter: uniform in [d/2, d], d doubling from the base up to the cap. */
    private long backoff(int n) {
        long d = cfg.backoffBaseMs;
        for (int i = 1; i < n && d < cfg.backoffMaxMs; i++) {
            d *= 2;
        }
        d = Math.min(d, cfg.backoffMaxMs);
        return d / 2 + ThreadLocalRandom.current().nextLong(d / 2 + 1);
    }

    private boolean sleep(long ms) {
        try {
            Thread.sleep(ms);
            return !isTorn();
        } catch (InterruptedException e) {
            return false;
        }
    }

    /** A G arrived for an acquire whose caller left: release that exact token in the background. */
    private void lateGrant(String key, long token) {
        enqueueRelease(key, token, null);
    }

    private final java.util.Set<Thread> ownerReleases = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /**
     * Set when a server ended the session with E 3 (unknown frame) while a
     * release by owner was in flight: it predates U, and sending U again
     * would only end more sessions. Orphaned grants then expire with their lease.
     */
    private volatile boolean ownerReleaseUnsupported;

    /**
     * An acquire's connection ended before its final answer: on the next
     * connection, ask the leader to end whatever that owner holds or waits for
     * on the key ({@code U}), retrying until the grant could no longer matter.
     */
    private void orphaned(String key, byte[] owner, long untilNanos) {
        if (isTorn() || ownerReleaseUnsupported) {
            return;
        }
        Thread t = Threads.unstarted("ticketing-release-owner", () -> {
            try {
                String outcome = releaseOwner(key, owner, untilNanos);
                LOG.log(Level.DEBUG, "ticketing: release by owner of {0} after a lost acquire answer: {1}", Arguments.quote(key), outcome);
            } catch (RuntimeException e) {
                if (!isTorn()) {
                    LOG.log(Level.WARNING, "ticketing: release by owner of {0} after a lost acquire answer failed; the key stays held until "
                            + "the lease expires: {1}", Arguments.quote(key), e.getMessage());
                }
            } finally {
                ownerReleases.remove(Thread.currentThread());
            }
        });
        ownerReleases.add(t);
        t.start();
    }

    /**
     * Ends whatever owner holds or waits for on key (U), across reconnects,
     * until untilNanos. Returns "released" (R) or "not held" (N).
     */
    String releaseOwner(String key, byte[] owner, long untilNanos) {
        String op = "release by owner " + java.util.HexFormat.of().formatHex(owner) + " of " + Arguments.quote(key);
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        try {
            while (true) {
                Conn c;
                try {
                    c = getConn(untilNanos, true, op, "before the release by owner's deadline (the acquire's wait plus twice its lease)");
                } catch (UnauthenticatedException | UnavailableException e) {
                    if (System.nanoTime() - untilNanos >= 0) {
                        throw e;
                    }
                    awaitChange(untilNanos); // every server refuses for now
                    continue;
                }
                Conn.Call cl = new Conn.Call(Type.RELEASE_OWNER, key, owner);
                Frame f = new Frame(Type.RELEASE_OWNER);
                f.owner = owner;
                f.key = kb;
                Conn.Start st = c.start(cl, f, untilNanos);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: no free request slot before the grant could expire");
                }
                Conn.Answer a;
                try {
                    a = cl.res.get(Math.max(0, untilNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw new IndeterminateException(op + ": no answer before the grant could expire", null, 0, false);
                    }
                }
                if (a.fail() != null) {
                    if (a.fail().closed()) {
                        throw new ClosedException(op + ": the broker was closed");
                    }
                    if (a.fail().kind() == Conn.Kind.SERVER_ERROR && a.fail().code() == WireUnknownFrame.CODE) {
                        if (!ownerReleaseUnsupported) {
                            ownerReleaseUnsupported = true;
                            LOG.log(Level.WARNING, "ticketing: the server {0} does not know the release-by-owner frame (U): upgrade the "
                                    + "servers; until then a grant whose answer was lost stays held until its lease expires", c.addr);
                        }
                        return "not supported by the server";
                    }
                    continue; // U is idempotent: again on the next connection
                }
                switch (a.frame().type) {
                    case Type.RELEASED -> {
                        return "released";
                    }
                    case Type.NOT_HELD -> {
                        return "not held";
                    }
                    case Type.FORBIDDEN -> throw forbidden(op, c.addr, a.frame().reason, "; not released");
                    default -> throw new CapacityException(op + ": rejected by a server capacity limit ("
                            + CapacityException.reasonName(a.frame().reason) + ")", a.frame().reason);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ClosedException(op + ": stopped (the broker is closing)");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The E code of an unknown frame type. */
    private static final class WireUnknownFrame {
        static final int CODE = io.ticketing.wire.ErrorCode.UNKNOWN_FRAME;
    }

    /** Test hook: whether U was found unsupported. */
    boolean ownerReleaseUnsupported() {
        return ownerReleaseUnsupported;
    }

    /** Waits for a change of the connection state, at most until deadlineNanos. */
    private void awaitChange(long deadlineNanos) throws InterruptedException {
        mu.lock();
        try {
            // at most a second: a change signalled just before this wait is not missed for long
            long left = Math.min(deadlineNanos - System.nanoTime(), TimeUnit.SECONDS.toNanos(1));
            if (left > 0) {
                changed.awaitNanos(left);
            }
        } finally {
            mu.unlock();
        }
    }

    /**
     * A live connection to the leader, waiting for one until deadlineNanos.
     * draining lets background releases run while close() drains them;
     * bound names the deadline in the message of UnavailableException.
     */
    Conn getConn(long deadlineNanos, boolean draining, String op, String bound) throws InterruptedException {
        mu.lock();
        try {
            while (true) {
                if (torn || (closed && !draining)) {
                    throw new ClosedException(op + ": the broker is closed; nothing was sent");
                }
                if (cur != null && !cur.dead()) {
                    return cur;
                }
                if (rejected != null) {
                    throw rejectedCopy(op, rejected);
                }
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    throw new UnavailableException(op + ": not sent: no connection to the leader"
                            + (lastErr != null ? " (last attempt: " + lastErr + ")" : "") + " " + bound + "; the broker keeps trying in the background");
                }
                changed.awaitNanos(left);
            }
        } finally {
            mu.unlock();
        }
    }

    private static TicketingException rejectedCopy(String op, TicketingException r) {
        String m = op + ": not sent: the server refused the connection (" + r.getMessage() + "); the broker keeps retrying in the background";
        if (r instanceof UnauthenticatedException) {
            return new UnauthenticatedException(m, r, r.serverErrorCode());
        }
        return new UnavailableException(m, r, r.serverErrorCode());
    }

    /** Test hook: the current live connection, or null. */
    Conn currentConn() {
        mu.lock();
        try {
            return cur != null && !cur.dead() ? cur : null;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Whether the broker has a live session with the leader now (health checks).
     *
     * @return true while a session with the leader is live
     */
    public boolean isConnected() {
        return currentConn() != null;
    }

    /**
     * Why the last connection attempt or connection failed, while there is no
     * live session; empty when connected (health checks).
     * @return the problem, or empty while connected
     */
    public java.util.Optional<String> connectionProblem() {
        mu.lock();
        try {
            if (cur != null && !cur.dead()) {
                return java.util.Optional.empty();
            }
            if (rejected != null) {
                return java.util.Optional.of(rejected.getMessage());
            }
            return java.util.Optional.of(lastErr != null ? lastErr : (closed ? "the broker is closed" : "not connected yet"));
        } finally {
            mu.unlock();
        }
    }

    private long connectDeadline() {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(cfg.connectWaitMs);
    }

    // ---- waitReady ----

    /**
     * Waits until the broker is connected to the leader and the hello is done.
     * Fails promptly with {@link UnauthenticatedException} (refused token or
     * client certificate) or {@link UnavailableException} for another
     * persistent refusal while the server refuses the connection (the broker
     * keeps retrying); with {@link UnavailableException} saying what the last
     * attempt ran into when the timeout passes first.
     * @param timeout how long to wait
     */
    public void waitReadyBlocking(Duration timeout) {
        try {
            getConn(System.nanoTime() + timeout.toNanos(), false, "connect", "within the timeout of " + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("connect: interrupted while waiting for the connection");
        }
    }

    /**
     * {@link #waitReadyBlocking(Duration)} as a future; cancelling it stops the wait.
     *
     * @param timeout how long to wait
     * @return completes when connected, or as {@link #waitReadyBlocking} would throw
     */
    public CompletableFuture<@Nullable Void> waitReadyAsync(Duration timeout) {
        return async(() -> {
            waitReadyBlocking(timeout);
            return null;
        }, null);
    }

    // ---- acquire ----

    /** The exception of a request answered F: final, nothing happened, the connection stays open. */
    static PermissionDeniedException forbidden(String op, String addr, int reason, String effect) {
        return new PermissionDeniedException(op + ": permission denied by the server " + addr + ": "
                + PermissionDeniedException.reasonName(reason) + effect + "; the same request is refused until the server's "
                + "principals change (docs/deployment.md, Authorization)", reason, addr);
    }

    /**
     * Asks for the ticket of key and waits for the answer.
     *
     * @param wait 0..255 s in the key's FIFO queue; 0 is one immediate attempt, never queued
     * @param lease 1..250 s, how long the ticket is held unless released
     * @param budget 0..lease × 0.99 − 0.1 s (rounded up), the minimum time the caller needs for its work:
     *     a ticket is handed over only if its conservative remaining time is positive and at least budget;
     *     otherwise it is released and {@link BudgetExceededException} thrown
     * @return the ticket
     * @throws NotAcquiredException not granted within wait
     * @throws CapacityException a server limit, at once, not retried
     * @throws IndeterminateException the request may have been sent but its final answer was lost: do not
     *     enter the critical section; it is never re-sent automatically
     * @throws BudgetExceededException granted too late for the budget (released)
     * @throws InvalidArgumentException out-of-range arguments, nothing sent
     * @throws UnauthenticatedException the server refuses the token or certificate
     * @throws PermissionDeniedException F: this client's principal may not acquire the key (final, nothing happened)
     * @throws UnavailableException no connection to the leader within the connect wait, nothing sent
     * @throws ClosedException the broker is closed
     * @throws CancellationException the thread was interrupted (the interrupt flag stays set)
     * @param key the key, 1..1024 bytes of UTF-8
     */
    public Ticket acquireBlocking(String key, Duration wait, Duration lease, Duration budget) {
        Arguments.AcquireArgs args = Arguments.checkAcquire(key, wait, lease, budget);
        return acquire(key, args);
    }

    /**
     * {@link #acquireBlocking} as a future. Cancelling the future before the
     * request was sent sends nothing; afterwards a cancel is sent and a grant
     * that arrives anyway is released in the background with its exact token.
     * Argument errors complete the future exceptionally (nothing is sent).
     * @param key the key, 1..1024 bytes of UTF-8
     * @param wait how long to wait in the key's queue, 0..255 s
     * @param lease the lease, 1..250 s
     * @param budget the work time needed, 0..lease
     * @return the ticket, or the exception {@link #acquireBlocking} would throw
     */
    public CompletableFuture<Ticket> acquireAsync(String key, Duration wait, Duration lease, Duration budget) {
        Arguments.AcquireArgs args;
        try {
            args = Arguments.checkAcquire(key, wait, lease, budget);
        } catch (InvalidArgumentException e) {
            return CompletableFuture.failedFuture(e);
        }
        return async(() -> acquire(key, args), Ticket::close);
    }

    private Ticket acquire(String key, Arguments.AcquireArgs args) {
        long start = System.nanoTime();
        Throwable failure = null;
        try {
            return acquireOnce(key, args);
        } catch (RuntimeException | Error e) {
            failure = e;
            throw e;
        } finally {
            long took = System.nanoTime() - start;
            String outcome = BrokerListener.outcomeOf(failure);
            tell(l -> l.acquireFinished(outcome, took));
        }
    }

    /** Calls the listener, if any; its failures are logged, never thrown. */
    private void tell(java.util.function.Consumer<BrokerListener> event) {
        BrokerListener l = cfg.listener;
        if (l == null) {
            return;
        }
        try {
            event.accept(l);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "ticketing: broker listener threw", e);
        }
    }

    private Ticket acquireOnce(String key, Arguments.AcquireArgs args) {
        String op = "acquire " + Arguments.quote(key);
        if (Thread.currentThread().isInterrupted()) {
            throw new CancellationException(op + ": cancelled before it was sent; nothing was sent");
        }
        byte[] owner = new byte[16];
        RANDOM.nextBytes(owner);
        long deadline = connectDeadline();
        while (true) {
            Conn c;
            Conn.Call cl = new Conn.Call(Type.ACQUIRE, key, owner);
            cl.spanNanos = TimeUnit.SECONDS.toNanos(args.waitSec() + 2L * args.leaseSec());
            Frame f = new Frame(Type.ACQUIRE);
            f.owner = owner;
            f.waitSec = args.waitSec();
            f.leaseSec = args.leaseSec();
            f.key = key.getBytes(StandardCharsets.UTF_8);
            try {
                c = getConn(deadline, false, op, "within the connect wait of " + cfg.connectWaitMs + " ms");
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue; // nothing was sent: try the next connection
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: the connection's in-flight limit (" + c.maxInFlight
                            + ") was reached and no slot freed within the connect wait");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CancellationException(op + ": cancelled before it was sent; nothing was sent");
            }
            return awaitAcquire(c, cl, args, op);
        }
    }

    private long answerGraceMs(Conn c) {
        return Math.max(c.silenceMs(), cfg.answerGraceMs);
    }

    private Ticket awaitAcquire(Conn c, Conn.Call cl, Arguments.AcquireArgs args, String op) {
        Conn.Answer a;
        try {
            a = cl.res.get(args.waitSec() * 1000L + answerGraceMs(c), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            Conn.Answer got = c.abandon(cl);
            if (got != null && got.fail() == null && got.frame().type != Type.GRANTED) {
                return finishAcquire(c, cl, got, args, op); // W, X or B arrived first
            }
            if (got != null && got.frame() != null && got.frame().type == Type.GRANTED) {
                lateGrant(cl.key, got.frame().token);
            }
            throw new CancellationException(op + ": cancelled after the request was sent; a cancel was sent for it and a grant that "
                    + "arrives anyway is released in the background; do not enter the critical section");
        } catch (TimeoutException e) {
            Conn.Answer got = c.abandon(cl);
            if (got != null) {
                return finishAcquire(c, cl, got, args, op);
            }
            throw new IndeterminateException(op + ": outcome unknown, the server " + c.addr + " sent no final answer within the wait plus "
                    + answerGraceMs(c) + " ms although the connection is alive; a cancel was sent and a late grant is released in the "
                    + "background; do not enter the critical section", null, 0, false);
        } catch (ExecutionException e) {
            throw new IllegalStateException(e); // the future is never completed exceptionally
        }
        return finishAcquire(c, cl, a, args, op);
    }

    private Ticket finishAcquire(Conn c, Conn.Call cl, Conn.Answer a, Arguments.AcquireArgs args, String op) {
        if (a.fail() != null) {
            Conn.Failure fl = a.fail();
            throw new IndeterminateException(op + ": outcome unknown, " + fl.what()
                    + " after the request was sent; do not enter the critical section", null, fl.code(), fl.closed());
        }
        Frame f = a.frame();
        switch (f.type) {
            case Type.GRANTED -> {
                long deadline = conservativeDeadline(cl.sentNanos, f.leaseMs, f.queuedMs);
                long rem = deadline - System.nanoTime();
                if (rem <= 0 || rem < args.budgetNanos()) {
                    lateGrant(cl.key, f.token);
                    throw new BudgetExceededException(op + ": granted token " + Long.toUnsignedString(f.token) + " with a " + f.leaseMs
                            + " ms lease after " + f.queuedMs + " ms in the queue, but only " + Math.max(rem, 0) / 1_000_000
                            + " ms of it conservatively remain, less than the work budget " + Duration.ofNanos(args.budgetNanos())
                            + "; the ticket is being released; do not enter the critical section");
                }
                return new Ticket(this, cl.key, f.token, deadline, f.leaseMs, f.queuedMs, c.nodeId);
            }
            case Type.NOT_ACQUIRED -> {
                if (args.waitSec() == 0) {
                    throw new NotAcquiredException(op + ": not acquired: the key is held or has waiters (one immediate attempt, wait 0)");
                }
                throw new NotAcquiredException(op + ": not acquired within the wait of " + args.waitSec() + " s");
            }
            case Type.CANCELLED -> throw new NotAcquiredException(op + ": not acquired: the server cancelled the request");
            case Type.FORBIDDEN -> throw forbidden(op, c.addr, f.reason, "; not acquired");
            default -> throw new CapacityException(op + ": not acquired: the server " + c.addr + " rejected it for capacity: "
                    + CapacityException.reasonName(f.reason) + "; the client does not retry it, back off before a new acquire", f.reason);
        }
    }

    /**
     * The latest moment, on this machine's monotonic clock, at which the
     * client may still believe it holds the ticket:
     * {@code sent + (lease + queued) × (1 − 1 %) − 100 ms}. sent is taken just
     * before the request's bytes are handed to the writer, so it precedes the
     * server's receipt; the server's lease ends no earlier than
     * receipt + queued + lease. The percentage allows for clock-rate
     * differences, the fixed margin for millisecond truncation.
     */
    static long conservativeDeadline(long sentNanos, long leaseMs, long queuedMs) {
        long span = TimeUnit.MILLISECONDS.toNanos(leaseMs + queuedMs);
        span -= span * CLOCK_DRIFT_PERCENT / 100;
        span -= CLOCK_DRIFT_MARGIN.toNanos();
        return sentNanos + span;
    }

    // ---- release ----

    /**
     * Releases key's ticket if token still holds it, for a ticket known only by
     * its key and token (one acquired by another process, or whose token was
     * persisted). Returns when the server answered R (the hold ended).
     *
     * @throws NotHeldException N: the ticket had already expired or been released, or the key is held under
     *     another token (a release never ends it); {@link NotHeldAfterRetryException} (a subclass) when N
     *     answered a release sent again after the first attempt's answer was lost: the earlier attempt may
     *     have released it
     * @throws CapacityException B
     * @throws PermissionDeniedException F: this client's principal may not release it (the key is outside its
     *     prefixes, or the ticket was granted to another principal): final, not retried, the ticket stays held
     * @throws IndeterminateException no final answer within {@link #RELEASE_BOUND} (5 s from this call),
     *     although a release may have reached the server; never presumed success
     * @throws UnavailableException no release could be sent within the bound
     * @throws InvalidArgumentException a key outside 1..1024 bytes or token 0; nothing sent
     * @param key the key
     * @param token the exact token to release
     */
    public void releaseTokenBlocking(String key, long token) {
        Arguments.checkRelease(key, token);
        release(key, token, System.nanoTime(), false);
    }

    /**
     * {@link #releaseTokenBlocking} as a future.
     *
     * @param key the key
     * @param token the exact token to release
     * @return completes when released, or with the exception {@link #releaseTokenBlocking} would throw
     */
    public CompletableFuture<@Nullable Void> releaseTokenAsync(String key, long token) {
        try {
            Arguments.checkRelease(key, token);
        } catch (InvalidArgumentException e) {
            return CompletableFuture.failedFuture(e);
        }
        long start = System.nanoTime();
        return async(() -> {
            release(key, token, start, false);
            return null;
        }, null);
    }

    /**
     * Releases key's exact token, retrying across reconnects until
     * start + RELEASE_BOUND. R returns, N is NotHeld, B is Capacity; no final
     * answer in time is an error (Indeterminate if a release may have been
     * sent, Unavailable if none could be), never success.
     */
    void release(String key, long token, long startNanos, boolean draining) {
        String op = "release of token " + Long.toUnsignedString(token) + " for " + Arguments.quote(key);
        long deadline = startNanos + TimeUnit.MILLISECONDS.toNanos(cfg.releaseBoundMs);
        int sent = 0;
        Conn.Failure lastFail = null;
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        try {
            while (true) {
                if (System.nanoTime() - deadline >= 0) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, false);
                    }
                    throw new UnavailableException(op + ": not sent: no connection to the leader within the release's bound of " + cfg.releaseBoundMs + " ms");
                }
                Conn c;
                try {
                    c = getConn(deadline, draining, op, "within the release's bound of " + cfg.releaseBoundMs + " ms");
                } catch (ClosedException | UnavailableException | UnauthenticatedException e) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, e instanceof ClosedException);
                    }
                    throw e;
                }
                Conn.Call cl = new Conn.Call(Type.RELEASE, key, null);
                Frame f = new Frame(Type.RELEASE);
                f.token = token;
                f.key = kb;
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, false);
                    }
                    throw new UnavailableException(op + ": not sent: no free request slot on the connection before the deadline");
                }
                sent++;
                Conn.Answer a;
                try {
                    a = cl.res.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw unknownRelease(op, lastFail, false);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    c.abandon(cl);
                    throw new CancellationException(op + ": interrupted after the release was sent; its outcome is unknown");
                }
                if (a.fail() != null) {
                    lastFail = a.fail();
                    if (lastFail.closed()) {
                        throw unknownRelease(op, lastFail, true);
                    }
                    continue; // the exact token again, on the next connection
                }
                switch (a.frame().type) {
                    case Type.RELEASED -> {
                        return;
                    }
                    case Type.NOT_HELD -> {
                        if (sent > 1) {
                            // N may answer our own earlier attempt: a distinct
                            // subclass, so callers can tell (docs/protocol.md).
                            throw new NotHeldAfterRetryException(op + ": the server answered that this token does not hold the key; an earlier attempt whose answer was lost may have released it (or it had expired or been released before)");
                        }
                        throw new NotHeldException(op + ": the server answered that this token does not hold the key (it expired or was released before)");
                    }
                    // final: the same release would be refused again, so it is not retried
                    case Type.FORBIDDEN -> throw forbidden(op, c.addr, a.frame().reason, "; not released, the ticket stays held");
                    default -> throw new CapacityException(op + ": not released: rejected by a server capacity limit ("
                            + CapacityException.reasonName(a.frame().reason) + "); the ticket stays held until its lease expires", a.frame().reason);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            if (sent > 0) {
                throw new CancellationException(op + ": interrupted; an earlier attempt may have released it, outcome unknown");
            }
            throw new CancellationException(op + ": interrupted before it was sent; nothing was sent");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    private IndeterminateException unknownRelease(String op, Conn.Failure lastFail, boolean closed) {
        String why = lastFail != null ? lastFail.what() + " and no final answer came" : "no final answer came";
        return new IndeterminateException(op + ": outcome unknown: " + why + " within " + cfg.releaseBoundMs
                + " ms of the call; the ticket may still be held until its lease expires", null, lastFail != null ? lastFail.code() : 0,
                closed || (lastFail != null && lastFail.closed()));
    }

    /**
     * Starts a background release of key's exact token on the executor,
     * bounded by {@link #RELEASE_BOUND} from now. Its outcome goes to the
     * observer (and to ticket, when given). Returns false (and reports) when
     * it could not be queued.
     */
    boolean enqueueRelease(String key, long token, Ticket ticket) {
        String op = "release of token " + Long.toUnsignedString(token) + " for " + Arguments.quote(key);
        if (!bgPermits.tryAcquire()) {
            report(key, token, ticket, new ReleaseDroppedException(op + ": not released: " + cfg.releaseQueue
                    + " background releases are already pending; the ticket stays held until its lease expires (use releaseBlocking() to release synchronously)"));
            return false;
        }
        boolean shut;
        mu.lock();
        try {
            shut = bgShut;
            if (!shut) {
                bgActive++;
            }
        } finally {
            mu.unlock();
        }
        if (shut) {
            bgPermits.release();
            report(key, token, ticket, new ClosedException(op + ": not released: the broker is closed; the ticket stays held until its lease expires"));
            return false;
        }
        long at = System.nanoTime();
        try {
            cfg.executor.execute(() -> {
                TicketingException err = null;
                try {
                    release(key, token, at, true);
                } catch (TicketingException e) {
                    err = e;
                } catch (CancellationException e) {
                    err = new IndeterminateException(op + ": the background release was interrupted: " + e.getMessage(), e, 0, false);
                } finally {
                    bgPermits.release();
                    mu.lock();
                    try {
                        bgActive--;
                        bgDone.signalAll();
                    } finally {
                        mu.unlock();
                    }
                }
                report(key, token, ticket, err);
            });
        } catch (RejectedExecutionException e) {
            bgPermits.release();
            mu.lock();
            try {
                bgActive--;
                bgDone.signalAll();
            } finally {
                mu.unlock();
            }
            report(key, token, ticket, new ReleaseDroppedException(op + ": not released: the executor refused the background release ("
                    + e.getMessage() + "); the ticket stays held until its lease expires"));
            return false;
        }
        return true;
    }

    private void report(String key, long token, Ticket ticket, TicketingException err) {
        if (ticket != null) {
            ticket.finish(err);
        }
        if (err != null) {
            LOG.log(Level.WARNING, "ticketing: background release failed: {0}", err.getMessage());
        }
        tell(l -> l.backgroundReleaseFinished(err));
        ReleaseObserver o = cfg.observer;
        if (o != null) {
            try {
                o.released(key, token, err);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "ticketing: release observer threw", e);
            }
        }
    }

    // ---- describe ----

    /**
     * Reads the state of key (D/I). A refusal (F) is {@link PermissionDeniedException}, a capacity reject (B,
     * too many requests in flight) {@link CapacityException}. Read-only: a connection lost before the
     * answer is {@link UnavailableException}; nothing is retried.
     *
     * @param key the key
     * @return the key's state
     */
    public Description describeBlocking(String key) {
        int klen = key.getBytes(StandardCharsets.UTF_8).length;
        String op = "describe " + Arguments.quote(key);
        if (klen < 1 || klen > MAX_KEY) {
            throw new InvalidArgumentException(op + ": the key is " + klen + " bytes, it must be 1.." + MAX_KEY + " bytes; nothing was sent");
        }
        long deadline = connectDeadline();
        try {
            while (true) {
                Conn c = getConn(deadline, false, op, "within the connect wait of " + cfg.connectWaitMs + " ms");
                Conn.Call cl = new Conn.Call(Type.DESCRIBE, key, null);
                Frame f = new Frame(Type.DESCRIBE);
                f.key = key.getBytes(StandardCharsets.UTF_8);
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: no free request slot on the connection within the connect wait");
                }
                Conn.Answer a;
                try {
                    a = cl.res.get(answerGraceMs(c), TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw new UnavailableException(op + ": the server " + c.addr + " sent no answer within " + answerGraceMs(c) + " ms");
                    }
                }
                if (a.fail() != null) {
                    throw new UnavailableException(op + ": " + a.fail().what() + " before the answer", null, a.fail().code());
                }
                Frame i = a.frame();
                if (i.type == Type.FORBIDDEN) {
                    throw forbidden(op, c.addr, i.reason, "");
                }
                if (i.type == Type.CAPACITY) {
                    throw new CapacityException(op + ": rejected by a server capacity limit (" + CapacityException.reasonName(i.reason)
                            + "); back off before asking again", i.reason);
                }
                return new Description(key, (i.flags & Type.INFO_HELD) != 0, i.token, Owner.of(i.owner), Duration.ofMillis(i.remainingMs),
                        Duration.ofMillis(i.leaseMs), i.count);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException(op + ": interrupted");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * {@link #describeBlocking} as a future.
     *
     * @param key the key
     * @return the key's state, or the exception {@link #describeBlocking} would throw
     */
    public CompletableFuture<Description> describeAsync(String key) {
        return async(() -> describeBlocking(key), null);
    }

    // ---- async plumbing ----

    interface Body<T> {
        T run();
    }

    /**
     * Runs body on a new virtual thread; cancelling the returned future
     * interrupts it, which the body treats as cancellation. A result produced
     * after the future was cancelled is handed to orphan (a ticket: released).
     */
    private <T> CompletableFuture<T> async(Body<T> body, java.util.function.Consumer<T> orphan) {
        CompletableFuture<T> out = new CompletableFuture<>();
        Thread t = Threads.unstarted("ticketing-call", () -> {
            if (out.isDone()) {
                return; // cancelled before it started: nothing was sent
            }
            try {
                T v = body.run();
                if (!out.complete(v) && orphan != null && v != null) {
                    orphan.accept(v);
                }
            } catch (Throwable e) {
                out.completeExceptionally(e);
            }
        });
        out.whenComplete((v, e) -> {
            if (out.isCancelled()) {
                t.interrupt();
            }
        });
        t.start();
        return out;
    }

    // ---- close ----

    /**
     * Closes the broker. Calls still waiting end with {@link ClosedException}
     * (an acquire that may have been sent with {@link IndeterminateException},
     * {@code brokerClosed()} true). Background releases already started get a
     * short grace period (about a second) to finish while the connection is
     * still open; whatever remains is abandoned and reported to the release
     * observer (those tickets expire with their lease). Safe to call more than once.
     */
    @Override
    public void close() {
        Conn c = null;
        boolean first;
        mu.lock();
        try {
            first = !closed;
            if (first) {
                closed = true;
                bgShut = true;
                changed.signalAll();
                long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(cfg.drainMs);
                while (bgActive > 0) {
                    long left = end - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        bgDone.awaitNanos(left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                torn = true;
                c = cur;
                changed.signalAll();
            }
        } finally {
            mu.unlock();
        }
        if (first) {
            for (Thread t : ownerReleases) {
                t.interrupt(); // releases by owner wait for reconnects, possibly long: not for close
            }
            manager.interrupt();
            if (c != null) {
                c.fail(new Conn.Failure(Conn.Kind.CLOSED, c.addr, "", 0, ""));
            }
        }
        try {
            manager.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (first && cfg.ownExecutor && cfg.executor instanceof ExecutorService es) {
            es.shutdown();
        }
    }
}
