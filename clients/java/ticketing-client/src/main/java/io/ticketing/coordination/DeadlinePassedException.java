package io.ticketing.coordination;

/** The session's conservative deadline passed without an answer from the server: its holds were given up on the client (the server may still have them until it expires the session; a restored session gets them back only by acquiring again). A lease's end cause. */
public final class DeadlinePassedException extends CoordinationException {
    private static final long serialVersionUID = 1L;

    DeadlinePassedException(String message) {
        super(message);
    }
}
