package io.ticketing.coordination;

/** The hold was released (or replaced by a new hold of its session). A lease's end cause. */
public final class ReleasedException extends CoordinationException {
    private static final long serialVersionUID = 1L;

    ReleasedException(String message) {
        super(message);
    }
}
