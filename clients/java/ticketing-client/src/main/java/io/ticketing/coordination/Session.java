package io.ticketing.coordination;

import io.ticketing.wire.Coord;
import io.ticketing.wire.Frame;
import io.ticketing.wire.WireException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A coordination session on one node. Its {@link Attachment} (internal)
 * attaches, restores the session after a lost connection, keeps it alive
 * and keeps the conservative client deadline (docs/protocol.md, "A
 * coordination session's deadline"): at the deadline the session's leases
 * end ({@link DeadlinePassedException}) whatever the connection does. The
 * semaphore, describe and watch calls here, and the recipes
 * ({@link #mutex}, {@link #election}, {@link #discovery},
 * {@link #publication}), are thin request builders over it, as the Go SDK
 * builds its own on its attachment.
 */
public final class Session implements AutoCloseable {
    /** Bounds of a session's timeout: below the minimum the deadline's allowances leave too little time between keep-alives. */
    public static final Duration MIN_TIMEOUT = Duration.ofMillis(500);
    /** The longest timeout a session may have. */
    public static final Duration MAX_TIMEOUT = Duration.ofMinutes(30);

    /** A session's state as its client sees it. */
    public enum State {
        /** Attached to a connection to the leader; holds and waits are in force. */
        ATTACHED,
        /**
         * The connection was lost, or the session's deadline passed: the
         * session is being restored and keeps its queue positions until its
         * timeout, but its leases have ended if the deadline passed.
         */
        DETACHED,
        /** The session ended (timed out, stopped, or its node dropped); its holds are released. */
        EXPIRED
    }

    private final Attachment attachment;

    private Session(Attachment attachment) {
        this.attachment = attachment;
    }

    static Session start(CoordinationClient client, String path, Duration timeout, String desc) {
        return new Session(Attachment.start(client, path, timeout, desc));
    }

    /**
     * The session's id.
     *
     * @return the id the server gave the session
     */
    public long id() {
        return attachment.id();
    }

    /**
     * Whether the session is attached to a connection now (not restoring, not ended).
     *
     * @return true when attached and not ended
     */
    public boolean isAttached() {
        return attachment.isAttached();
    }

    /**
     * The session's current state. It checks the deadline when called: a
     * session whose deadline has passed is never reported ATTACHED, even
     * before the deadline's timer has run (a process resumed after a pause).
     *
     * @return ATTACHED, DETACHED or EXPIRED
     */
    public State state() {
        return attachment.state();
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
    public void addStateListener(Consumer<State> listener) {
        attachment.addStateListener(listener);
    }

    /**
     * Stops calling listener.
     *
     * @param listener a listener given to {@link #addStateListener}
     */
    public void removeStateListener(Consumer<State> listener) {
        attachment.removeStateListener(listener);
    }

    /** Stops the session: its holds are released at once. */
    @Override
    public void close() {
        attachment.stop();
    }

    /** Ends the holds if the deadline has passed (every lease check calls it). */
    void checkDeadline() {
        attachment.checkDeadline();
    }

    /** Why the session ended, or null while it lives. */
    RuntimeException endCause() {
        return attachment.endCause();
    }

    Executor executor() {
        return attachment.executor();
    }

    void forget(Lease l) {
        attachment.forget(l);
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    // ---- semaphores: thin request builders ----

    /**
     * Creates a persistent semaphore with limit &gt; 0 and data (up to 1 MiB).
     *
     * @param name the semaphore's name
     * @param limit the semaphore's limit, greater than 0
     * @param data the semaphore's data, up to 1 MiB
     */
    public void createSemaphoreBlocking(String name, long limit, byte[] data) {
        Coord b = new Coord();
        b.name = utf8(name);
        b.limit = limit;
        b.data = data;
        attachment.request("create semaphore " + name, Coord.CREATE_SEMAPHORE, b, false, null, null, Long.MAX_VALUE);
    }

    /**
     * Replaces the semaphore's data (no ownership needed).
     *
     * @param name the semaphore's name
     * @param data the new data, up to 1 MiB
     */
    public void updateSemaphoreBlocking(String name, byte[] data) {
        Coord b = new Coord();
        b.name = utf8(name);
        b.data = data;
        attachment.request("update semaphore " + name, Coord.UPDATE_SEMAPHORE, b, false, null, null, Long.MAX_VALUE);
    }

    /**
     * Deletes the semaphore; without force one in use is PRECONDITION_FAILED, with force its owners lose their leases.
     *
     * @param name the semaphore's name
     * @param force whether to delete it even when in use
     */
    public void deleteSemaphoreBlocking(String name, boolean force) {
        Coord b = new Coord();
        b.name = utf8(name);
        b.flags = force ? Coord.FLAG_FORCE : 0;
        attachment.request("delete semaphore " + name, Coord.DELETE_SEMAPHORE, b, false, null, null, Long.MAX_VALUE);
    }

    /**
     * Acquires the semaphore: the lease, or NotAcquiredException when its
     * queue timeout passed (zero: one attempt). An acquire sent again after
     * a restore carries only what is left of its timeout, and replaces the
     * earlier one on the server (same queue position, same order id).
     *
     * @param name the semaphore's name
     * @param o the count, queue timeout, data, ephemeral flag and queued callback of the acquire
     * @return the lease on the semaphore
     */
    public Lease acquireBlocking(String name, AcquireOptions o) {
        String what = "acquire " + name;
        Coord b = new Coord();
        b.name = utf8(name);
        b.count = o.count;
        b.data = o.data;
        b.flags = o.ephemeral ? Coord.FLAG_EPHEMERAL : 0;
        b.timeoutMs = Coord.WAIT_FOREVER;
        long start = System.nanoTime();
        Runnable before = o.timeout == null ? null : () -> b.timeoutMs = Math.max(o.timeout.toMillis() - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), 0);
        Consumer<Frame> note = o.onQueued == null ? null : f -> {
            if (f.op == Coord.QUEUED) {
                try {
                    long order = Coord.decode(true, f.op, f.code, f.text).orderId;
                    attachment.executor().execute(() -> o.onQueued.accept(order));
                } catch (WireException ignored) {
                    // a malformed Queued tells nothing
                }
            }
        };
        attachment.awaitWithdrawal(name, what);
        Coord ans;
        try {
            ans = attachment.request(what, Coord.ACQUIRE, b, true, note, before, Long.MAX_VALUE);
        } catch (CancellationException | io.ticketing.IndeterminateException e) {
            // Interrupted (a cancelled future or coroutine) or lost in
            // flight: withdraw the wait, or a grant that raced with it.
            attachment.withdraw(name, () -> release(name));
            throw e;
        }
        if ((ans.flags & Coord.FLAG_ACQUIRED) == 0) {
            throw attachment.t.notAcquired("coordination: " + what + ": not acquired within its timeout");
        }
        return attachment.hold(this, name, what, ans);
    }

    /** Ends this session's hold or wait on the semaphore; whether one ended. */
    boolean release(String name) {
        Coord b = new Coord();
        b.name = utf8(name);
        Coord ans = attachment.request("release " + name, Coord.RELEASE, b, true, null, null, Long.MAX_VALUE);
        return (ans.flags & Coord.FLAG_RELEASED) != 0;
    }

    /**
     * A description and its one-shot watch.
     *
     * @param description the semaphore as described
     * @param changed completes once with the Changed flags (1 data, 2 owners; 0: describe again)
     */
    public record Watched(SemaphoreDescription description, CompletableFuture<Integer> changed) {}

    /**
     * Describes the semaphore, with its owners and waiters when asked (all pages).
     *
     * @param name the semaphore's name
     * @param owners whether to include its owners
     * @param waiters whether to include its waiters
     * @return the semaphore's description
     */
    public SemaphoreDescription describeSemaphoreBlocking(String name, boolean owners, boolean waiters) {
        return describe(name, (owners ? Coord.FLAG_OWNERS : 0) | (waiters ? Coord.FLAG_WAITERS : 0), 0).description();
    }

    /**
     * Describes the semaphore (owners and waiters included) and sets a one-shot watch on its data and/or owners.
     *
     * @param name the semaphore's name
     * @param data whether to watch its data
     * @param owners whether to watch its owners
     * @return the description and the watch's future
     */
    public Watched watchSemaphoreBlocking(String name, boolean data, boolean owners) {
        int w = (data ? Coord.FLAG_WATCH_DATA : 0) | (owners ? Coord.FLAG_WATCH_OWNERS : 0);
        if (w == 0) {
            throw new BadRequestException("coordination: watch semaphore " + name + ": BAD_REQUEST: watch data, owners or both (nothing was sent)");
        }
        return describe(name, Coord.FLAG_OWNERS | Coord.FLAG_WAITERS, w);
    }

    private Watched describe(String name, int lists, int watch) {
        String what = "describe semaphore " + name;
        List<Holder> os = new ArrayList<>();
        List<Holder> qs = new ArrayList<>();
        Coord first = null;
        CompletableFuture<Integer> changedFuture = null;
        long after = 0;
        long version = 0;
        while (true) {
            Coord b = new Coord();
            b.name = utf8(name);
            b.flags = lists | (first == null ? watch : Coord.FLAG_NO_DATA);
            b.after = after;
            Attachment.Answer answer = attachment.requestId(what, Coord.DESCRIBE_SEMAPHORE, b, true, null, null, Long.MAX_VALUE);
            Coord ans = answer.body();
            if (first == null) {
                first = ans;
                version = ans.version;
                if (watch != 0) {
                    changedFuture = new CompletableFuture<>();
                    attachment.watch(answer.requestId(), changedFuture);
                }
            } else if (ans.version != version) {
                // The semaphore changed between pages: start again.
                os.clear();
                qs.clear();
                first = null;
                after = 0;
                continue;
            }
            for (Coord.Holder h : ans.owners) {
                os.add(new Holder(h.orderId(), h.session(), h.count(), h.timeoutMs(), h.data()));
                after = Math.max(after, h.orderId());
            }
            for (Coord.Holder h : ans.queue) {
                qs.add(new Holder(h.orderId(), h.session(), h.count(), h.timeoutMs(), h.data()));
                after = Math.max(after, h.orderId());
            }
            if ((ans.flags & Coord.FLAG_MORE_HOLDERS) == 0) {
                break;
            }
        }
        SemaphoreDescription d = new SemaphoreDescription(name, first.limit, first.count, (first.flags & Coord.FLAG_EPHEMERAL) != 0, first.data,
                List.copyOf(os), List.copyOf(qs));
        return new Watched(d, changedFuture);
    }

    // ---- recipes, in the Go SDK's name spaces ----

    /**
     * The lock called name on the session's node ({@code recipe/mutex/<name>}).
     *
     * @param name the lock's name
     * @return the lock, on this session
     */
    public Mutex mutex(String name) {
        return new Mutex(this, name);
    }

    /**
     * The election called name on the session's node ({@code recipe/election/<name>}).
     *
     * @param name the election's name
     * @return the election, on this session
     */
    public Election election(String name) {
        return new Election(this, name);
    }

    /**
     * The service called name on the session's node ({@code recipe/discovery/<name>}).
     *
     * @param name the service's name
     * @return the service's discovery, on this session
     */
    public Discovery discovery(String name) {
        return new Discovery(this, name);
    }

    /**
     * The configuration value called name on the session's node ({@code recipe/publication/<name>}).
     *
     * @param name the value's name
     * @return the publication, on this session
     */
    public Publication publication(String name) {
        return new Publication(this, name);
    }

    // ---- CompletableFuture faces, on the client's threads ----

    /**
     * {@link #createSemaphoreBlocking} on the client's threads.
     *
     * @param name the semaphore's name
     * @param limit the semaphore's limit, greater than 0
     * @param data the semaphore's data, up to 1 MiB
     * @return completes when the semaphore is created
     */
    public CompletableFuture<Void> createSemaphoreAsync(String name, long limit, byte[] data) {
        return CompletableFuture.runAsync(() -> createSemaphoreBlocking(name, limit, data), attachment.executor());
    }

    /**
     * {@link #updateSemaphoreBlocking} on the client's threads.
     *
     * @param name the semaphore's name
     * @param data the new data, up to 1 MiB
     * @return completes when the data is replaced
     */
    public CompletableFuture<Void> updateSemaphoreAsync(String name, byte[] data) {
        return CompletableFuture.runAsync(() -> updateSemaphoreBlocking(name, data), attachment.executor());
    }

    /**
     * {@link #deleteSemaphoreBlocking} on the client's threads.
     *
     * @param name the semaphore's name
     * @param force whether to delete it even when in use
     * @return completes when the semaphore is deleted
     */
    public CompletableFuture<Void> deleteSemaphoreAsync(String name, boolean force) {
        return CompletableFuture.runAsync(() -> deleteSemaphoreBlocking(name, force), attachment.executor());
    }

    /**
     * {@link #acquireBlocking} on the client's threads. Cancelling the
     * future interrupts the acquire and withdraws its wait (a release, in
     * the background; the session's next acquire of the semaphore waits for
     * it); a hold granted anyway is released.
     *
     * @param name the semaphore's name
     * @param o the count, queue timeout, data, ephemeral flag and queued callback of the acquire
     * @return the lease on the semaphore
     */
    public CompletableFuture<Lease> acquireAsync(String name, AcquireOptions o) {
        return Async.interruptible(attachment.executor(), () -> acquireBlocking(name, o), Lease::releaseAsync);
    }

    /**
     * {@link #describeSemaphoreBlocking} on the client's threads.
     *
     * @param name the semaphore's name
     * @param owners whether to include its owners
     * @param waiters whether to include its waiters
     * @return the semaphore's description
     */
    public CompletableFuture<SemaphoreDescription> describeSemaphoreAsync(String name, boolean owners, boolean waiters) {
        return CompletableFuture.supplyAsync(() -> describeSemaphoreBlocking(name, owners, waiters), attachment.executor());
    }

    /**
     * {@link #close} on the client's threads.
     *
     * @return completes when the session is stopped
     */
    public CompletableFuture<Void> closeAsync() {
        return CompletableFuture.runAsync(this::close, attachment.executor());
    }
}
