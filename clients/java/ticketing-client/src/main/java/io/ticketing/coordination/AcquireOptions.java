package io.ticketing.coordination;

import java.time.Duration;
import java.util.function.LongConsumer;

/**
 * How a semaphore is acquired: immutable, each method returns a copy.
 * The default asks for a count of 1 and waits in the queue until the call's
 * own bound (forever for the blocking face).
 */
public final class AcquireOptions {
    final long count;
    final Duration timeout; // null: forever
    final boolean ephemeral;
    final byte[] data;
    final LongConsumer onQueued;

    private AcquireOptions(long count, Duration timeout, boolean ephemeral, byte[] data, LongConsumer onQueued) {
        this.count = count;
        this.timeout = timeout;
        this.ephemeral = ephemeral;
        this.data = data;
        this.onQueued = onQueued;
    }

    /**
     * A count of 1, no queue timeout, no data.
     *
     * @return the options
     */
    public static AcquireOptions shared() {
        return new AcquireOptions(1, null, false, new byte[0], null);
    }

    /**
     * The whole limit: granted only when nothing is held.
     *
     * @return the options
     */
    public static AcquireOptions exclusive() {
        return shared().count(io.ticketing.wire.Coord.EXCLUSIVE);
    }

    /**
     * n units (1..limit).
     *
     * @param n the count to acquire
     * @return these options with that count
     */
    public AcquireOptions count(long n) {
        return new AcquireOptions(n, timeout, ephemeral, data, onQueued);
    }

    /**
     * Bounds the time in the queue; zero tries once. The bound is absolute:
     * an acquire sent again after a restore carries only what is left.
     *
     * @param d the longest time in the queue; zero tries once
     * @return these options with that timeout
     */
    public AcquireOptions timeout(Duration d) {
        if (d.isNegative()) {
            throw new IllegalArgumentException("acquire timeout " + d + " is negative; zero tries once");
        }
        return new AcquireOptions(count, d, ephemeral, data, onQueued);
    }

    /**
     * Creates the semaphore (limit 2^64-1) if missing; deleted when its last owner and waiter leave.
     *
     * @return these options, ephemeral
     */
    public AcquireOptions ephemeral() {
        return new AcquireOptions(count, timeout, true, data, onQueued);
    }

    /**
     * The hold's data (up to 1 MiB): an owner's endpoint, say.
     *
     * @param d the data (copied)
     * @return these options with that data
     */
    public AcquireOptions data(byte[] d) {
        return new AcquireOptions(count, timeout, ephemeral, d.clone(), onQueued);
    }

    /**
     * Called with the order id when the acquire is queued (again after a restore sent it again), on a thread of the client.
     *
     * @param fn the callback, given the order id
     * @return these options with that callback
     */
    public AcquireOptions onQueued(LongConsumer fn) {
        return new AcquireOptions(count, timeout, ephemeral, data, fn);
    }
}
