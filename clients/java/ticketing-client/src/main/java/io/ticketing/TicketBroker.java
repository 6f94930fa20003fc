package io.ticketing;

import io.ticketing.wire.Type;
import org.jspecify.annotations.Nullable;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;

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

    // The facade's collaborators, one rule each (as the Go client's files):
    // Connector dials and follows the leader (broker.go), Acquirer acquires
    // (acquire.go), Releaser and ReleaseQueue release exact tokens, now or in
    // the background, and OwnerReleaser ends grants whose answer was lost
    // (release.go), Describer reads a key (describe.go), Reporter tells the
    // log, the listener and the release observer. Conn is one session.
    final Config cfg;
    private final Connector connector;
    private final Releaser releaser;
    private final ReleaseQueue releases;
    private final OwnerReleaser ownerReleases;
    private final Acquirer acquirer;
    private final Describer describer;
    private final CoordBridge coordination;

    static {
        // The coordination client (io.ticketing.coordination) reaches the
        // connection layer through the non-exported bridge.
        io.ticketing.internal.Brokers.setOpener(b -> ((TicketBroker) b).coordination);
    }

    private TicketBroker(Config cfg) {
        this.cfg = cfg;
        Reporter reporter = new Reporter(cfg);
        // The connection's reader reports late grants and orphaned acquires
        // only once the manager has started, after the wiring below.
        Conn.Hooks hooks = new Conn.Hooks() {
            @Override
            public void lateGrant(String key, long token) {
                TicketBroker.this.acquirer.lateGrant(key, token);
            }

            @Override
            public void orphaned(String key, byte[] owner, long untilNanos) {
                TicketBroker.this.ownerReleases.orphaned(key, owner, untilNanos);
            }
        };
        this.connector = new Connector(cfg, reporter, hooks);
        this.coordination = new CoordBridge(cfg, connector, hooks);
        this.releaser = new Releaser(cfg, connector);
        this.releases = new ReleaseQueue(cfg, releaser, reporter);
        this.ownerReleases = new OwnerReleaser(connector);
        this.acquirer = new Acquirer(cfg, this, connector, releases, ownerReleases, reporter);
        this.describer = new Describer(cfg, connector);
        connector.start();
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

        /**
         * Pins the broker to the cluster with this ID (32 hex digits, as
         * ticketctl status prints cluster_id) from the start, instead of to the
         * cluster of the first server it reaches. A server of another cluster
         * is refused ({@link WrongClusterException}). After the cluster has been
         * restored from a snapshot (which gives it a new ID), give the new ID,
         * or restart clients that pinned the old one without this setting.
         *
         * @param clusterId the cluster's ID
         * @return this builder
         * @throws InvalidArgumentException when it is not 32 hex digits
         */
        public Builder clusterId(String clusterId) {
            ClusterPin.parse(Objects.requireNonNull(clusterId));
            c.clusterId = clusterId;
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
            c.pin = new ClusterPin(c.clusterId);
            if (c.executor == null) {
                c.executor = Threads.releaseExecutor();
                c.ownExecutor = true;
            }
            return new TicketBroker(c);
        }
    }

    // ---- connection state ----

    /**
     * Whether the broker has a live session with the leader now (health checks).
     *
     * @return true while a session with the leader is live
     */
    public boolean isConnected() {
        return connector.currentConn() != null;
    }

    /**
     * Why the last connection attempt or connection failed, while there is no
     * live session; empty when connected (health checks).
     * @return the problem, or empty while connected
     */
    public java.util.Optional<String> connectionProblem() {
        return connector.connectionProblem();
    }

    /**
     * The cluster this broker is pinned to: the one given to the builder, or
     * the cluster of the first server that reported one.
     *
     * @return its ID (32 hex digits), or empty until a server has reported one
     */
    public java.util.Optional<String> clusterId() {
        return java.util.Optional.ofNullable(cfg.pin.get());
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
            connector.getConn(System.nanoTime() + timeout.toNanos(), false, "connect", "within the timeout of " + timeout.toMillis() + " ms");
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
        return AsyncCalls.async(() -> {
            waitReadyBlocking(timeout);
            return null;
        }, null);
    }

    // ---- acquire ----

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
     *     enter the critical section; it is never re-sent automatically, except after a stopping server's
     *     {@code E} 11, which sends it again with the same owner and what remains of its wait on the next connection
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
        return acquirer.acquire(key, args);
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
        return AsyncCalls.async(() -> acquirer.acquire(key, args), Ticket::close);
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
        return AsyncCalls.async(() -> {
            release(key, token, start, false);
            return null;
        }, null);
    }

    /** Releases key's exact token with the release's bounded retries (for {@link Ticket#releaseBlocking()} too). */
    void release(String key, long token, long startNanos, boolean draining) {
        releaser.release(key, token, startNanos, draining);
    }

    /** Starts a background release of key's exact token; false (reported) when it could not be queued. */
    boolean enqueueRelease(String key, long token, Ticket ticket) {
        return releases.enqueue(key, token, ticket);
    }

    /** Test hook: whether U was found unsupported. */
    boolean ownerReleaseUnsupported() {
        return ownerReleases.unsupported();
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
        return describer.describe(key);
    }

    /**
     * {@link #describeBlocking} as a future.
     *
     * @param key the key
     * @return the key's state, or the exception {@link #describeBlocking} would throw
     */
    public CompletableFuture<Description> describeAsync(String key) {
        return AsyncCalls.async(() -> describeBlocking(key), null);
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
        boolean first = connector.markClosed();
        if (first) {
            releases.shutAndDrain(cfg.drainMs);
            Conn c = connector.tearDown();
            ownerReleases.interruptAll();
            connector.stop(c);
        }
        try {
            connector.awaitManager();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (first && cfg.ownExecutor && cfg.executor instanceof ExecutorService es) {
            es.shutdown();
        }
    }
}
