package io.ticketing.coordination;

/**
 * A recipe ({@link Mutex}, {@link Election}) found its semaphore with a
 * limit or data it does not create: made by hand or by another program; the
 * recipe refuses to use it.
 */
public final class WrongKindException extends CoordinationException {
    private static final long serialVersionUID = 1L;

    WrongKindException(String message) {
        super(message);
    }
}
