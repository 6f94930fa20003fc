package io.ticketing.coordination;

/** The principal may not do this on the node (UNAUTHORIZED). */
public final class UnauthorizedException extends StatusException {
    private static final long serialVersionUID = 1L;

    UnauthorizedException(String message) {
        super(message, io.ticketing.wire.Coord.UNAUTHORIZED);
    }
}
