package io.ticketing.spring.retry;

import java.util.concurrent.ThreadLocalRandom;

/**
 * The retry settings of one method: the global properties overridden by its
 * {@link TicketingTransactional}, if any.
 *
 * <p>Backoff: before retry n the ceiling is base·2^(n-1), capped. The fast
 * tier waits uniformly in [0, ceiling) (full jitter), the slow tier in
 * [ceiling/2, ceiling) (equal jitter: an overloaded server gets at least half
 * the ceiling of relief), the zero tier not at all.
 *
 * @param enabled whether the method is retried
 * @param maxAttempts the most executions, the first included
 * @param idempotent whether the method may run again when an outcome is unknown
 * @param slowBaseMs the slow tier's base, ms
 * @param slowCapMs the slow tier's cap, ms
 * @param fastBaseMs the fast tier's base, ms
 * @param fastCapMs the fast tier's cap, ms
 */
public record RetrySettings(boolean enabled, int maxAttempts, boolean idempotent,
        long slowBaseMs, long slowCapMs, long fastBaseMs, long fastCapMs) {

    /** The settings of a method with annotation a (may be null) under the global properties p. */
    static RetrySettings of(TransactionRetryProperties p, TicketingTransactional a, String where) {
        if (a == null) {
            return new RetrySettings(p.isEnabled(), p.getMaxAttempts(), false,
                    p.getSlowBackoffBaseMs(), p.getSlowCapBackoffMs(), p.getFastBackoffBaseMs(), p.getFastCapBackoffMs());
        }
        neg(where, "maxAttempts", a.maxAttempts());
        neg(where, "slowBackoffBaseMs", a.slowBackoffBaseMs());
        neg(where, "slowCapBackoffMs", a.slowCapBackoffMs());
        neg(where, "fastBackoffBaseMs", a.fastBackoffBaseMs());
        neg(where, "fastCapBackoffMs", a.fastCapBackoffMs());
        return new RetrySettings(p.isEnabled() && a.enabled(),
                a.maxAttempts() != 0 ? a.maxAttempts() : p.getMaxAttempts(),
                a.idempotent(),
                or(a.slowBackoffBaseMs(), p.getSlowBackoffBaseMs()), or(a.slowCapBackoffMs(), p.getSlowCapBackoffMs()),
                or(a.fastBackoffBaseMs(), p.getFastBackoffBaseMs()), or(a.fastCapBackoffMs(), p.getFastCapBackoffMs()));
    }

    private static long or(long local, long global) {
        return local != 0 ? local : global;
    }

    private static void neg(String where, String name, long v) {
        if (v < 0) {
            throw new IllegalArgumentException("@TicketingTransactional(" + name + " = " + v + ") on " + where
                    + ": negative values are not allowed (0 means the global setting)");
        }
    }

    /** How long to wait before retry n (1 = the first retry) of a failure of class c, in ms. */
    long delayMs(RetryClass c, int n) {
        return switch (c.tier()) {
            case FAST -> {
                long ceil = ceiling(fastBaseMs, fastCapMs, n);
                yield ceil <= 0 ? 0 : ThreadLocalRandom.current().nextLong(ceil);
            }
            case SLOW -> {
                long ceil = ceiling(slowBaseMs, slowCapMs, n);
                yield ceil <= 0 ? 0 : ceil / 2 + ThreadLocalRandom.current().nextLong(ceil - ceil / 2);
            }
            default -> 0;
        };
    }

    static long ceiling(long base, long cap, int n) {
        long d = base;
        for (int i = 1; i < n && d < cap; i++) {
            d *= 2;
        }
        return Math.min(d, cap);
    }
}
