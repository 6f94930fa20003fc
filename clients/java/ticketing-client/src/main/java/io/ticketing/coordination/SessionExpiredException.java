package io.ticketing.coordination;

/** The session expired or ended on the server (SESSION_EXPIRED): a new session is needed. */
public final class SessionExpiredException extends StatusException {
    private static final long serialVersionUID = 1L;

    SessionExpiredException(String message) {
        super(message, io.ticketing.wire.Coord.SESSION_EXPIRED);
    }
}
