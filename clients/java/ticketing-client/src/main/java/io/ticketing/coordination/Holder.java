package io.ticketing.coordination;

/**
 * An owner or waiter of a semaphore.
 *
 * @param orderId its order id (an owner's fencing token)
 * @param session its session
 * @param count the count it holds or waits for
 * @param timeoutMs a waiter's queue timeout in ms (2^64-1 as a signed long, -1: forever)
 * @param data the data it gave
 */
public record Holder(long orderId, long session, long count, long timeoutMs, byte[] data) {}
