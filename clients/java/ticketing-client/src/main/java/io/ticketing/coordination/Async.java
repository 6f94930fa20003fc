package io.ticketing.coordination;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Supplier;

/** CompletableFuture faces whose cancel interrupts the blocking call they run. */
final class Async {
    private Async() {}

    /**
     * Runs body on executor. Cancelling the future interrupts body while it
     * runs (the blocking calls of this package answer an interrupt with a
     * CancellationException and withdraw what they asked for); a value body
     * returns after the cancel goes to orphan (a lease: released).
     */
    static <T> CompletableFuture<T> interruptible(Executor executor, Supplier<T> body, Consumer<T> orphan) {
        CompletableFuture<T> f = new CompletableFuture<>();
        ReentrantLock mu = new ReentrantLock();
        Thread[] runner = new Thread[1];
        f.whenComplete((v, e) -> {
            if (f.isCancelled()) {
                mu.lock();
                try {
                    if (runner[0] != null) {
                        runner[0].interrupt();
                    }
                } finally {
                    mu.unlock();
                }
            }
        });
        executor.execute(() -> {
            mu.lock();
            try {
                if (f.isDone()) {
                    return; // cancelled before it started: nothing was sent
                }
                runner[0] = Thread.currentThread();
            } finally {
                mu.unlock();
            }
            try {
                T v = body.get();
                if (!f.complete(v) && v != null) {
                    orphan.accept(v);
                }
            } catch (Throwable e) {
                f.completeExceptionally(e);
            } finally {
                mu.lock();
                try {
                    runner[0] = null;
                    Thread.interrupted(); // a cancel racing with the end: not for the pool's next task
                } finally {
                    mu.unlock();
                }
            }
        });
        return f;
    }

    /** {@link #interruptible} for a call without a value. */
    static CompletableFuture<Void> interruptible(Executor executor, Runnable body) {
        return interruptible(executor, () -> {
            body.run();
            return null;
        }, v -> {});
    }
}
