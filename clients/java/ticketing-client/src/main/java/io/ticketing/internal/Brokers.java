package io.ticketing.internal;

import java.util.function.Function;

/**
 * How the coordination package reaches a broker's connection layer, which
 * is package-private in io.ticketing: TicketBroker sets the opener when its
 * class is initialised (not exported).
 */
public final class Brokers {
    private Brokers() {}

    private static volatile Function<Object, CoordTransport> opener;

    /** Set once by TicketBroker. */
    public static void setOpener(Function<Object, CoordTransport> f) {
        opener = f;
    }

    /** The transport of broker (a TicketBroker). */
    public static CoordTransport transport(Object broker) {
        return opener.apply(broker);
    }
}
