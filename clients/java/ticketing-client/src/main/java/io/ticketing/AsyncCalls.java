package io.ticketing;

import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The {@code *Async} forms of the broker's calls: the blocking call runs on
 * its own (virtual) thread, and cancelling the future interrupts it, which
 * the call treats as cancellation.
 */
final class AsyncCalls {
    private AsyncCalls() {}

    /** A blocking call run for a future. */
    interface Body<T> {
        T run();
    }

    /**
     * Runs body on a new virtual thread; cancelling the returned future
     * interrupts it, which the body treats as cancellation. A result produced
     * after the future was cancelled is handed to orphan (a ticket: released).
     */
    static <T> CompletableFuture<T> async(Body<T> body, Consumer<T> orphan) {
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
}
