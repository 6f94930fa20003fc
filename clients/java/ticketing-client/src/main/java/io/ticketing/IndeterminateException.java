package io.ticketing;

/**
 * The request may have reached the server, but its final answer was lost: the
 * connection dropped or went silent, the session ended with {@code M} or
 * {@code E}, the server sent an invalid frame, the broker was closed, or no
 * answer came in time. For an acquire the ticket may or may not have been
 * granted: do not enter the critical section. The acquire is never re-sent
 * automatically, except after a stopping server's {@code E} 11, which does
 * not make it indeterminate: it is sent again, with the same owner, on the
 * next connection (this exception then means it could not be).
 */
public final class IndeterminateException extends TicketingException {
    /** Whether the broker's own close() lost the answer. */
    private final boolean brokerClosed;

    IndeterminateException(String message, Throwable cause, int serverErrorCode, boolean brokerClosed) {
        super(message, cause, serverErrorCode);
        this.brokerClosed = brokerClosed;
    }

    /**
     * Whether the answer was lost because the broker was closed.
     *
     * @return true when {@link TicketBroker#close()} ended the call
     */
    public boolean brokerClosed() {
        return brokerClosed;
    }

    /** UNDETERMINED; NOT_RETRYABLE when the broker was closed (as the Go client's ErrClosed wins): no retry can use it. */
    @Override
    public RetryClass retryClass() {
        return brokerClosed ? RetryClass.NOT_RETRYABLE : RetryClass.UNDETERMINED;
    }
}
