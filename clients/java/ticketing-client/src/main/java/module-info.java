/**
 * The Ticketing client: {@link io.ticketing.TicketBroker}, tickets, the
 * exception hierarchy and the options, and the coordination client
 * ({@code io.ticketing.coordination}) over the broker's connection. The
 * wire codec ({@code io.ticketing.wire}) and the bridge between the two
 * ({@code io.ticketing.internal}) are internal and not exported.
 */
module io.ticketing.client {
    requires static org.jspecify;

    exports io.ticketing;
    exports io.ticketing.coordination;
}
