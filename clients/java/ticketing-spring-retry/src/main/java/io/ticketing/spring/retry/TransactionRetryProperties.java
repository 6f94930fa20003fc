package io.ticketing.spring.retry;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Global retry settings, {@code ticketing.transaction.retry.*}. Negative
 * values are rejected at startup.
 */
@ConfigurationProperties("ticketing.transaction.retry")
public class TransactionRetryProperties {
    /** Whether {@code @Transactional} methods are retried at all. */
    private boolean enabled = true;
    /** Most executions of a method, the first included (10: up to 9 retries). 0 and 1: no retries. */
    private int maxAttempts = 10;
    /** Base of the slow tier (OVERLOADED, CLIENT_RESOURCE_EXHAUSTED), ms. */
    private long slowBackoffBaseMs = 50;
    /** Cap of the slow tier, ms. */
    private long slowCapBackoffMs = 5000;
    /** Base of the fast tier (ABORTED, UNAVAILABLE, transport errors), ms. */
    private long fastBackoffBaseMs = 5;
    /** Cap of the fast tier, ms. */
    private long fastCapBackoffMs = 500;

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public int getMaxAttempts() {
        return maxAttempts;
    }

    public void setMaxAttempts(int maxAttempts) {
        this.maxAttempts = maxAttempts;
    }

    public long getSlowBackoffBaseMs() {
        return slowBackoffBaseMs;
    }

    public void setSlowBackoffBaseMs(long v) {
        this.slowBackoffBaseMs = v;
    }

    public long getSlowCapBackoffMs() {
        return slowCapBackoffMs;
    }

    public void setSlowCapBackoffMs(long v) {
        this.slowCapBackoffMs = v;
    }

    public long getFastBackoffBaseMs() {
        return fastBackoffBaseMs;
    }

    public void setFastBackoffBaseMs(long v) {
        this.fastBackoffBaseMs = v;
    }

    public long getFastCapBackoffMs() {
        return fastCapBackoffMs;
    }

    public void setFastCapBackoffMs(long v) {
        this.fastCapBackoffMs = v;
    }

    /** Rejects negative settings, naming the property. */
    void validate() {
        check("max-attempts", maxAttempts);
        check("slow-backoff-base-ms", slowBackoffBaseMs);
        check("slow-cap-backoff-ms", slowCapBackoffMs);
        check("fast-backoff-base-ms", fastBackoffBaseMs);
        check("fast-cap-backoff-ms", fastCapBackoffMs);
    }

    private static void check(String name, long v) {
        if (v < 0) {
            throw new IllegalArgumentException("ticketing.transaction.retry." + name + " is " + v + "; it must not be negative");
        }
    }
}
