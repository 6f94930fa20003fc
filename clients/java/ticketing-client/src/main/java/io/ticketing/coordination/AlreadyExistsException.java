package io.ticketing.coordination;

/** The node or semaphore exists already (ALREADY_EXISTS). */
public final class AlreadyExistsException extends StatusException {
    private static final long serialVersionUID = 1L;

    AlreadyExistsException(String message) {
        super(message, io.ticketing.wire.Coord.ALREADY_EXISTS);
    }
}
