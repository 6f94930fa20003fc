package io.ticketing;

import org.jspecify.annotations.Nullable;

/**
 * Told of what a {@link TicketBroker} does, for metrics
 * ({@link TicketBroker.Builder#listener}); the Spring Boot starter binds it
 * to Micrometer. Calls come on the client's own threads (or the caller's,
 * for acquires) and must return quickly; an exception thrown here is logged
 * and otherwise ignored.
 */
public interface BrokerListener {
    /** Every outcome {@link #acquireFinished} reports, as {@link #outcomeOf} names them. */
    java.util.List<String> ACQUIRE_OUTCOMES = java.util.List.of("granted", "not_acquired", "capacity", "budget_exceeded",
            "indeterminate", "unavailable", "permission_denied", "unauthenticated", "invalid_argument", "closed", "canceled", "other");

    /**
     * An acquire ended.
     *
     * @param outcome {@code granted}, or what it failed with: {@code not_acquired},
     *     {@code capacity}, {@code budget_exceeded}, {@code indeterminate},
     *     {@code unavailable}, {@code permission_denied}, {@code unauthenticated},
     *     {@code invalid_argument}, {@code closed}, {@code canceled}, {@code other}
     * @param nanos how long the call took, from the call to its outcome
     */
    default void acquireFinished(String outcome, long nanos) {}

    /**
     * A session with a server began.
     *
     * @param address the server's address
     * @param reconnect whether an earlier session of this broker had ended
     * @param leaderChanged whether the server differs from that of the previous session
     */
    default void sessionStarted(String address, boolean reconnect, boolean leaderChanged) {}

    /**
     * A background release ({@link Ticket#close()}, compensating releases) ended.
     *
     * @param error null when released; otherwise what the release observer is told
     */
    default void backgroundReleaseFinished(@Nullable TicketingException error) {}

    /**
     * The outcome name of an acquire's failure, as {@link #acquireFinished} reports it.
     *
     * @param failure what the acquire threw; null when it returned a ticket
     * @return the outcome's name
     */
    static String outcomeOf(@Nullable Throwable failure) {
        if (failure == null) {
            return "granted";
        }
        if (failure instanceof NotAcquiredException) {
            return "not_acquired";
        }
        if (failure instanceof CapacityException) {
            return "capacity";
        }
        if (failure instanceof BudgetExceededException) {
            return "budget_exceeded";
        }
        if (failure instanceof IndeterminateException) {
            return "indeterminate";
        }
        if (failure instanceof UnavailableException) {
            return "unavailable";
        }
        if (failure instanceof PermissionDeniedException) {
            return "permission_denied";
        }
        if (failure instanceof UnauthenticatedException) {
            return "unauthenticated";
        }
        if (failure instanceof InvalidArgumentException) {
            return "invalid_argument";
        }
        if (failure instanceof ClosedException) {
            return "closed";
        }
        if (failure instanceof java.util.concurrent.CancellationException) {
            return "canceled";
        }
        return "other";
    }
}
