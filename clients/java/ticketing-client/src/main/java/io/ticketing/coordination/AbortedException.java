package io.ticketing.coordination;

/** A waiting acquire was replaced by a later one of its session, or its semaphore deleted with force (ABORTED). */
public final class AbortedException extends StatusException {
    private static final long serialVersionUID = 1L;

    AbortedException(String message) {
        super(message, io.ticketing.wire.Coord.ABORTED);
    }
}
