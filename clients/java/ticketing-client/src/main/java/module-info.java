/**
 * The Ticketing client: {@link io.ticketing.TicketBroker}, tickets, the
 * exception hierarchy and the options. The wire codec
 * ({@code io.ticketing.wire}) is internal and not exported.
 */
module io.ticketing.client {
    requires static org.jspecify;

    exports io.ticketing;
}
