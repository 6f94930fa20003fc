package io.ticketing;

/**
 * A server belongs to another cluster than the one this client is pinned to:
 * the cluster of the first server it reached, or the one given to
 * {@link TicketBroker.Builder#clusterId(String)}. The client never uses such a
 * server and keeps trying the other addresses; calls fail with this exception
 * at once when every listed server is refused so, and when their wait for a
 * connection ends while only servers of another cluster answered. It is an
 * {@link UnavailableException}: no usable server was reached.
 *
 * <p>A cluster restored from a snapshot has a new ID: give the clients the new
 * one ({@link TicketBroker.Builder#clusterId(String)}) or restart them.
 */
public final class WrongClusterException extends UnavailableException {
    /** The cluster ID the client is pinned to. */
    private final String pinnedClusterId;
    /** The cluster ID the refused server reported. */
    private final String serverClusterId;

    WrongClusterException(String message, String pinnedClusterId, String serverClusterId) {
        super(message, null, 0);
        this.pinnedClusterId = pinnedClusterId;
        this.serverClusterId = serverClusterId;
    }

    /** A copy with another message (the call's), keeping the IDs. */
    WrongClusterException(String message, WrongClusterException cause) {
        super(message, cause, 0);
        this.pinnedClusterId = cause.pinnedClusterId;
        this.serverClusterId = cause.serverClusterId;
    }

    /**
     * The cluster this client is pinned to.
     *
     * @return its ID, 32 hex digits
     */
    public String pinnedClusterId() {
        return pinnedClusterId;
    }

    /**
     * The refused server's cluster.
     *
     * @return its ID, 32 hex digits, or "none" when the server has none yet (a cluster still forming)
     */
    public String serverClusterId() {
        return serverClusterId;
    }
}
