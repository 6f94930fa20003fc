package io.ticketing.coordination;

import io.ticketing.internal.CoordTransport;
import io.ticketing.internal.CoordTransport.Exchange;
import io.ticketing.internal.CoordTransport.Link;
import io.ticketing.internal.CoordTransport.Reply;
import io.ticketing.wire.Coord;
import io.ticketing.wire.Frame;
import io.ticketing.wire.WireException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * A session's attachment to the server, the one type that owns a session's
 * life: it attaches, restores the session on a new connection after a lost
 * one (within its timeout and the node's grace period), keeps it alive, and
 * keeps the conservative client deadline (docs/protocol.md, "A coordination
 * session's deadline"):
 *
 * <pre>deadline = t_sent + timeout × 0.99 − 100 ms</pre>
 *
 * where t_sent is the send time of the last request of the session, on its
 * current connection, answered with a status a server sends only after a
 * commit (SUCCESS, NOT_FOUND, ALREADY_EXISTS, PRECONDITION_FAILED, ABORTED).
 * At the deadline its leases end ({@link DeadlinePassedException}) whatever
 * the connection does; a restored session gets a hold back only from a new
 * acquire's answer. It sends a session's requests (sent again after a
 * restore when safe) and hands out its notifications; {@link Session}'s
 * semaphore, describe and watch calls, and the recipes, are request builders
 * over it.
 */
final class Attachment {
    /** The deadline's allowances, the same as a ticket's: the server's clock may run 1 % faster, the client's timers act 100 ms late. */
    static final int DRIFT_PERCENT = 1;
    static final long MARGIN_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long DEFAULT_GRACE_NANOS = TimeUnit.SECONDS.toNanos(10);

    private static final ScheduledExecutorService TIMERS = timers();

    private static ScheduledExecutorService timers() {
        ScheduledThreadPoolExecutor e = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "ticketing-coordination-timer");
            t.setDaemon(true);
            return t;
        });
        e.setRemoveOnCancelPolicy(true);
        return e;
    }

    /** One attachment of the session to a connection; lost completes when it ends or is given up. */
    private static final class Att {
        final Link link;
        final boolean shared;
        final CompletableFuture<Void> lost = new CompletableFuture<>();

        Att(Link link) {
            this.link = link;
            this.shared = link.sessions();
            link.done().whenComplete((v, e) -> lost.complete(null));
        }
    }

    private final CoordinationClient client;
    final CoordTransport t;
    private final String path;
    private final long timeoutNanos;
    private final long spanNanos;
    private final String desc;
    private final byte[] key = new byte[16];
    private final Consumer<Frame> listener = this::notification;

    private final ReentrantLock mu = new ReentrantLock();
    private final Condition changed = mu.newCondition();
    private long id;
    private long seq;
    private Att att;
    private Att lastShared;
    private RuntimeException ended;
    private boolean stopped;
    private long confirmed;
    private long deadline;
    private long graceNanos = DEFAULT_GRACE_NANOS;
    private final Map<String, Lease> leases = new HashMap<>();
    private final Map<Long, CompletableFuture<Integer>> watches = new HashMap<>();
    /**
     * Changed notifications that found no watch: the watch of a describe
     * whose answer the reader delivered but whose caller has not yet
     * registered it (the change came right after the answer). The last few
     * are kept, by request id, for that registration; the others are other
     * sessions' on a shared connection.
     */
    private final Map<Long, Integer> early = new java.util.LinkedHashMap<>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Integer> e) {
            return size() > 256;
        }
    };
    private ScheduledFuture<?> timer;
    private ScheduledFuture<?> keepAlive;
    private final Map<String, CompletableFuture<Void>> withdrawing = new HashMap<>();
    private Session.State reported = Session.State.ATTACHED;
    private final List<Consumer<Session.State>> stateListeners = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final CallbackQueue callbacks;

    private Attachment(CoordinationClient client, String path, Duration timeout, String desc) {
        this.client = client;
        this.t = client.transport;
        this.path = path;
        this.timeoutNanos = timeout.toNanos();
        this.spanNanos = timeoutNanos - timeoutNanos * DRIFT_PERCENT / 100 - MARGIN_NANOS;
        this.desc = desc;
        this.callbacks = new CallbackQueue(client.executor);
    }

    static Attachment start(CoordinationClient client, String path, Duration timeout, String desc) {
        String what = "start session on " + path;
        if (timeout.compareTo(Session.MIN_TIMEOUT) < 0 || timeout.compareTo(Session.MAX_TIMEOUT) > 0) {
            throw new BadRequestException("coordination: " + what + ": BAD_REQUEST: timeout: " + timeout.toMillis() + " ms, want "
                    + Session.MIN_TIMEOUT.toMillis() + " ms to " + Session.MAX_TIMEOUT.toMillis() + " ms (nothing was sent)");
        }
        CoordinationClient.checkSize(what, "path", path.getBytes(StandardCharsets.UTF_8).length, Coord.MAX_PATH);
        CoordinationClient.checkSize(what, "description", desc.getBytes(StandardCharsets.UTF_8).length, Coord.MAX_DESC);
        Attachment s = new Attachment(client, path, timeout, desc);
        new SecureRandom().nextBytes(s.key);
        long bound = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(s.t.answerGraceMs());
        Att a = s.connect(bound, what);
        Exchange ex = s.sendAttach(a, 0, 1);
        Reply r;
        try {
            r = ex == null ? null : await(ex.reply(), bound, s.t, what);
        } catch (RuntimeException e) {
            s.abandonStart(a, ex);
            throw e;
        }
        if (r == null) {
            s.drop(a);
            throw s.t.unavailable("coordination: " + what + ": the connection was lost before the answer");
        }
        Coord ans = s.decode(what, r);
        if (r.status() != Coord.SUCCESS) {
            s.drop(a);
            throw StatusException.of(what, r.status(), new String(ans.message, StandardCharsets.UTF_8));
        }
        s.mu.lock();
        try {
            s.id = ans.session;
            s.seq = ans.seqNo;
            s.attachedLocked(a);
            s.confirmLocked(a, ex.sentNanos());
        } finally {
            s.mu.unlock();
        }
        Thread runner = new Thread(s::run, "ticketing-coordination-session");
        runner.setDaemon(true);
        runner.start();
        long every = Math.max(s.spanNanos / 12, TimeUnit.MILLISECONDS.toNanos(1));
        s.keepAlive = TIMERS.scheduleWithFixedDelay(s::keepAliveTick, every, every, TimeUnit.NANOSECONDS);
        return s;
    }

    /**
     * Lets go of a start whose answer did not come within the call's bound:
     * a session the server starts anyway is stopped there once its answer
     * arrives, so that it does not stay attached, holding a place in the
     * node's session limit, until its timeout.
     */
    private void abandonStart(Att a, Exchange ex) {
        ex.reply().whenComplete((r, e) -> {
            if (r == null || r.capacity() || r.status() != Coord.SUCCESS) {
                drop(a);
                return;
            }
            Coord b = new Coord();
            try {
                b.session = Coord.decode(true, r.op(), r.status(), r.body()).session;
            } catch (WireException we) {
                drop(a);
                return;
            }
            int op = Coord.STOP | (a.shared ? Coord.FOR_SESSION : 0);
            try {
                Exchange stop = a.link.send(op, b.encode(false, op, 0), 0, null);
                if (stop == null) {
                    drop(a);
                } else {
                    stop.reply().whenComplete((sr, se) -> drop(a));
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                drop(a);
            }
        });
    }

    /**
     * The session's id.
     *
     * @return the id the server gave the session
     */
    long id() {
        mu.lock();
        try {
            return id;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Whether the session is attached to a connection now (not restoring, not ended).
     *
     * @return true when attached and not ended
     */
    boolean isAttached() {
        mu.lock();
        try {
            return att != null && ended == null;
        } finally {
            mu.unlock();
        }
    }

    /**
     * The session's current state. It checks the deadline when called: a
     * session whose deadline has passed is never reported ATTACHED, even
     * before the deadline's timer has run (a process resumed after a pause).
     *
     * @return ATTACHED, DETACHED or EXPIRED
     */
    Session.State state() {
        checkDeadline();
        mu.lock();
        try {
            if (ended != null) {
                return Session.State.EXPIRED;
            }
            return att != null && holdsValidLocked() ? Session.State.ATTACHED : Session.State.DETACHED;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Calls listener at every change of the session's state from now on
     * (DETACHED when its connection is lost or its deadline passes,
     * ATTACHED when it is restored, EXPIRED when it ends), in order, one
     * call at a time, on a thread of the client: never on the connection's
     * reader, so a listener that blocks delays only this session's
     * callbacks.
     *
     * @param listener called with each new state
     */
    void addStateListener(Consumer<Session.State> listener) {
        stateListeners.add(listener);
    }

    /**
     * Stops calling listener.
     *
     * @param listener a listener given to {@link Session#addStateListener}
     */
    void removeStateListener(Consumer<Session.State> listener) {
        stateListeners.remove(listener);
    }

    /** Reports st to the listeners if it is a change; never blocks (mu may be held). */
    private void reportLocked(Session.State st) {
        if (st == reported) {
            return;
        }
        reported = st;
        callbacks.push(() -> {
            for (Consumer<Session.State> l : stateListeners) {
                l.accept(st);
            }
        });
    }

    /** Why the session ended, or null while it lives. */
    RuntimeException endCause() {
        mu.lock();
        try {
            return ended;
        } finally {
            mu.unlock();
        }
    }

    Executor executor() {
        return client.executor;
    }

    // ---- connections and attaches ----

    private Att connect(long bound, String what) {
        try {
            Link shared = t.shared(bound, "coordination: " + what);
            if (shared.sessions()) {
                return new Att(shared);
            }
            return new Att(t.dedicated(bound, "coordination: " + what));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: " + what + ": interrupted");
        }
    }

    private void drop(Att a) {
        a.link.unlisten(listener);
        if (!a.shared) {
            a.link.close();
        }
    }

    private Exchange sendAttach(Att a, long session, long seqNo) {
        Coord b = new Coord();
        b.path = path.getBytes(StandardCharsets.UTF_8);
        b.session = session;
        b.seqNo = seqNo;
        b.timeoutMs = TimeUnit.NANOSECONDS.toMillis(timeoutNanos);
        b.key = key;
        b.desc = desc.getBytes(StandardCharsets.UTF_8);
        int op = Coord.ATTACH | (a.shared ? Coord.FOR_SESSION : 0);
        a.link.listen(listener);
        try {
            return a.link.send(op, b.encode(false, op, 0), 0, null);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: attach session: interrupted");
        }
    }

    private void attachedLocked(Att a) {
        att = a;
        if (a.shared) {
            lastShared = a;
        }
        changed.signalAll();
    }

    /** Waits for an answer until bound, or until the connection is lost (null). */
    static Reply await(CompletableFuture<Reply> reply, long bound, CoordTransport t, String what) {
        try {
            long left = bound - System.nanoTime();
            if (bound == Long.MAX_VALUE) {
                return reply.get();
            }
            return reply.get(Math.max(left, 0), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw t.unavailable("coordination: " + what + ": no answer within the call's bound");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: " + what + ": interrupted");
        } catch (ExecutionException e) {
            return null;
        }
    }

    private Coord decode(String what, Reply r) {
        try {
            return Coord.decode(true, r.op(), r.status(), r.body());
        } catch (WireException e) {
            throw t.indeterminate("coordination: " + what + ": malformed answer: " + e.getMessage());
        }
    }

    // ---- the deadline ----

    /** Statuses a server sends only after the request's commit: they move the deadline. */
    static boolean confirms(int status) {
        return status == Coord.SUCCESS || status == Coord.NOT_FOUND || status == Coord.ALREADY_EXISTS
                || status == Coord.PRECONDITION_FAILED || status == Coord.ABORTED;
    }

    private void confirmLocked(Att a, long sent) {
        if (ended != null || a != att || (confirmed != 0 && sent - confirmed <= 0)) {
            return;
        }
        confirmed = sent;
        deadline = sent + spanNanos;
        if (timer != null) {
            timer.cancel(false);
        }
        timer = TIMERS.schedule(this::checkDeadline, Math.max(deadline - System.nanoTime(), 0), TimeUnit.NANOSECONDS);
    }

    private void confirm(Att a, long sent) {
        mu.lock();
        try {
            confirmLocked(a, sent);
        } finally {
            mu.unlock();
        }
    }

    private boolean holdsValidLocked() {
        return ended == null && deadline - System.nanoTime() > 0;
    }

    /**
     * Ends the holds when the deadline has passed, and gives the current
     * connection up (a restore follows): called by the timer and by every
     * lease check.
     */
    void checkDeadline() {
        List<Lease> gone;
        Att give;
        mu.lock();
        try {
            if (ended != null || holdsValidLocked()) {
                return;
            }
            gone = new ArrayList<>(leases.values());
            leases.clear();
            give = att;
        } finally {
            mu.unlock();
        }
        DeadlinePassedException e = new DeadlinePassedException("coordination: session " + id + ": the server answered no request sent in the last "
                + TimeUnit.NANOSECONDS.toMillis(spanNanos) + " ms (timeout less the allowances): it may expire the session, so its holds are given up");
        for (Lease l : gone) {
            l.end(e);
        }
        if (give != null) {
            give.lost.complete(null);
        }
    }

    private void keepAliveTick() {
        Att a;
        long since;
        mu.lock();
        try {
            if (ended != null) {
                keepAlive.cancel(false);
                return;
            }
            a = att;
            since = System.nanoTime() - confirmed;
        } finally {
            mu.unlock();
        }
        // With nothing else answered for a third of the span, a describe of
        // the node; while none is answered, another every twelfth of it.
        if (a == null || since < spanNanos / 3) {
            return;
        }
        client.executor.execute(() -> {
            Coord b = new Coord();
            b.path = path.getBytes(StandardCharsets.UTF_8);
            try {
                Exchange ex = a.link.send(Coord.DESCRIBE_NODE, b.encode(false, Coord.DESCRIBE_NODE, 0), 0, null);
                if (ex == null) {
                    return;
                }
                ex.reply().thenAccept(r -> {
                    if (r != null && !r.capacity() && r.status() == Coord.SUCCESS) {
                        confirm(a, ex.sentNanos());
                        try {
                            long grace = Coord.decode(true, r.op(), r.status(), r.body()).graceMs;
                            if (grace > 0) {
                                mu.lock();
                                try {
                                    graceNanos = TimeUnit.MILLISECONDS.toNanos(grace);
                                } finally {
                                    mu.unlock();
                                }
                            }
                        } catch (WireException ignored) {
                            // a malformed keep-alive answer confirms nothing more
                        }
                    }
                });
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
    }

    // ---- restore ----

    private void run() {
        while (true) {
            Att a;
            mu.lock();
            try {
                a = att;
            } finally {
                mu.unlock();
            }
            if (a == null) {
                return;
            }
            a.lost.join();
            List<CompletableFuture<Integer>> fired;
            mu.lock();
            try {
                if (ended != null) {
                    return;
                }
                att = null;
                reportLocked(Session.State.DETACHED);
                fired = new ArrayList<>(watches.values());
                watches.clear();
                early.clear(); // request ids of the lost connection
                changed.signalAll();
            } finally {
                mu.unlock();
            }
            for (CompletableFuture<Integer> w : fired) {
                w.complete(0); // a notification may have been lost: describe again
            }
            drop(a);
            RuntimeException failed = restore();
            if (failed != null) {
                end(failed);
                return;
            }
        }
    }

    /** Reconnects and attaches again with a higher seq_no, for the timeout and the node's grace period; the failure that ended it, or null. */
    private RuntimeException restore() {
        long bound;
        mu.lock();
        try {
            bound = System.nanoTime() + timeoutNanos + graceNanos;
        } finally {
            mu.unlock();
        }
        String what = "restore session " + id;
        while (true) {
            mu.lock();
            try {
                if (ended != null) {
                    return ended;
                }
            } finally {
                mu.unlock();
            }
            Att a;
            try {
                a = connect(bound, what);
            } catch (io.ticketing.ClosedException e) {
                return e;
            } catch (RuntimeException e) {
                if (System.nanoTime() - bound >= 0) {
                    return new SessionExpiredException("coordination: " + what + ": not restored within its timeout and the node's grace period: " + e.getMessage());
                }
                if (!pause(bound)) {
                    return new SessionExpiredException("coordination: " + what + ": interrupted");
                }
                continue;
            }
            long s;
            mu.lock();
            try {
                s = ++seq;
            } finally {
                mu.unlock();
            }
            Exchange ex = sendAttach(a, id, s);
            Reply r;
            try {
                r = ex == null ? null : await(ex.reply(), bound, t, what);
            } catch (RuntimeException e) {
                drop(a);
                return new SessionExpiredException("coordination: " + what + ": " + e.getMessage());
            }
            if (r == null) {
                drop(a);
                continue;
            }
            Coord ans = decode(what, r);
            if (r.status() != Coord.SUCCESS) {
                drop(a);
                return StatusException.of(what, r.status(), new String(ans.message, StandardCharsets.UTF_8));
            }
            mu.lock();
            try {
                if (ended != null) {
                    drop(a);
                    return ended;
                }
                attachedLocked(a);
                confirmLocked(a, ex.sentNanos());
                reportLocked(Session.State.ATTACHED);
            } finally {
                mu.unlock();
            }
            return null;
        }
    }

    /** The reconnect backoff between failed dials of a restore (not a wait for a condition). */
    private static boolean pause(long bound) {
        try {
            Thread.sleep(Math.min(100, Math.max(TimeUnit.NANOSECONDS.toMillis(bound - System.nanoTime()), 1)));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    // ---- notifications (the reader hands them to a thread of the client) ----

    private void notification(Frame f) {
        try {
            client.executor.execute(() -> handle(f));
        } catch (java.util.concurrent.RejectedExecutionException e) {
            handle(f); // the client was closed: handle it here (it only completes futures)
        }
    }

    private void handle(Frame f) {
        Coord b;
        try {
            b = Coord.decode(true, f.op, f.code, f.text);
        } catch (WireException e) {
            return;
        }
        switch (f.op) {
            case Coord.LOST -> {
                String name = new String(b.name, StandardCharsets.UTF_8);
                Lease l;
                mu.lock();
                try {
                    l = leases.get(name);
                    if (l == null || l.token() != b.orderId) {
                        return;
                    }
                    leases.remove(name);
                } finally {
                    mu.unlock();
                }
                l.end(new LostException("coordination: " + name + ": the semaphore was deleted with force"));
            }
            case Coord.SESSION_ENDED -> {
                mu.lock();
                try {
                    if (b.session != id) {
                        return;
                    }
                    stopped = true;
                } finally {
                    mu.unlock();
                }
                end(b.reason == 2 ? t.closed("coordination: session " + b.session + " stopped")
                        : new SessionExpiredException("coordination: session " + b.session + " ended on the server (reason " + b.reason
                                + ": 1 expired, 3 node dropped)"));
            }
            case Coord.CHANGED -> {
                CompletableFuture<Integer> w;
                mu.lock();
                try {
                    w = watches.remove(f.id);
                    if (w == null) {
                        early.put(f.id, b.flags);
                    }
                } finally {
                    mu.unlock();
                }
                if (w != null) {
                    w.complete(b.flags);
                }
            }
            default -> {
                // Queued goes to its acquire
            }
        }
    }

    // ---- the end ----

    private void end(RuntimeException e) {
        List<Lease> gone;
        List<CompletableFuture<Integer>> fired;
        Att a;
        Att shared;
        boolean wasStopped;
        mu.lock();
        try {
            if (ended != null) {
                return;
            }
            ended = e;
            reportLocked(Session.State.EXPIRED);
            gone = new ArrayList<>(leases.values());
            leases.clear();
            fired = new ArrayList<>(watches.values());
            watches.clear();
            a = att;
            att = null;
            shared = lastShared;
            wasStopped = stopped;
            if (timer != null) {
                timer.cancel(false);
            }
            if (keepAlive != null) {
                keepAlive.cancel(false);
            }
            changed.signalAll();
        } finally {
            mu.unlock();
        }
        for (Lease l : gone) {
            l.end(e);
        }
        for (CompletableFuture<Integer> w : fired) {
            w.complete(0);
        }
        if (a != null) {
            a.lost.complete(null);
            drop(a);
        }
        if (shared != null && !wasStopped && !shared.link.done().isDone()) {
            // Given up without the server's word on a connection that lives
            // on: stop it there, or it would stay attached.
            Coord b = new Coord();
            b.session = id;
            int op = Coord.STOP | Coord.FOR_SESSION;
            try {
                shared.link.send(op, b.encode(false, op, 0), 0, null);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Stops the session: its holds are released at once. */
    void stop() {
        Att a;
        mu.lock();
        try {
            if (ended != null) {
                return;
            }
            a = att;
        } finally {
            mu.unlock();
        }
        if (a != null) {
            try {
                Coord ans = request("stop session", Coord.STOP, new Coord(), false, null, null,
                        System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(t.answerGraceMs()));
                mu.lock();
                try {
                    stopped = true;
                } finally {
                    mu.unlock();
                }
            } catch (SessionExpiredException e) {
                mu.lock();
                try {
                    stopped = true;
                } finally {
                    mu.unlock();
                }
            } catch (RuntimeException e) {
                // lost or refused: the session times out on the server instead
            }
        }
        end(t.closed("coordination: session closed"));
    }

    // ---- requests ----

    /** Waits until the session is attached (or ended) and returns its attachment. */
    private Att current(long bound, String what) {
        mu.lock();
        try {
            while (true) {
                if (ended != null) {
                    throw ended;
                }
                if (att != null) {
                    return att;
                }
                long left = bound - System.nanoTime();
                if (bound != Long.MAX_VALUE && left <= 0) {
                    throw t.unavailable("coordination: " + what + ": the session was not attached again within the call's bound");
                }
                if (bound == Long.MAX_VALUE) {
                    changed.await();
                } else {
                    changed.awaitNanos(left);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: " + what + ": interrupted");
        } finally {
            mu.unlock();
        }
    }

    /** Waits until the session has let go of a (so that a request sent again goes on the next attachment). */
    private void awaitDetached(Att a, long bound, String what) {
        mu.lock();
        try {
            while (att == a && ended == null) {
                long left = bound - System.nanoTime();
                if (bound != Long.MAX_VALUE && left <= 0) {
                    throw t.unavailable("coordination: " + what + ": the session was not attached again within the call's bound");
                }
                if (bound == Long.MAX_VALUE) {
                    changed.await();
                } else {
                    changed.awaitNanos(left);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: " + what + ": interrupted");
        } finally {
            mu.unlock();
        }
    }

    static boolean sessionOp(int op) {
        return op >= Coord.ATTACH && op <= Coord.DESCRIBE_SEMAPHORE;
    }

    /** The answer and the request id it answered. */
    record Answer(Coord body, long requestId) {}

    Coord request(String what, int op, Coord body, boolean safe, Consumer<Frame> note, Runnable before, long bound) {
        return requestId(what, op, body, safe, note, before, bound).body();
    }

    /**
     * Sends a request of this session. A safe request is sent again after a
     * restore when its connection was lost (not a third time when the server
     * ended the connection with E twice while it was in flight); an unsafe
     * one is indeterminate. Answers that follow a commit move the deadline.
     */
    Answer requestId(String what, int op, Coord body, boolean safe, Consumer<Frame> note, Runnable before, long bound) {
        CoordinationClient.checkSize(what, "name", body.name.length, Coord.MAX_NAME);
        CoordinationClient.checkSize(what, "data", body.data.length, Coord.MAX_DATA);
        int losses = 0;
        while (true) {
            Att a = current(bound, what);
            if (before != null) {
                before.run();
            }
            int wop = op;
            if (a.shared && sessionOp(op)) {
                wop |= Coord.FOR_SESSION;
                body.session = id;
            }
            Exchange ex;
            try {
                ex = a.link.send(wop, body.encode(false, wop, 0), body.data.length, note);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CancellationException("coordination: " + what + ": interrupted");
            }
            if (ex == null) {
                awaitDetached(a, bound, what);
                continue; // nothing was sent
            }
            Reply r;
            try {
                r = await(ex.reply().applyToEither(a.lost.thenApply(v -> (Reply) null), x -> x), bound, t, what);
            } catch (RuntimeException e) {
                throw e;
            }
            if (r == null) {
                if (a.link.endedByServer()) {
                    losses++;
                }
                awaitDetached(a, bound, what);
                if (safe && losses < 2) {
                    continue;
                }
                throw t.indeterminate(safe
                        ? "coordination: " + what + ": the server ended the connection twice with an error while the request was in flight: not sent again"
                        : "coordination: " + what + ": the connection was lost before the answer");
            }
            if (r.capacity()) {
                throw t.capacity("coordination: " + what + ": rejected by a server capacity limit", r.reason());
            }
            if (confirms(r.status())) {
                confirm(a, ex.sentNanos());
            }
            Coord ans = decode(what, r);
            if (r.status() != Coord.SUCCESS) {
                throw StatusException.of(what, r.status(), new String(ans.message, StandardCharsets.UTF_8));
            }
            return new Answer(ans, ex.id());
        }
    }

    /**
     * Makes the lease of an acquire's answer (or keeps the lease of the same
     * hold, its count updated), unless the session ended or its deadline
     * passed while the answer was on its way.
     */
    Lease hold(Session s, String name, String what, Coord ans) {
        Lease old;
        Lease fresh;
        mu.lock();
        try {
            if (ended != null) {
                throw ended;
            }
            if (!holdsValidLocked()) {
                // The deadline passed while the answer was on its way: the
                // hold is on the server, but this session cannot vouch for it.
                throw new DeadlinePassedException("coordination: " + what + ": the session's deadline passed before the answer arrived");
            }
            old = leases.get(name);
            if (old != null && old.token() == ans.orderId && old.endCause() == null) {
                old.count = ans.count;
                return old;
            }
            fresh = new Lease(s, name, ans.orderId, ans.count);
            leases.put(name, fresh);
        } finally {
            mu.unlock();
        }
        if (old != null) {
            old.end(new ReleasedException("coordination: " + name + ": replaced by a new hold"));
        }
        return fresh;
    }

    /** Registers the watch set by the describe that requestId answered (fired at once if its Changed came first). */
    void watch(long requestId, CompletableFuture<Integer> changed) {
        mu.lock();
        try {
            Integer fired = early.remove(requestId);
            if (fired != null) {
                changed.complete(fired);
            } else {
                watches.put(requestId, changed);
            }
        } finally {
            mu.unlock();
        }
    }

    /**
     * Releases name in the background after an interrupted acquire (ending
     * the session's lease of name first, if it has one): the caller returns at once, and the session's next acquire of name waits
     * for the withdrawal first, so that the withdrawal cannot end that one.
     */
    void withdraw(String name, Runnable release) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        CompletableFuture<Void> prev;
        Lease held;
        mu.lock();
        try {
            prev = withdrawing.put(name, done);
            held = leases.remove(name);
        } finally {
            mu.unlock();
        }
        if (held != null) {
            // The release gives up the session's whole hold of name: a
            // lease it already had must never look valid for a hold the
            // server may have given to another session.
            held.end(new ReleasedException("coordination: " + name
                    + ": an acquire of the held semaphore ended before its answer, and its withdrawal releases the hold"));
        }
        client.executor.execute(() -> {
            try {
                if (prev != null) {
                    prev.join();
                }
                release.run(); // bounded by the session: a session that ends releases everything
            } catch (RuntimeException e) {
                // the session ended: nothing is held or waited for
            } finally {
                mu.lock();
                try {
                    withdrawing.remove(name, done);
                } finally {
                    mu.unlock();
                }
                done.complete(null);
            }
        });
    }

    /** Waits until no withdrawal of name is under way. */
    void awaitWithdrawal(String name, String what) {
        CompletableFuture<Void> w;
        mu.lock();
        try {
            w = withdrawing.get(name);
        } finally {
            mu.unlock();
        }
        if (w == null) {
            return;
        }
        try {
            w.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("coordination: " + what + ": interrupted");
        } catch (ExecutionException e) {
            // a withdrawal never fails
        }
    }

    void forget(Lease l) {
        mu.lock();
        try {
            if (leases.get(l.name()) == l) {
                leases.remove(l.name());
            }
        } finally {
            mu.unlock();
        }
    }
}
