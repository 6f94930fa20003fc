package io.ticketing.coordination;

/**
 * A coordination failure of this package: a status the server answered
 * ({@link StatusException} and its subclasses, one per status of
 * docs/coordination.md) or a lease's end ({@link DeadlinePassedException},
 * {@link LostException}, {@link ReleasedException}). Failures of the
 * connection are the Ticketing client's exceptions
 * ({@link io.ticketing.UnavailableException},
 * {@link io.ticketing.IndeterminateException},
 * {@link io.ticketing.ClosedException}, ...).
 */
public abstract class CoordinationException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CoordinationException(String message) {
        super(message);
    }
}
