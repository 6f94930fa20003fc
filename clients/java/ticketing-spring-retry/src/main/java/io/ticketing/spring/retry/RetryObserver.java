package io.ticketing.spring.retry;

/**
 * Told of the retry module's decisions, for metrics. Calls come on the
 * thread running the transaction and must return quickly.
 */
public interface RetryObserver {
    /** Observes nothing. */
    RetryObserver NONE = new RetryObserver() {};

    /**
     * A failed attempt is about to be run again.
     *
     * @param method the bean's class and method, {@code Class.method}
     * @param failure the class of the failure being retried
     * @param nextAttempt the number of the attempt about to run (2 for the first retry)
     */
    default void retrying(String method, RetryClass failure, int nextAttempt) {}

    /**
     * A retryable failure is thrown to the caller because its attempts are used up.
     *
     * @param method the bean's class and method, {@code Class.method}
     * @param failure the class of the failure
     * @param attempts how many attempts ran
     */
    default void exhausted(String method, RetryClass failure, int attempts) {}
}
