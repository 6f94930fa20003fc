package io.ticketing.coordination;

import java.util.List;

/**
 * A semaphore as the server described it.
 *
 * @param name its name
 * @param limit its limit (ephemeral: 2^64-1, -1 as a signed long)
 * @param count the sum of its owners' counts
 * @param ephemeral whether it is deleted with its last owner and waiter
 * @param data its data
 * @param owners its owners by order id (when asked)
 * @param waiters its waiters in queue order (when asked)
 */
public record SemaphoreDescription(String name, long limit, long count, boolean ephemeral, byte[] data, List<Holder> owners,
        List<Holder> waiters) {}
