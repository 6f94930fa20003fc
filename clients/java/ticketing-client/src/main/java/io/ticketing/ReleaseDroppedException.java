package io.ticketing;

/** A background release ({@link Ticket#close()}) could not be started because the bounded set of background releases was full; the ticket stays held until its lease expires. Reported to the release observer. */
public final class ReleaseDroppedException extends TicketingException {
    ReleaseDroppedException(String message) {
        super(message, null, 0);
    }

    ReleaseDroppedException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
