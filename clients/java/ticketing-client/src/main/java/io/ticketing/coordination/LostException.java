package io.ticketing.coordination;

/** A hold was taken away by a force delete of its semaphore. A lease's end cause. */
public final class LostException extends CoordinationException {
    private static final long serialVersionUID = 1L;

    LostException(String message) {
        super(message);
    }
}
