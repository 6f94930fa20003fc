package io.ticketing.shedlock;

import io.ticketing.ClosedException;
import io.ticketing.Description;
import io.ticketing.NotAcquiredException;
import io.ticketing.NotHeldException;
import io.ticketing.Ticket;
import io.ticketing.TicketBroker;
import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.AlreadyExistsException;
import io.ticketing.coordination.BadSessionException;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.DeadlinePassedException;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.NotFoundException;
import io.ticketing.coordination.SemaphoreDescription;
import io.ticketing.coordination.Session;
import io.ticketing.coordination.SessionExpiredException;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.jspecify.annotations.Nullable;

/**
 * A ShedLock {@link ExtensibleLockProvider} on Ticketing. Every lock carries
 * a fencing token ({@link FencedLock#token()}, {@link #tokenOf(String)}),
 * strictly increasing across the service, for a fenced write such as
 * {@code JdbcFence.check}.
 *
 * <p>How a lock is held depends on its {@code lockAtMostFor}:
 * <ul>
 * <li>up to {@link TicketBroker#MAX_LEASE} (250 s): a ticket on the key
 * {@code <prefix><name>} whose lease is {@code lockAtMostFor} rounded up to
 * whole seconds (at least 1 s). The server ends it at that lease even when
 * this process is gone.</li>
 * <li>longer: an exclusive hold of the semaphore {@code <prefix><name>} on
 * the coordination node ({@link Builder#node}) by this provider's session,
 * released by this process when {@code lockAtMostFor} has passed; if the
 * process dies, the hold ends when its session times out
 * ({@link Builder#sessionTimeout}).</li>
 * </ul>
 * Either form excludes the other: a lock taken one way checks that the
 * other is free and backs off if not. {@code lockAtLeastFor}: an
 * {@link SimpleLock#unlock() unlock} before {@code createdAt + lockAtLeastFor}
 * releases the hold at that time, on this provider's timer thread (a ticket
 * ends by its lease anyway if the process is gone first).
 * {@link SimpleLock#extend extend} moves the lock to the session form, with
 * a new token, from now on.
 *
 * <p>One provider holds each name at most once: a lock of a name this
 * provider holds is refused at once, without a request.
 */
public final class TicketingLockProvider implements ExtensibleLockProvider, AutoCloseable {
    /** The coordination node of the session form, unless {@link Builder#node} says otherwise. */
    public static final String DEFAULT_NODE = "/shedlock";
    /** The prefix of ticket keys and semaphore names, unless {@link Builder#prefix} says otherwise. */
    public static final String DEFAULT_PREFIX = "shedlock/";
    /** The session's timeout, unless {@link Builder#sessionTimeout} says otherwise. */
    public static final Duration DEFAULT_SESSION_TIMEOUT = Duration.ofSeconds(10);
    /** How long an extension waits for the semaphore while another process checks it. */
    static final Duration EXTEND_WAIT = Duration.ofSeconds(2);

    private final TicketBroker broker;
    private final String node;
    private final String prefix;
    private final Duration sessionTimeout;
    private final CoordinationClient coordination;
    private final ScheduledExecutorService timer;
    private final ConcurrentHashMap<String, FencedLock> held = new ConcurrentHashMap<>();
    // Guards session only; never held across a request except the session's creation.
    private final ReentrantLock sessionLock = new ReentrantLock();
    private @Nullable Session session;
    private volatile boolean closed;

    private TicketingLockProvider(Builder b) {
        this.broker = b.broker;
        this.node = b.node;
        this.prefix = b.prefix;
        this.sessionTimeout = b.sessionTimeout;
        this.coordination = CoordinationClient.create(broker);
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread th = new Thread(r, "ticketing-shedlock-timer");
            th.setDaemon(true);
            return th;
        });
        t.setRemoveOnCancelPolicy(true);
        this.timer = t;
    }

    /**
     * A provider on broker with the defaults.
     *
     * @param broker the broker whose connection the locks use (not closed with the provider)
     * @return the provider
     */
    public static TicketingLockProvider create(TicketBroker broker) {
        return builder(broker).build();
    }

    /**
     * A builder of a provider on broker.
     *
     * @param broker the broker whose connection the locks use (not closed with the provider)
     * @return the builder
     */
    public static Builder builder(TicketBroker broker) {
        return new Builder(broker);
    }

    /** Settings of a {@link TicketingLockProvider}. */
    public static final class Builder {
        private final TicketBroker broker;
        private String node = DEFAULT_NODE;
        private String prefix = DEFAULT_PREFIX;
        private Duration sessionTimeout = DEFAULT_SESSION_TIMEOUT;

        private Builder(TicketBroker broker) {
            this.broker = Objects.requireNonNull(broker, "broker");
        }

        /**
         * The coordination node of the semaphores (created when missing).
         *
         * @param path the node's path
         * @return this builder
         */
        public Builder node(String path) {
            if (path == null || path.isEmpty()) {
                throw new IllegalArgumentException("ShedLock provider: the coordination node's path is empty; give one such as " + DEFAULT_NODE);
            }
            this.node = path;
            return this;
        }

        /**
         * The prefix of ticket keys and semaphore names; a lock's name follows it.
         *
         * @param prefix the prefix, possibly empty
         * @return this builder
         */
        public Builder prefix(String prefix) {
            this.prefix = Objects.requireNonNull(prefix, "prefix");
            return this;
        }

        /**
         * The session's timeout: how long a semaphore hold outlives a dead process.
         *
         * @param timeout within {@link Session#MIN_TIMEOUT}..{@link Session#MAX_TIMEOUT}
         * @return this builder
         */
        public Builder sessionTimeout(Duration timeout) {
            if (timeout.compareTo(Session.MIN_TIMEOUT) < 0 || timeout.compareTo(Session.MAX_TIMEOUT) > 0) {
                throw new IllegalArgumentException("ShedLock provider: session timeout " + timeout + " is outside "
                        + Session.MIN_TIMEOUT + ".." + Session.MAX_TIMEOUT);
            }
            this.sessionTimeout = timeout;
            return this;
        }

        /**
         * The provider. It opens its session on first need.
         *
         * @return the provider
         */
        public TicketingLockProvider build() {
            return new TicketingLockProvider(this);
        }
    }

    /**
     * The ticket key, and semaphore name, of a lock.
     *
     * @param lockName the lock's name
     * @return the key
     */
    public String keyOf(String lockName) {
        return prefix + lockName;
    }

    /**
     * The coordination node of the semaphores.
     *
     * @return the node's path
     */
    public String node() {
        return node;
    }

    /**
     * The fencing token of the lock this provider holds under name: for the
     * job of a {@code @SchedulerLock(name = ...)}, which knows its name.
     *
     * @param lockName the lock's name
     * @return the token, empty when this provider does not hold the lock
     */
    public OptionalLong tokenOf(String lockName) {
        FencedLock l = held.get(lockName);
        return l != null && l.isValid() && l.state == FencedLock.HELD ? OptionalLong.of(l.token()) : OptionalLong.empty();
    }

    /**
     * How many locks this provider holds now (unlocked ones still kept for lockAtLeastFor included).
     *
     * @return the count
     */
    public int heldCount() {
        int n = 0;
        for (FencedLock l : held.values()) {
            if (l.state != FencedLock.ACQUIRING && l.isValid()) {
                n++;
            }
        }
        return n;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration config) {
        if (closed) {
            throw new IllegalStateException("ShedLock provider: closed; create a new one");
        }
        String name = config.getName();
        long startNanos = System.nanoTime();
        FencedLock claim = new FencedLock(this, name, startNanos, config);
        FencedLock prior = held.putIfAbsent(name, claim);
        if (prior != null) {
            // This provider holds the name; once its hold has ended, it may be taken again.
            if (prior.state != FencedLock.ACQUIRING && !prior.isValid() && held.replace(name, prior, claim)) {
                prior.cancelTimers();
            } else {
                return Optional.empty();
            }
        }
        boolean ok = false;
        try {
            ok = config.getLockAtMostFor().compareTo(TicketBroker.MAX_LEASE) <= 0 ? lockWithTicket(claim) : lockWithSemaphore(claim, Duration.ZERO);
            if (ok) {
                claim.state = FencedLock.HELD;
                claim.scheduleEnd(config.getLockAtMostFor());
            }
            return ok ? Optional.of(claim) : Optional.empty();
        } finally {
            if (!ok) {
                held.remove(name, claim);
            }
        }
    }

    private boolean lockWithTicket(FencedLock l) {
        Ticket t;
        try {
            t = broker.acquireBlocking(keyOf(l.name), Duration.ZERO, leaseOf(l.config.getLockAtMostFor()), Duration.ZERO);
        } catch (NotAcquiredException e) {
            return false;
        }
        boolean ok = false;
        try {
            ok = !semaphoreHeld(keyOf(l.name));
            if (ok) {
                l.ticket = t;
            }
            return ok;
        } finally {
            if (!ok) {
                t.releaseBlocking();
            }
        }
    }

    /** The ticket's lease: lockAtMostFor in whole seconds, rounded up, at least the shortest lease. */
    static Duration leaseOf(Duration lockAtMostFor) {
        long s = lockAtMostFor.getSeconds() + (lockAtMostFor.getNano() > 0 ? 1 : 0);
        return Duration.ofSeconds(Math.max(s, TicketBroker.MIN_LEASE.getSeconds()));
    }

    private boolean lockWithSemaphore(FencedLock l, Duration wait) {
        String sem = keyOf(l.name);
        Lease lease;
        try {
            lease = onSession(s -> s.acquireBlocking(sem, AcquireOptions.exclusive().ephemeral().timeout(wait)));
        } catch (NotAcquiredException e) {
            return false;
        }
        if (l.ticket == null && ticketHeld(sem)) {
            lease.releaseBlocking();
            return false;
        }
        l.lease = lease;
        lease.ended().thenRun(() -> held.remove(l.name, l));
        return true;
    }

    private boolean ticketHeld(String key) {
        Description d = broker.describeBlocking(key);
        return d.held();
    }

    private boolean semaphoreHeld(String sem) {
        try {
            SemaphoreDescription d = onSession(s -> s.describeSemaphoreBlocking(sem, true, false));
            return !d.owners().isEmpty();
        } catch (NotFoundException e) {
            return false;
        }
    }

    /** Runs op on the session, opening a new one once when the current one has ended. */
    private <T> T onSession(java.util.function.Function<Session, T> op) {
        Session s = session(null);
        try {
            return op.apply(s);
        } catch (SessionExpiredException | BadSessionException | DeadlinePassedException | ClosedException e) {
            if (closed) {
                throw e;
            }
            return op.apply(session(s));
        }
    }

    /** The session, opened (and the node created) when there is none or when it is stale. */
    private Session session(@Nullable Session stale) {
        sessionLock.lock();
        try {
            if (session != null && session != stale) {
                return session;
            }
            if (stale != null) {
                stale.close();
            }
            try {
                coordination.createNodeBlocking(node, NodeConfig.defaults());
            } catch (AlreadyExistsException e) {
                // made by another process or an earlier session
            }
            session = coordination.sessionBlocking(node, sessionTimeout, "shedlock");
            return session;
        } finally {
            sessionLock.unlock();
        }
    }

    boolean extendLock(FencedLock old, Duration lockAtMostFor, Duration lockAtLeastFor, FencedLock fresh) {
        if (old.lease != null) {
            fresh.lease = old.lease;
            fresh.lease.ended().thenRun(() -> held.remove(fresh.name, fresh));
        } else {
            fresh.ticket = old.ticket; // held while the semaphore is taken: the cross-check is ours
            if (!lockWithSemaphore(fresh, EXTEND_WAIT)) {
                fresh.ticket = null;
                return false;
            }
            releaseTicket(old.ticket);
            fresh.ticket = null;
        }
        if (!held.replace(old.name, old, fresh)) {
            // The old lock was taken for ended meanwhile: give back what the extension took.
            if (fresh.lease != old.lease && fresh.lease != null) {
                fresh.lease.releaseBlocking();
            }
            return false;
        }
        fresh.state = FencedLock.HELD;
        fresh.scheduleEnd(lockAtMostFor);
        return true;
    }

    void releaseTicket(@Nullable Ticket t) {
        if (t == null) {
            return;
        }
        try {
            broker.releaseTokenBlocking(t.getKey(), t.getToken());
        } catch (NotHeldException e) {
            // its lease ended first: nothing is held
        }
    }

    /** Ends the hold now, or at lockAtLeastFor's end if that is later. */
    void release(FencedLock l) {
        long leftNanos = l.atLeastUntilNanos - System.nanoTime();
        if (leftNanos > 0 && !closed) {
            l.cancelTimers();
            l.endTimer = timer.schedule(() -> releaseNow(l), leftNanos, TimeUnit.NANOSECONDS);
        } else {
            releaseNow(l);
        }
    }

    void releaseNow(FencedLock l) {
        l.cancelTimers();
        try {
            Lease lease = l.lease;
            if (lease != null) {
                boolean stood = lease.isValid();
                try {
                    lease.releaseBlocking();
                } catch (RuntimeException e) {
                    if (stood) {
                        throw e;
                    }
                    // the hold had ended already (its session, a forced delete): nothing left to release
                }
            } else {
                releaseTicket(l.ticket);
            }
        } finally {
            l.state = FencedLock.ENDED;
            held.remove(l.name, l);
        }
    }

    java.util.concurrent.ScheduledFuture<?> schedule(Runnable r, long nanos) {
        return timer.schedule(r, nanos, TimeUnit.NANOSECONDS);
    }

    /**
     * Releases every lock this provider holds (lockAtLeastFor cut short) and
     * closes its session; the broker stays open.
     */
    @Override
    public void close() {
        closed = true;
        for (FencedLock l : held.values()) {
            try {
                releaseNow(l);
            } catch (RuntimeException e) {
                // the broker may be gone: the ticket's lease or the session's timeout ends it
            }
        }
        timer.shutdownNow();
        sessionLock.lock();
        try {
            if (session != null) {
                session.close();
                session = null;
            }
        } finally {
            sessionLock.unlock();
        }
        coordination.close();
    }
}
