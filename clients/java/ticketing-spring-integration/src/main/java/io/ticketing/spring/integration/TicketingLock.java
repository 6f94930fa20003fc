package io.ticketing.spring.integration;

import io.ticketing.NotAcquiredException;
import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.Lease;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import org.jspecify.annotations.Nullable;

/**
 * A lock of a {@link TicketingLockRegistry}: reentrant for its holding
 * thread, exclusive across threads of this process (a local permit) and
 * across processes (an exclusive hold of its semaphore).
 *
 * <p>When the hold ends under its holder (the session expired, the
 * semaphore was deleted), the holder's next {@code tryLock} returns false
 * and forgets the hold, and {@link #unlock()} throws
 * {@link IllegalStateException}: the work since the hold ended was not
 * protected. {@link #token()} fences that work.
 */
public final class TicketingLock implements Lock {
    private final TicketingLockRegistry registry;
    private final String key;
    private final String semaphore;
    private final Semaphore permit = new Semaphore(1); // one holding thread in this process
    private volatile @Nullable Thread owner;
    private volatile int holds;
    private volatile @Nullable Lease lease;
    private volatile long lastUsedNanos = System.nanoTime();

    TicketingLock(TicketingLockRegistry registry, String key, String semaphore) {
        this.registry = registry;
        this.key = key;
        this.semaphore = semaphore;
    }

    /**
     * The fencing token of the current hold: the hold's order id, strictly
     * increasing across the service.
     *
     * @return the token, 0 when not held
     */
    public long token() {
        Lease l = lease;
        return l == null ? 0 : l.token();
    }

    /**
     * Whether the current thread holds the lock and its hold still stands by the session's deadline, checked now.
     *
     * @return true while this thread holds it
     */
    public boolean isHeldByCurrentThread() {
        Lease l = lease;
        return owner == Thread.currentThread() && l != null && l.isValid();
    }

    @Override
    public void lock() {
        if (reenter()) {
            return;
        }
        permit.acquireUninterruptibly();
        take(null);
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (reenter()) {
            return;
        }
        permit.acquire();
        try {
            take(null);
        } catch (CancellationException e) {
            throw interrupted(e);
        }
    }

    @Override
    public boolean tryLock() {
        if (owner == Thread.currentThread()) {
            return reenter();
        }
        if (!permit.tryAcquire()) {
            return false;
        }
        return take(Duration.ZERO);
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        if (owner == Thread.currentThread()) {
            return reenter();
        }
        long start = System.nanoTime();
        long budget = Math.max(unit.toNanos(time), 0);
        if (!permit.tryAcquire(budget, TimeUnit.NANOSECONDS)) {
            return false;
        }
        try {
            return take(Duration.ofNanos(Math.max(budget - (System.nanoTime() - start), 0)));
        } catch (CancellationException e) {
            throw interrupted(e);
        }
    }

    /** Another hold by the holding thread: true when it still holds, false (and the hold forgotten) when its hold ended. */
    private boolean reenter() {
        if (owner != Thread.currentThread()) {
            return false;
        }
        Lease l = lease;
        if (l != null && l.isValid()) {
            holds++;
            lastUsedNanos = System.nanoTime();
            return true;
        }
        forget();
        return false;
    }

    /** With the permit: the semaphore hold, waiting at most wait (null: until granted); the permit is given back unless held. */
    private boolean take(@Nullable Duration wait) {
        boolean ok = false;
        try {
            AcquireOptions o = AcquireOptions.exclusive().ephemeral();
            if (wait != null) {
                o = o.timeout(wait);
            }
            AcquireOptions opts = o;
            lease = registry.onSession(s -> s.acquireBlocking(semaphore, opts));
            owner = Thread.currentThread();
            holds = 1;
            lastUsedNanos = System.nanoTime();
            ok = true;
            return true;
        } catch (NotAcquiredException e) {
            return false;
        } finally {
            if (!ok) {
                permit.release();
            }
        }
    }

    private void forget() {
        owner = null;
        holds = 0;
        lease = null;
        permit.release();
    }

    @Override
    public void unlock() {
        if (owner != Thread.currentThread()) {
            throw new IllegalMonitorStateException("lock " + key + " is not held by this thread");
        }
        lastUsedNanos = System.nanoTime();
        if (--holds > 0) {
            return;
        }
        Lease l = lease;
        boolean stood = l != null && l.isValid();
        try {
            if (l != null && stood) {
                l.releaseBlocking();
            }
        } finally {
            forget();
        }
        if (!stood) {
            throw new IllegalStateException("lock " + key + ": the hold had ended before unlock (" + (l == null ? "none" : l.endCause())
                    + "); the work under it was not protected");
        }
    }

    /**
     * Not supported: a condition cannot be shared between processes.
     *
     * @return never
     */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lock " + key + ": conditions are not supported by distributed locks");
    }

    boolean isHeld() {
        Lease l = lease;
        return owner != null && l != null && l.isValid();
    }

    /** Neither held nor waited for in this process, and idle for age. */
    boolean unusedSince(long nowNanos, Duration age) {
        return owner == null && !permit.hasQueuedThreads() && permit.availablePermits() == 1 && nowNanos - lastUsedNanos > age.toNanos();
    }

    private static InterruptedException interrupted(CancellationException e) {
        Thread.interrupted();
        InterruptedException ie = new InterruptedException("interrupted while waiting for the lock");
        ie.initCause(e);
        return ie;
    }

    @Override
    public String toString() {
        return "TicketingLock[" + key + (owner == null ? ", free here" : ", held, token " + token()) + "]";
    }
}
