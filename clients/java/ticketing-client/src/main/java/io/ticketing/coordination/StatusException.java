package io.ticketing.coordination;

import io.ticketing.wire.Coord;

/** A per-operation status other than SUCCESS, with the server's message; each status has its subclass. */
public abstract class StatusException extends CoordinationException {
    private static final long serialVersionUID = 1L;
    /** The status's number on the wire. */
    private final int status;

    StatusException(String message, int status) {
        super(message);
        this.status = status;
    }

    /**
     * The status's stable number on the wire (docs/protocol.md).
     *
     * @return the status number
     */
    public int status() {
        return status;
    }

    static final String[] NAMES = {"SUCCESS", "NOT_FOUND", "ALREADY_EXISTS", "BAD_REQUEST", "PRECONDITION_FAILED", "ABORTED",
        "SESSION_EXPIRED", "BAD_SESSION", "UNAUTHORIZED", "LIMIT_EXCEEDED"};

    /** The exception of status, for what: "coordination: create semaphore s: NOT_FOUND: message". */
    static StatusException of(String what, int status, String message) {
        String name = status < NAMES.length ? NAMES[status] : "status " + status;
        String m = "coordination: " + what + ": " + name + ": " + message;
        return switch (status) {
            case Coord.NOT_FOUND -> new NotFoundException(m);
            case Coord.ALREADY_EXISTS -> new AlreadyExistsException(m);
            case Coord.PRECONDITION_FAILED -> new PreconditionFailedException(m);
            case Coord.ABORTED -> new AbortedException(m);
            case Coord.SESSION_EXPIRED -> new SessionExpiredException(m);
            case Coord.BAD_SESSION -> new BadSessionException(m);
            case Coord.UNAUTHORIZED -> new UnauthorizedException(m);
            case Coord.LIMIT_EXCEEDED -> new LimitExceededException(m);
            default -> new BadRequestException(m);
        };
    }
}
