package io.ticketing.coordination;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiPredicate;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * A running watch of a recipe ({@link Election#observe}, {@link Discovery#watch},
 * {@link Publication#watch}): it calls its callback with the current value at
 * the start and with every value that differs from the last one it was given,
 * one call at a time, in order, on a thread of the client (never on the
 * connection's reader: a slow callback delays only this watch). It
 * describes again after every watch notification, including the empty one
 * of a lost connection, so no change is missed across a restore. It runs
 * until {@link #close()}, the end of its session, a semaphore found not to
 * be the recipe's ({@link WrongKindException}), or a callback that throws;
 * {@link #ended()} says which.
 */
public final class Subscription implements AutoCloseable {
    /** One description and the one-shot watch set with it. */
    record Snapshot<T>(T value, CompletableFuture<Integer> changed) {}

    /** Describes the recipe's semaphore and sets a watch on it. */
    interface Describe<T> {
        Snapshot<T> next();
    }

    private final Session session;
    private final CompletableFuture<Void> stop = new CompletableFuture<>();
    private final CompletableFuture<@Nullable RuntimeException> ended = new CompletableFuture<>();
    // Guards runner, so that close() interrupts only while the watch's own
    // call runs (the thread is the client's, and goes back to its pool).
    private final ReentrantLock mu = new ReentrantLock();
    private @Nullable Thread runner;
    private boolean calling;

    private Subscription(Session session) {
        this.session = session;
    }

    static <T> Subscription start(Session s, Describe<T> describe, BiPredicate<T, T> same, Consumer<T> callback) {
        Subscription sub = new Subscription(s);
        s.executor().execute(() -> sub.run(describe, same, callback));
        return sub;
    }

    private <T> void run(Describe<T> describe, BiPredicate<T, T> same, Consumer<T> callback) {
        mu.lock();
        try {
            runner = Thread.currentThread();
        } finally {
            mu.unlock();
        }
        RuntimeException cause = null;
        try {
            boolean first = true;
            T last = null;
            while (!stop.isDone()) {
                Snapshot<T> snap;
                try {
                    snap = describe.next();
                } catch (WrongKindException e) {
                    cause = e;
                    return;
                } catch (CancellationException e) {
                    return; // closed while it described
                } catch (RuntimeException e) {
                    RuntimeException over = session.endCause();
                    if (over != null) {
                        cause = over;
                        return;
                    }
                    if (!pause()) {
                        return;
                    }
                    continue;
                }
                if (first || !same.test(snap.value(), last)) {
                    mu.lock();
                    try {
                        if (stop.isDone()) {
                            return;
                        }
                        calling = true;
                        Thread.interrupted(); // a close() that came too late for the describe
                    } finally {
                        mu.unlock();
                    }
                    try {
                        callback.accept(snap.value());
                    } catch (RuntimeException e) {
                        cause = e;
                        return;
                    } finally {
                        mu.lock();
                        try {
                            calling = false;
                        } finally {
                            mu.unlock();
                        }
                    }
                    last = snap.value();
                    first = false;
                }
                try {
                    CompletableFuture.anyOf(snap.changed(), stop).get();
                } catch (InterruptedException | ExecutionException e) {
                    return;
                }
            }
        } finally {
            mu.lock();
            try {
                runner = null;
                Thread.interrupted(); // a close() racing with the end: not for the pool's next task
            } finally {
                mu.unlock();
            }
            ended.complete(cause);
        }
    }

    /** The backoff before describing again after a failed describe (not a wait for a condition); false when closed. */
    private boolean pause() {
        try {
            stop.get(100, TimeUnit.MILLISECONDS);
            return false;
        } catch (TimeoutException e) {
            return true;
        } catch (InterruptedException | ExecutionException e) {
            return false;
        }
    }

    /** Stops the watch: the callback is not called after close returns (a call already running finishes). */
    @Override
    public void close() {
        mu.lock();
        try {
            stop.complete(null);
            if (runner != null && !calling) {
                runner.interrupt(); // its describe may wait for a restore
            }
        } finally {
            mu.unlock();
        }
    }

    /**
     * Completes when the watch has stopped: with null after {@link #close()},
     * else with the cause ({@link SessionExpiredException} or
     * {@link io.ticketing.ClosedException} when the session ended,
     * {@link WrongKindException}, or the exception the callback threw).
     *
     * @return a future of the cause
     */
    public CompletableFuture<@Nullable RuntimeException> ended() {
        return ended.thenApplyAsync(e -> e, session.executor());
    }
}
