package io.ticketing.spring.integration;

import io.ticketing.ClosedException;
import io.ticketing.TicketBroker;
import io.ticketing.coordination.AlreadyExistsException;
import io.ticketing.coordination.BadSessionException;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.DeadlinePassedException;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.Session;
import io.ticketing.coordination.SessionExpiredException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.springframework.integration.support.locks.ExpirableLockRegistry;

/**
 * A Spring Integration {@code LockRegistry} on Ticketing coordination
 * semaphores: {@link #obtain} gives the {@link TicketingLock} of a key, an
 * exclusive hold of the ephemeral semaphore {@code <prefix><key>} on the
 * registry's coordination node, by the registry's one session. A hold lasts
 * until it is unlocked or the session ends (a process that dies loses its
 * locks when its session times out), so there is no time to live to renew.
 * Each hold has a fencing token ({@link TicketingLock#token()}).
 *
 * <p>For {@code LockRegistryLeaderInitiator}: a lock whose hold ended under
 * its holder (the session expired, the semaphore was deleted) refuses the
 * holder's next {@code tryLock}, so the initiator revokes leadership.
 *
 * <p>The interface is used raw: it is generic from Spring Integration 7 on
 * and not before, and this one class serves both.
 */
@SuppressWarnings("rawtypes")
public final class TicketingLockRegistry implements ExpirableLockRegistry, AutoCloseable {
    /** The coordination node of the locks, unless {@link Builder#node} says otherwise. */
    public static final String DEFAULT_NODE = "/spring-integration";
    /** The prefix of the semaphores' names, unless {@link Builder#prefix} says otherwise. */
    public static final String DEFAULT_PREFIX = "lock/";
    /** The session's timeout, unless {@link Builder#sessionTimeout} says otherwise. */
    public static final Duration DEFAULT_SESSION_TIMEOUT = Duration.ofSeconds(10);

    private final String node;
    private final String prefix;
    private final Duration sessionTimeout;
    private final CoordinationClient coordination;
    private final ConcurrentHashMap<String, TicketingLock> locks = new ConcurrentHashMap<>();
    // Guards session only.
    private final ReentrantLock sessionLock = new ReentrantLock();
    private @Nullable Session session;
    private volatile boolean closed;

    private TicketingLockRegistry(Builder b) {
        this.node = b.node;
        this.prefix = b.prefix;
        this.sessionTimeout = b.sessionTimeout;
        this.coordination = CoordinationClient.create(b.broker);
    }

    /**
     * A registry on broker with the defaults.
     *
     * @param broker the broker whose connection the locks use (not closed with the registry)
     * @return the registry
     */
    public static TicketingLockRegistry create(TicketBroker broker) {
        return builder(broker).build();
    }

    /**
     * A builder of a registry on broker.
     *
     * @param broker the broker whose connection the locks use (not closed with the registry)
     * @return the builder
     */
    public static Builder builder(TicketBroker broker) {
        return new Builder(broker);
    }

    /** Settings of a {@link TicketingLockRegistry}. */
    public static final class Builder {
        private final TicketBroker broker;
        private String node = DEFAULT_NODE;
        private String prefix = DEFAULT_PREFIX;
        private Duration sessionTimeout = DEFAULT_SESSION_TIMEOUT;

        private Builder(TicketBroker broker) {
            this.broker = Objects.requireNonNull(broker, "broker");
        }

        /**
         * The coordination node of the locks (created when missing).
         *
         * @param path the node's path
         * @return this builder
         */
        public Builder node(String path) {
            if (path == null || path.isEmpty()) {
                throw new IllegalArgumentException("lock registry: the coordination node's path is empty; give one such as " + DEFAULT_NODE);
            }
            this.node = path;
            return this;
        }

        /**
         * The prefix of the semaphores' names; the key's text follows it.
         *
         * @param prefix the prefix, possibly empty
         * @return this builder
         */
        public Builder prefix(String prefix) {
            this.prefix = Objects.requireNonNull(prefix, "prefix");
            return this;
        }

        /**
         * The session's timeout: how long a lock outlives a dead process.
         *
         * @param timeout within {@link Session#MIN_TIMEOUT}..{@link Session#MAX_TIMEOUT}
         * @return this builder
         */
        public Builder sessionTimeout(Duration timeout) {
            if (timeout.compareTo(Session.MIN_TIMEOUT) < 0 || timeout.compareTo(Session.MAX_TIMEOUT) > 0) {
                throw new IllegalArgumentException("lock registry: session timeout " + timeout + " is outside "
                        + Session.MIN_TIMEOUT + ".." + Session.MAX_TIMEOUT);
            }
            this.sessionTimeout = timeout;
            return this;
        }

        /**
         * The registry. It opens its session on first need.
         *
         * @return the registry
         */
        public TicketingLockRegistry build() {
            return new TicketingLockRegistry(this);
        }
    }

    /**
     * The lock of key (its {@code toString()}), the same object for the same key until it expires unused.
     *
     * @param key the lock's key
     * @return the lock
     */
    @Override
    public TicketingLock obtain(Object key) {
        if (closed) {
            throw new IllegalStateException("lock registry: closed; create a new one");
        }
        String k = String.valueOf(key);
        return locks.computeIfAbsent(k, x -> new TicketingLock(this, x, prefix + x));
    }

    /**
     * Forgets the locks not held and not used for age milliseconds.
     *
     * @param age the age in milliseconds
     */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.nanoTime();
        locks.values().removeIf(l -> l.unusedSince(now, Duration.ofMillis(age)));
    }

    /**
     * How many of this registry's locks a thread of this process holds now.
     *
     * @return the count
     */
    public int heldCount() {
        int n = 0;
        for (TicketingLock l : locks.values()) {
            if (l.isHeld()) {
                n++;
            }
        }
        return n;
    }

    /**
     * The coordination node of the locks.
     *
     * @return the node's path
     */
    public String node() {
        return node;
    }

    /** Runs op on the session, opening a new one once when the current one has ended. */
    <T> T onSession(Function<Session, T> op) {
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

    private Session session(@Nullable Session stale) {
        sessionLock.lock();
        try {
            if (closed) {
                throw new IllegalStateException("lock registry: closed; create a new one");
            }
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
            session = coordination.sessionBlocking(node, sessionTimeout, "spring-integration");
            return session;
        } finally {
            sessionLock.unlock();
        }
    }

    /** Closes the session: every lock it holds ends, on the server too. The broker stays open. */
    @Override
    public void close() {
        sessionLock.lock();
        try {
            closed = true;
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
