package io.ticketing.coordination;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A lock held by a session: the semaphore {@code recipe/mutex/<name>} with
 * limit 1 (created on first use, the Go SDK's {@code Mutex} too), taken
 * with count 1. Its token fences the work.
 */
public final class Mutex {
    private final Session s;
    private final String name;
    // Guards lease only, never held across a call to the server (as the Go
    // SDK's Mutex); a ReentrantLock, since a monitor pins virtual threads.
    private final ReentrantLock mu = new ReentrantLock();
    private final boolean[] checked = new boolean[1];
    private Lease lease;

    Mutex(Session s, String name) {
        this.s = s;
        this.name = name;
    }

    private String sem() {
        return Recipes.name("mutex", name);
    }

    /**
     * Waits for the lock.
     *
     * @return the lock's lease, whose token fences the work
     */
    public Lease lockBlocking() {
        Lease l = Recipes.acquireOne(s, "mutex", sem(), checked, AcquireOptions.shared());
        setLease(l);
        return l;
    }

    private void setLease(Lease l) {
        mu.lock();
        try {
            lease = l;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Takes the lock if it is free now.
     *
     * @return the lock's lease, or null when another session holds it
     */
    public Lease tryLockBlocking() {
        try {
            Lease l = Recipes.acquireOne(s, "mutex", sem(), checked, AcquireOptions.shared().timeout(Duration.ZERO));
            setLease(l);
            return l;
        } catch (io.ticketing.NotAcquiredException e) {
            return null;
        }
    }

    /** Releases the lock. */
    public void unlockBlocking() {
        Lease l;
        mu.lock();
        try {
            l = lease;
            lease = null;
        } finally {
            mu.unlock();
        }
        if (l == null) {
            throw new BadRequestException("coordination: unlock of " + name + ": BAD_REQUEST: this Mutex does not hold it");
        }
        l.releaseBlocking();
    }

    /**
     * The fencing token of the current hold.
     *
     * @return the token, 0 when not held
     */
    public long token() {
        mu.lock();
        try {
            return lease == null ? 0 : lease.token();
        } finally {
            mu.unlock();
        }
    }

    /**
     * {@link #lockBlocking} on the client's threads. Cancelling the future
     * withdraws the wait (a hold granted anyway is released).
     *
     * @return the lock's lease
     */
    public CompletableFuture<Lease> lockAsync() {
        return Async.interruptible(s.executor(), this::lockBlocking, Lease::releaseAsync);
    }

    /**
     * {@link #tryLockBlocking} on the client's threads.
     *
     * @return the lock's lease, or null when another session holds it
     */
    public CompletableFuture<Lease> tryLockAsync() {
        return Async.interruptible(s.executor(), this::tryLockBlocking, Lease::releaseAsync);
    }

    /**
     * {@link #unlockBlocking} on the client's threads.
     *
     * @return completes when the lock is released
     */
    public CompletableFuture<Void> unlockAsync() {
        return Async.interruptible(s.executor(), this::unlockBlocking);
    }
}
