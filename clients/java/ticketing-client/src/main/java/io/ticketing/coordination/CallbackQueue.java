package io.ticketing.coordination;

import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Runs a session's callbacks one at a time, in order, on a thread of the
 * client while any wait: never on the connection's reader, so a callback
 * that blocks delays only its own session's callbacks.
 */
final class CallbackQueue {
    private final Executor executor;
    private final ReentrantLock mu = new ReentrantLock();
    private final ArrayDeque<Runnable> fns = new ArrayDeque<>();
    private boolean running;

    CallbackQueue(Executor executor) {
        this.executor = executor;
    }

    /** Queues fn; never blocks. */
    void push(Runnable fn) {
        boolean start;
        mu.lock();
        try {
            fns.add(fn);
            start = !running;
            running = true;
        } finally {
            mu.unlock();
        }
        if (start) {
            executor.execute(this::drain);
        }
    }

    private void drain() {
        while (true) {
            Runnable fn;
            mu.lock();
            try {
                fn = fns.poll();
                if (fn == null) {
                    running = false;
                    return;
                }
            } finally {
                mu.unlock();
            }
            try {
                fn.run();
            } catch (RuntimeException e) {
                // a callback's failure is its own; the next callbacks still run
            }
        }
    }
}
