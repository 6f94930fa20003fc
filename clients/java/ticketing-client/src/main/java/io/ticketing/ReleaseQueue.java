package io.ticketing;

import java.util.concurrent.CancellationException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Background releases ({@link Ticket#close()}, compensating releases of late
 * grants): each runs on the broker's executor with the release's bounded
 * retries, at most {@link Config#releaseQueue} pending at once (more are
 * dropped and reported), and their outcome goes to the ticket, the log, the
 * listener and the release observer. Close stops new ones and gives those
 * already started a short grace period to finish.
 */
final class ReleaseQueue {
    private final Config cfg;
    private final Releaser releaser;
    private final Reporter reporter;
    private final Semaphore permits;
    private final ReentrantLock mu = new ReentrantLock();
    private final Condition done = mu.newCondition();
    private int active;
    private boolean shut;

    ReleaseQueue(Config cfg, Releaser releaser, Reporter reporter) {
        this.cfg = cfg;
        this.releaser = releaser;
        this.reporter = reporter;
        this.permits = new Semaphore(cfg.releaseQueue);
    }

    /**
     * Starts a background release of key's exact token on the executor,
     * bounded by {@link TicketBroker#RELEASE_BOUND} from now. Its outcome goes to the
     * observer (and to ticket, when given). Returns false (and reports) when
     * it could not be queued.
     */
    boolean enqueue(String key, long token, Ticket ticket) {
        String op = "release of token " + Long.toUnsignedString(token) + " for " + Arguments.quote(key);
        if (!permits.tryAcquire()) {
            report(key, token, ticket, new ReleaseDroppedException(op + ": not released: " + cfg.releaseQueue
                    + " background releases are already pending; the ticket stays held until its lease expires (use releaseBlocking() to release synchronously)"));
            return false;
        }
        boolean wasShut;
        mu.lock();
        try {
            wasShut = shut;
            if (!wasShut) {
                active++;
            }
        } finally {
            mu.unlock();
        }
        if (wasShut) {
            permits.release();
            report(key, token, ticket, new ClosedException(op + ": not released: the broker is closed; the ticket stays held until its lease expires"));
            return false;
        }
        long at = System.nanoTime();
        try {
            cfg.executor.execute(() -> {
                TicketingException err = null;
                try {
                    releaser.release(key, token, at, true);
                } catch (TicketingException e) {
                    err = e;
                } catch (CancellationException e) {
                    err = new IndeterminateException(op + ": the background release was interrupted: " + e.getMessage(), e, 0, false);
                } finally {
                    finished();
                }
                report(key, token, ticket, err);
            });
        } catch (RejectedExecutionException e) {
            finished();
            report(key, token, ticket, new ReleaseDroppedException(op + ": not released: the executor refused the background release ("
                    + e.getMessage() + "); the ticket stays held until its lease expires"));
            return false;
        }
        return true;
    }

    /** A started release ended (or never ran): its permit is free again. */
    private void finished() {
        permits.release();
        mu.lock();
        try {
            active--;
            done.signalAll();
        } finally {
            mu.unlock();
        }
    }

    private void report(String key, long token, Ticket ticket, TicketingException err) {
        if (ticket != null) {
            ticket.finish(err);
        }
        reporter.backgroundRelease(key, token, err);
    }

    /**
     * Close: no new background releases; waits up to drainMs for those
     * already started (they may still use the connection meanwhile).
     */
    void shutAndDrain(long drainMs) {
        mu.lock();
        try {
            shut = true;
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(drainMs);
            while (active > 0) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                try {
                    done.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        } finally {
            mu.unlock();
        }
    }
}
