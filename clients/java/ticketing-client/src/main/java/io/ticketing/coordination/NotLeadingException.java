package io.ticketing.coordination;

/** Resign found the session neither leading nor campaigning in the election. */
public final class NotLeadingException extends CoordinationException {
    private static final long serialVersionUID = 1L;

    NotLeadingException(String message) {
        super(message);
    }
}
