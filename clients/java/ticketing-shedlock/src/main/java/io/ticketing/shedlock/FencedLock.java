package io.ticketing.shedlock;

import io.ticketing.Ticket;
import io.ticketing.coordination.Lease;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.ScheduledFuture;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.jspecify.annotations.Nullable;

/**
 * A lock of a {@link TicketingLockProvider}: a ticket or a semaphore hold,
 * with the fencing token to pass to the writes it guards.
 */
public final class FencedLock implements SimpleLock {
    static final int ACQUIRING = 0;
    static final int HELD = 1;
    static final int UNLOCKED = 2; // unlocked or extended: this object is spent
    static final int ENDED = 3;

    private final TicketingLockProvider provider;
    final String name;
    final LockConfiguration config;
    final long atLeastUntilNanos;
    volatile int state = ACQUIRING;
    volatile @Nullable Ticket ticket;
    volatile @Nullable Lease lease;
    volatile @Nullable ScheduledFuture<?> endTimer;
    private final java.util.concurrent.atomic.AtomicBoolean spent = new java.util.concurrent.atomic.AtomicBoolean();

    FencedLock(TicketingLockProvider provider, String name, long startNanos, LockConfiguration config) {
        this.provider = provider;
        this.name = name;
        this.config = config;
        // lockAtLeastFor counts from the configuration's creation, as ShedLock's other providers count it.
        Duration atLeast = Duration.between(Instant.now(), config.getLockAtLeastUntil());
        this.atLeastUntilNanos = startNanos + Math.max(atLeast.toNanos(), 0);
    }

    /**
     * The lock's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * The fencing token: the ticket's token or the semaphore hold's order id,
     * from the same service-wide counter. An extension takes a new one.
     *
     * @return the token
     */
    public long token() {
        Lease l = lease;
        if (l != null) {
            return l.token();
        }
        Ticket t = ticket;
        return t == null ? 0 : t.getToken();
    }

    /**
     * Whether the hold still stands by its conservative deadline: the
     * ticket's, or the session's for a semaphore hold, checked now.
     *
     * @return true while held
     */
    public boolean isValid() {
        if (state == ENDED) {
            return false;
        }
        Lease l = lease;
        if (l != null) {
            return l.isValid();
        }
        Ticket t = ticket;
        return t != null && System.nanoTime() - t.deadlineNanos() < 0;
    }

    @Override
    public void unlock() {
        if (!spent.compareAndSet(false, true)) {
            throw new IllegalStateException("ShedLock lock " + name + " was already unlocked or extended; unlock the lock extend returned");
        }
        state = UNLOCKED;
        provider.release(this);
    }

    @Override
    public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
        if (!spent.compareAndSet(false, true)) {
            throw new IllegalStateException("ShedLock lock " + name + " was already unlocked or extended; extend the lock the last extend returned");
        }
        if (!isValid()) {
            state = ENDED;
            return Optional.empty();
        }
        long now = System.nanoTime();
        FencedLock fresh = new FencedLock(provider, name, now,
                new LockConfiguration(Instant.now(), name, lockAtMostFor, lockAtLeastFor));
        cancelTimers();
        if (!provider.extendLock(this, lockAtMostFor, lockAtLeastFor, fresh)) {
            // Not extended: this lock keeps its hold until its own end.
            scheduleEnd(Duration.between(Instant.now(), config.getLockAtMostUntil()));
            spent.set(false);
            return Optional.empty();
        }
        state = UNLOCKED;
        return Optional.of(fresh);
    }

    /** A semaphore hold ends by this process at lockAtMostFor; a ticket ends by its lease on the server. */
    void scheduleEnd(Duration lockAtMostFor) {
        if (lease != null) {
            endTimer = provider.schedule(() -> provider.releaseNow(this), Math.max(lockAtMostFor.toNanos(), 0));
        }
    }

    void cancelTimers() {
        ScheduledFuture<?> t = endTimer;
        if (t != null) {
            t.cancel(false);
        }
    }

    @Override
    public String toString() {
        return "FencedLock[" + name + ", token " + token() + (lease != null ? ", semaphore" : ", ticket") + "]";
    }
}
