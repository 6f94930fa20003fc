package io.ticketing;

/**
 * A release found the key free or held under another token (N): the ticket had already ended (expired, or released
 * before). When the release had to be sent again because the first attempt's answer was lost, the subclass
 * {@link NotHeldAfterRetryException} is thrown instead: there the earlier attempt may be what ended the ticket.
 */
public sealed class NotHeldException extends TicketingException permits NotHeldAfterRetryException {
    NotHeldException(String message) {
        super(message, null, 0);
    }

    NotHeldException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
