package io.ticketing.coordination;

/** A node limit (sessions, semaphores, waiters) or the principal's session quota is reached (LIMIT_EXCEEDED). */
public final class LimitExceededException extends StatusException {
    private static final long serialVersionUID = 1L;

    LimitExceededException(String message) {
        super(message, io.ticketing.wire.Coord.LIMIT_EXCEEDED);
    }
}
