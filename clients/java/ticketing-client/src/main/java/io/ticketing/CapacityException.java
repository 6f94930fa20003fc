package io.ticketing;

/**
 * A server capacity limit (B frame): final and reported at once. The client
 * never retries it; the caller may start a new acquire (with a new owner)
 * after its own backoff.
 */
public final class CapacityException extends TicketingException {
    /** Held tickets on the server at the limit. */
    public static final int HELD = 1;
    /** Waiters on this key at the limit. */
    public static final int KEY_WAITERS = 2;
    /** Waiters on the server at the limit. */
    public static final int WAITERS = 3;
    /** Requests in flight on this connection at the limit. */
    public static final int IN_FLIGHT = 4;
    /** Connections on the server at the limit (the connection was refused). */
    public static final int CONNECTIONS = 5;
    /** The principal's quota of connections (the connection was refused). */
    public static final int PRINCIPAL_CONNECTIONS = 6;
    /** The principal's quota of held tickets. */
    public static final int PRINCIPAL_HELD = 7;
    /** The principal's quota of queued acquires. */
    public static final int PRINCIPAL_WAITERS = 8;
    /** The principal's quota of requests in flight over all its connections. */
    public static final int PRINCIPAL_IN_FLIGHT = 9;
    /** The principal's quota of requests per second. */
    public static final int PRINCIPAL_RATE = 10;

    /** The B frame's reason code. */
    private final int reason;

    CapacityException(String message, int reason) {
        super(message, null, 0);
        this.reason = reason;
    }

    /**
     * The B frame's reason: {@link #HELD} .. {@link #PRINCIPAL_RATE}.
     *
     * @return the reason code, one of the constants above
     */
    public int reason() {
        return reason;
    }

    /**
     * The reason in words.
     *
     * @param reason a B frame's reason code
     * @return a sentence fragment naming the limit
     */
    public static String reasonName(int reason) {
        return switch (reason) {
            case HELD -> "held tickets at the server's limit";
            case KEY_WAITERS -> "waiters on this key at the limit";
            case WAITERS -> "waiters on the server at the limit";
            case IN_FLIGHT -> "requests in flight on this connection at the limit";
            case CONNECTIONS -> "connections on the server at the limit";
            case PRINCIPAL_CONNECTIONS -> "the principal's connections at its quota (connections)";
            case PRINCIPAL_HELD -> "the principal's held tickets at its quota (held_tickets)";
            case PRINCIPAL_WAITERS -> "the principal's queued acquires at its quota (waiters)";
            case PRINCIPAL_IN_FLIGHT -> "the principal's requests in flight at its quota (in_flight)";
            case PRINCIPAL_RATE -> "the principal's request rate at its quota (requests_per_second)";
            default -> "capacity reason " + reason;
        };
    }

    @Override
    public RetryClass retryClass() {
        return RetryClass.OVERLOADED;
    }
}
