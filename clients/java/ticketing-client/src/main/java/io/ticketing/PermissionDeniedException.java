package io.ticketing;

/**
 * The server refused the request because this client's principal may not
 * make it (F frame, docs/protocol.md "Refusal reasons of F"): its role does
 * not allow it, the key is outside its key prefixes, or the ticket to release
 * was granted to another principal. It is final and nothing happened; the
 * connection stays open and every other request goes on. The same request is
 * refused again until the server's configuration changes, so it is never
 * retried (by the client or by the retry module).
 */
public final class PermissionDeniedException extends TicketingException {
    /** The principal's role does not allow the request. */
    public static final int ROLE = 1;
    /** The key is outside the principal's key prefixes. */
    public static final int KEY = 2;
    /** The ticket was granted to another principal (a release, L or U). */
    public static final int OWNER = 3;

    /** The F frame's reason code. */
    private final int reason;
    /** The server that refused. */
    private final String addr;

    PermissionDeniedException(String message, int reason, String addr) {
        super(message, null, 0);
        this.reason = reason;
        this.addr = addr;
    }

    /** The exception of a request answered F: final, nothing happened, the connection stays open. */
    static PermissionDeniedException answered(String op, String addr, int reason, String effect) {
        return new PermissionDeniedException(op + ": permission denied by the server " + addr + ": "
                + reasonName(reason) + effect + "; the same request is refused until the server's "
                + "principals change (docs/deployment.md, Authorization)", reason, addr);
    }

    /**
     * The F frame's reason: {@link #ROLE}, {@link #KEY} or {@link #OWNER} (another value from a newer server).
     *
     * @return the reason code
     */
    public int reason() {
        return reason;
    }

    /**
     * The reason in words, as in {@link #getMessage()}.
     *
     * @return the reason's description
     */
    public String reasonText() {
        return reasonName(reason);
    }

    /**
     * The server that refused the request.
     *
     * @return its address, host:port
     */
    public String addr() {
        return addr;
    }

    /**
     * A refusal reason in words (the Go client's wording).
     *
     * @param reason an F frame's reason code
     * @return the reason's description
     */
    public static String reasonName(int reason) {
        return switch (reason) {
            case ROLE -> "the client's role does not allow this request (an admin token is needed for admin operations)";
            case KEY -> "the key is outside the key prefixes the client may use";
            case OWNER -> "the ticket was granted to another principal";
            default -> "refusal reason " + reason;
        };
    }
}
