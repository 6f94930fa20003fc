package io.ticketing;

import io.ticketing.wire.Type;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * The checks of a call's arguments, made before anything is sent (an
 * {@link InvalidArgumentException} says so), and how durations are rounded
 * up to the protocol's whole seconds.
 */
final class Arguments {
    private Arguments() {}

    /** Validated acquire arguments. */
    record AcquireArgs(int waitSec, int leaseSec, long budgetNanos) {}

    static long ceilSeconds(Duration d) {
        long s = d.getSeconds();
        return d.getNano() > 0 ? s + 1 : s;
    }

    static AcquireArgs checkAcquire(String key, Duration wait, Duration lease, Duration budget) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(wait, "wait");
        Objects.requireNonNull(lease, "lease");
        Objects.requireNonNull(budget, "budget");
        String op = "acquire " + quote(key) + ": ";
        String sent = "; nothing was sent";
        int klen = key.getBytes(StandardCharsets.UTF_8).length;
        if (klen < 1 || klen > TicketBroker.MAX_KEY) {
            throw new InvalidArgumentException(op + "the key is " + klen + " bytes, it must be 1.." + TicketBroker.MAX_KEY + " bytes" + sent);
        }
        if (wait.isNegative()) {
            throw new InvalidArgumentException(op + "wait " + wait + " is negative; it must be 0.." + Type.MAX_WAIT + " s (0 is one immediate attempt)" + sent);
        }
        long w = ceilSeconds(wait);
        if (w > Type.MAX_WAIT) {
            throw new InvalidArgumentException(op + "wait " + wait + " (" + w + " s rounded up) is longer than the maximum " + Type.MAX_WAIT + " s" + sent);
        }
        if (lease.isNegative() || lease.isZero()) {
            throw new InvalidArgumentException(op + "lease " + lease + " must be " + Type.MIN_LEASE + ".." + Type.MAX_LEASE + " s" + sent);
        }
        long l = ceilSeconds(lease);
        if (l > Type.MAX_LEASE) {
            throw new InvalidArgumentException(op + "lease " + lease + " (" + l + " s rounded up) is longer than the maximum " + Type.MAX_LEASE + " s" + sent);
        }
        if (budget.isNegative()) {
            throw new InvalidArgumentException(op + "work budget " + budget + " is negative; it must be 0 or more" + sent);
        }
        // Rounded up like wait and lease: a fraction of a second of work is planned as the whole second.
        long bs = ceilSeconds(budget);
        if (bs > Type.MAX_LEASE) {
            throw new InvalidArgumentException(op + "work budget " + secs(budget) + " is " + bs + " s rounded up, longer than "
                    + Type.MAX_LEASE + " s: work longer than the longest lease is not supported" + sent);
        }
        // Refused here rather than after a token was spent on a ticket that must be given back.
        long most = maxBudgetNanos(l);
        if (TimeUnit.SECONDS.toNanos(bs) > most) {
            throw new InvalidArgumentException(op + "work budget " + secs(budget) + " (" + bs + " s rounded up) cannot fit in a " + l
                    + " s lease: even a ticket granted at once has at most " + secs(Duration.ofNanos(most)) + " of conservative time left ("
                    + TicketBroker.CLOCK_DRIFT_PERCENT + "% clock allowance, " + secs(TicketBroker.CLOCK_DRIFT_MARGIN) + " margin); use a budget of at most "
                    + TimeUnit.NANOSECONDS.toSeconds(most) + " s or a longer lease" + sent);
        }
        return new AcquireArgs((int) w, (int) l, TimeUnit.SECONDS.toNanos(bs));
    }

    /**
     * The longest work budget a lease of leaseSec whole seconds can ever
     * satisfy: the conservative remaining time of a grant made at once, with
     * nothing queued, measured from the send.
     */
    static long maxBudgetNanos(long leaseSec) {
        return Acquirer.conservativeDeadline(0, TimeUnit.SECONDS.toMillis(leaseSec), 0);
    }

    /** A duration in seconds, the unit of the protocol and the docs. */
    static String secs(Duration d) {
        return java.math.BigDecimal.valueOf(d.getSeconds()).add(java.math.BigDecimal.valueOf(d.getNano(), 9))
                .stripTrailingZeros().toPlainString() + " s";
    }

    static void checkRelease(String key, long token) {
        int klen = key.getBytes(StandardCharsets.UTF_8).length;
        String op = "release of token " + Long.toUnsignedString(token) + " for " + quote(key) + ": ";
        if (klen < 1 || klen > TicketBroker.MAX_KEY) {
            throw new InvalidArgumentException(op + "the key is " + klen + " bytes, it must be 1.." + TicketBroker.MAX_KEY + " bytes; nothing was sent");
        }
        if (token == 0) {
            throw new InvalidArgumentException(op + "token 0 is never granted (tokens start at 1); nothing was sent");
        }
    }

    static String quote(String key) {
        return key.length() > 64 ? "\"" + key.substring(0, 64) + "…\"" : "\"" + key + "\"";
    }
}
