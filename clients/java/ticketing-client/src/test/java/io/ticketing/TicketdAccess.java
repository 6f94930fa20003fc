package io.ticketing;

/** Public access to the package-private {@link Ticketd} launcher for the other modules' tests. */
public final class TicketdAccess {
    private TicketdAccess() {}

    /** Starts n real ticketd nodes and waits for a leader; close the result to stop them. */
    public static AutoCloseable start(int n, String... flags) throws Exception {
        Ticketd t = new Ticketd(n, flags);
        try {
            t.awaitLeader(60_000);
        } catch (Throwable e) {
            t.close();
            throw e;
        }
        return t;
    }

    /** The client addresses of a cluster returned by {@link #start}. */
    public static String addrs(AutoCloseable cluster) {
        return ((Ticketd) cluster).addrs();
    }
}
