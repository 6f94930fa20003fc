package io.ticketing;

/** An argument is out of range (wait, lease, budget, key length, token 0, configuration). Nothing was sent. */
public final class InvalidArgumentException extends TicketingException {
    InvalidArgumentException(String message) {
        super(message, null, 0);
    }

    InvalidArgumentException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }

    /** INVALID_ARGUMENT: never retried, the same call fails again. */
    @Override
    public RetryClass retryClass() {
        return RetryClass.INVALID_ARGUMENT;
    }
}
