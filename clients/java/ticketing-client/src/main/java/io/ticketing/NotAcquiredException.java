package io.ticketing;

/** The key was not granted within the wait (W, or X after a cancel). */
public final class NotAcquiredException extends TicketingException {
    NotAcquiredException(String message) {
        super(message, null, 0);
    }

    NotAcquiredException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
