package io.ticketing.spring.retry;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Global retry settings, {@code ticketing.transaction.retry.*}. Negative
 * values are rejected at startup.
 */
@ConfigurationProperties("ticketing.transaction.retry")
public class TransactionRetryProperties {
    /** Whether @Transactional methods are retried at all. */
    private boolean enabled = true;
    /** Most executions of a method, the first included (10: up to 9 retries). 0 and 1: no retries. */
    private int maxAttempts = 10;
    /** Base of the slow backoff tier (OVERLOADED, CLIENT_RESOURCE_EXHAUSTED), in milliseconds. */
    private long slowBackoffBaseMs = 50;
    /** Cap of the slow backoff tier, in milliseconds. */
    private long slowCapBackoffMs = 5000;
    /** Base of the fast backoff tier (ABORTED, UNAVAILABLE, transport errors), in milliseconds. */
    private long fastBackoffBaseMs = 5;
    /** Cap of the fast backoff tier, in milliseconds. */
    private long fastCapBackoffMs = 500;

    /** Settings with the defaults. */
    public TransactionRetryProperties() {}

    /**
     * Whether @Transactional methods are retried at all.
     *
     * @return whether retries are on
     */
    public boolean isEnabled() {
        return enabled;
    }

    /**
     * Sets: whether @Transactional methods are retried at all
     *
     * @param v whether retries are on
     */
    public void setEnabled(boolean v) {
        this.enabled = v;
    }

    /**
     * Most executions of a method, the first included (10: up to 9 retries). 0 and 1: no retries.
     *
     * @return the most executions
     */
    public int getMaxAttempts() {
        return maxAttempts;
    }

    /**
     * Sets: most executions of a method, the first included (10: up to 9 retries). 0 and 1: no retries
     *
     * @param v the most executions
     */
    public void setMaxAttempts(int v) {
        this.maxAttempts = v;
    }

    /**
     * Base of the slow backoff tier (OVERLOADED, CLIENT_RESOURCE_EXHAUSTED), in milliseconds.
     *
     * @return the base in ms
     */
    public long getSlowBackoffBaseMs() {
        return slowBackoffBaseMs;
    }

    /**
     * Sets: base of the slow backoff tier (OVERLOADED, CLIENT_RESOURCE_EXHAUSTED), in milliseconds
     *
     * @param v the base in ms
     */
    public void setSlowBackoffBaseMs(long v) {
        this.slowBackoffBaseMs = v;
    }

    /**
     * Cap of the slow backoff tier, in milliseconds.
     *
     * @return the cap in ms
     */
    public long getSlowCapBackoffMs() {
        return slowCapBackoffMs;
    }

    /**
     * Sets: cap of the slow backoff tier, in milliseconds
     *
     * @param v the cap in ms
     */
    public void setSlowCapBackoffMs(long v) {
        this.slowCapBackoffMs = v;
    }

    /**
     * Base of the fast backoff tier (ABORTED, UNAVAILABLE, transport errors), in milliseconds.
     *
     * @return the base in ms
     */
    public long getFastBackoffBaseMs() {
        return fastBackoffBaseMs;
    }

    /**
     * Sets: base of the fast backoff tier (ABORTED, UNAVAILABLE, transport errors), in milliseconds
     *
     * @param v the base in ms
     */
    public void setFastBackoffBaseMs(long v) {
        this.fastBackoffBaseMs = v;
    }

    /**
     * Cap of the fast backoff tier, in milliseconds.
     *
     * @return the cap in ms
     */
    public long getFastCapBackoffMs() {
        return fastCapBackoffMs;
    }

    /**
     * Sets: cap of the fast backoff tier, in milliseconds
     *
     * @param v the cap in ms
     */
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
