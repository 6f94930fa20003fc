package io.ticketing.coordination;

import java.time.Duration;

/**
 * A lock held by a session: the semaphore {@code recipe/mutex/<name>} with
 * limit 1 (created on first use, the Go SDK's {@code Mutex} too), taken
 * with count 1. Its token fences the work.
 */
public final class Mutex {
    private final Session s;
    private final String name;
    private final boolean[] checked = new boolean[1];
    private Lease lease;

    Mutex(Session s, String name) {
        this.s = s;
        this.name = name;
    }

    private String sem() {
        return Recipes.name("mutex", name);
    }

    /** Waits for the lock; its lease (whose token fences the work). */
    public synchronized Lease lockBlocking() {
        lease = Recipes.acquireOne(s, "mutex", sem(), checked, AcquireOptions.shared());
        return lease;
    }

    /** Takes the lock if it is free now: its lease, or null. */
    public synchronized Lease tryLockBlocking() {
        try {
            lease = Recipes.acquireOne(s, "mutex", sem(), checked, AcquireOptions.shared().timeout(Duration.ZERO));
            return lease;
        } catch (io.ticketing.NotAcquiredException e) {
            return null;
        }
    }

    /** Releases the lock. */
    public synchronized void unlockBlocking() {
        Lease l = lease;
        lease = null;
        if (l == null) {
            throw new BadRequestException("coordination: unlock of " + name + ": BAD_REQUEST: this Mutex does not hold it");
        }
        l.releaseBlocking();
    }

    /** The fencing token of the current hold (0 when not held). */
    public synchronized long token() {
        return lease == null ? 0 : lease.token();
    }
}
