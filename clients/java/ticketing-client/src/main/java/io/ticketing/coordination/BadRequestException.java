package io.ticketing.coordination;

/** A field out of its range (BAD_REQUEST); one refused before sending says so: nothing was sent. */
public final class BadRequestException extends StatusException {
    private static final long serialVersionUID = 1L;

    BadRequestException(String message) {
        super(message, io.ticketing.wire.Coord.BAD_REQUEST);
    }
}
