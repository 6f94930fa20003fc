package io.ticketing;

import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The broker's connection to the leader: a manager thread dials the servers
 * in rounds (the last server that accepted a session first, one that just
 * went silent last), follows the leader named by an {@code M} frame, backs
 * off with jitter after a whole round failed, and keeps the current session
 * and why the last attempt failed. Calls wait here for a live connection
 * ({@link #getConn}); a hello refused alike by every listed address is
 * reported to them promptly.
 */
final class Connector {
    private final Config cfg;
    private final Reporter reporter;
    private final Conn.Hooks hooks;
    private final ReentrantLock mu = new ReentrantLock();
    private final Condition changed = mu.newCondition();
    private Conn cur;
    private boolean closed; // close() was called: no new calls
    private boolean torn; // teardown started: no connections at all
    private TicketingException rejected; // a persistent hello refusal by every listed address alike, reported promptly
    private final Map<String, TicketingException> refusals = new HashMap<>(); // address -> its latest refusal
    private String lastErr; // why the last connection attempt or connection failed
    private final Thread manager;

    Connector(Config cfg, Reporter reporter, Conn.Hooks hooks) {
        this.cfg = cfg;
        this.reporter = reporter;
        this.hooks = hooks;
        this.manager = Threads.unstarted("ticketing-manager", this::run);
    }

    /** Starts connecting in the background. */
    void start() {
        manager.start();
    }

    private void run() {
        // One round of attempts, as in the Go client: the last server that
        // accepted a session, then the configured addresses in order, each
        // once; the broker backs off only after a whole round failed.
        ArrayDeque<String> round = new ArrayDeque<>();
        String lastGood = "";
        int sessions = 0;
        String lastDead = ""; // the server whose session just died (silent or dropped): dialed last
        int failures = 0;
        int follows = 0; // leader hints followed since the last backoff (the Go client's rule)
        String hint = "";
        while (!isTorn()) {
            String addr = hint;
            hint = "";
            if (addr.isEmpty()) {
                if (round.isEmpty()) {
                    LinkedHashSet<String> order = new LinkedHashSet<>();
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
                Reporter.LOG.log(Level.DEBUG, "ticketing: connection attempt failed: {0}", e.getMessage());
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
            reporter.tell(l -> l.sessionStarted(sessionAddr, reconnect, leaderChanged));
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
            Reporter.LOG.log(Level.DEBUG, "ticketing: connected to {0} (node {1})", addr, c.nodeId);
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
            Reporter.LOG.log(Level.INFO, "ticketing: connection ended: {0}", f.what());
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

    /** Whether teardown started: no connections at all any more. */
    boolean isTorn() {
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

    /** Waits for a change of the connection state, at most until deadlineNanos. */
    void awaitChange(long deadlineNanos) throws InterruptedException {
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
                    WrongClusterException wrong = wrongCluster();
                    if (wrong != null) {
                        // No server of the pinned cluster answered: say that one of another cluster did, and was refused.
                        throw new WrongClusterException(op + ": not sent: no server of cluster " + wrong.pinnedClusterId() + " answered "
                                + bound + ", and " + wrong.getMessage() + "; the broker keeps trying in the background", wrong);
                    }
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
        if (r instanceof WrongClusterException w) {
            return new WrongClusterException(m, w);
        }
        return new UnavailableException(m, r, r.serverErrorCode());
    }

    /** A listed server's refusal as a server of another cluster, or null. mu is held. */
    private WrongClusterException wrongCluster() {
        for (String a : cfg.addrs) {
            if (refusals.get(a) instanceof WrongClusterException w) {
                return w;
            }
        }
        return null;
    }

    /** The deadline of a call's wait for a connection: the connect wait from now. */
    long connectDeadline() {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(cfg.connectWaitMs);
    }

    /** The least time a request waits for its final answer on the live connection c (an acquire: on top of its wait). */
    long answerGraceMs(Conn c) {
        return Math.max(c.silenceMs(), cfg.answerGraceMs);
    }

    /** The current live connection, or null. */
    Conn currentConn() {
        mu.lock();
        try {
            return cur != null && !cur.dead() ? cur : null;
        } finally {
            mu.unlock();
        }
    }

    /** Why the last connection attempt or connection failed, while there is no live session; empty when connected. */
    Optional<String> connectionProblem() {
        mu.lock();
        try {
            if (cur != null && !cur.dead()) {
                return Optional.empty();
            }
            if (rejected != null) {
                return Optional.of(rejected.getMessage());
            }
            return Optional.of(lastErr != null ? lastErr : (closed ? "the broker is closed" : "not connected yet"));
        } finally {
            mu.unlock();
        }
    }

    /** The first step of close: new calls end with ClosedException. Returns false when close had already begun. */
    boolean markClosed() {
        mu.lock();
        try {
            if (closed) {
                return false;
            }
            closed = true;
            changed.signalAll();
            return true;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Close, after background releases drained: no connections at all any
     * more, and no call waits for one. Returns the session to end with
     * {@link #stop}, or null.
     */
    Conn tearDown() {
        mu.lock();
        try {
            torn = true;
            changed.signalAll();
            return cur;
        } finally {
            mu.unlock();
        }
    }

    /** The last step of close: the manager stops and the session c (from {@link #tearDown}) ends. */
    void stop(Conn c) {
        manager.interrupt();
        if (c != null) {
            c.fail(new Conn.Failure(Conn.Kind.CLOSED, c.addr, "", 0, ""));
        }
    }

    /** Waits for the manager thread to end (after {@link #stop}). */
    void awaitManager() throws InterruptedException {
        manager.join();
    }
}
