package io.ticketing;

/** A release found the key free or held under another token (N): the ticket had already ended (expired, or released before). */
public final class NotHeldException extends TicketingException {
    NotHeldException(String message) {
        super(message, null, 0);
    }

    NotHeldException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
