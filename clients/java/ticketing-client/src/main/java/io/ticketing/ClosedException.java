package io.ticketing;

/** The broker was closed. Nothing more is sent. */
public final class ClosedException extends TicketingException {
    ClosedException(String message) {
        super(message, null, 0);
    }

    ClosedException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
