package io.ticketing.coordination;

/** The state does not allow it: a semaphore in use deleted without force, a limit below the count held (PRECONDITION_FAILED). */
public final class PreconditionFailedException extends StatusException {
    private static final long serialVersionUID = 1L;

    PreconditionFailedException(String message) {
        super(message, io.ticketing.wire.Coord.PRECONDITION_FAILED);
    }
}
