package io.ticketing.coordination;

/** The session is not this connection's, or another client restored it with a higher seq_no (BAD_SESSION). */
public final class BadSessionException extends StatusException {
    private static final long serialVersionUID = 1L;

    BadSessionException(String message) {
        super(message, io.ticketing.wire.Coord.BAD_SESSION);
    }
}
