package io.ticketing.coordination;

/** The node, session or semaphore does not exist (NOT_FOUND). */
public final class NotFoundException extends StatusException {
    private static final long serialVersionUID = 1L;

    NotFoundException(String message) {
        super(message, io.ticketing.wire.Coord.NOT_FOUND);
    }
}
