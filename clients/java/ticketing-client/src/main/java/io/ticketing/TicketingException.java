package io.ticketing;

/**
 * Every failure of this client. The hierarchy is sealed and small so that a
 * caller can {@code catch} exactly the outcomes it handles:
 *
 * <ul>
 *   <li>{@link NotAcquiredException}: not granted within the wait (W), the only ordinary "no";
 *   <li>{@link CapacityException}: a server limit (B), final and reported at once, never retried by the client;
 *   <li>{@link IndeterminateException}: the request may have been sent but its final answer was lost: the
 *       ticket may or may not have been granted; do not enter the critical section;
 *   <li>{@link BudgetExceededException}: granted too late for the work budget; the client released it;
 *   <li>{@link NotHeldException}: a release found the token no longer holding the key (N); its subclass
 *       {@link NotHeldAfterRetryException} when N answered a release resent after a lost answer;
 *   <li>{@link InvalidArgumentException}: an argument out of range; nothing was sent;
 *   <li>{@link UnauthenticatedException}: the server refused the token or the client certificate;
 *   <li>{@link PermissionDeniedException}: the server refused the request for this client's principal (F):
 *       final, nothing happened, the connection stays open; never retried;
 *   <li>{@link UnavailableException}: no usable connection to the leader, or a read-only request lost its
 *       connection; nothing with an effect may have been sent; its subclass {@link WrongClusterException} when
 *       the servers that answered belong to another cluster than the one this client is pinned to;
 *   <li>{@link ClosedException}: the broker was closed;
 *   <li>{@link ReleaseDroppedException}: a background release could not be queued.
 * </ul>
 *
 * The message always says what happened and what to do. When the server ended
 * the session with an {@code E} frame, {@link #serverErrorCode()} is its stable code.
 */
public abstract sealed class TicketingException extends RuntimeException
        permits NotAcquiredException, CapacityException, IndeterminateException, BudgetExceededException,
                NotHeldException, InvalidArgumentException, UnauthenticatedException, PermissionDeniedException,
                UnavailableException, ClosedException, ReleaseDroppedException {
    /** The server's E code, 0 if none. */
    private final int serverErrorCode;

    TicketingException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause);
        this.serverErrorCode = serverErrorCode;
    }

    /**
     * The code of the server's {@code E} frame behind this failure (docs/protocol.md), or 0 if there was none.
     *
     * @return the code, or 0
     */
    public int serverErrorCode() {
        return serverErrorCode;
    }

    /**
     * How a transaction-retry layer should treat this failure, as the Go
     * client's errors report it to the Go retry package: capacity rejects
     * are {@code OVERLOADED}, unknown outcomes {@code UNDETERMINED} and
     * unusable connections {@code TRANSPORT_UNAVAILABLE} (both retried only
     * for idempotent work), invalid arguments {@code INVALID_ARGUMENT} (never
     * retried); everything else (not acquired, not held, budget exceeded,
     * unauthenticated, permission denied, closed, an unknown outcome because
     * the broker was closed) is not retried.
     * @return the class of this failure
     */
    public RetryClass retryClass() {
        return RetryClass.NOT_RETRYABLE;
    }

    /** See {@link TicketingException#retryClass()}. */
    public enum RetryClass {
        /** Not retried. */
        NOT_RETRYABLE,
        /** A capacity reject: retried after a slow backoff. */
        OVERLOADED,
        /** The outcome is unknown: retried only for idempotent work. */
        UNDETERMINED,
        /** The connection could not be used: retried only for idempotent work. */
        TRANSPORT_UNAVAILABLE,
        /** Invalid arguments: never retried. */
        INVALID_ARGUMENT
    }
}
