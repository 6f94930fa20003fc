/**
 * The Ticketing client: {@link io.ticketing.TicketBroker} (one multiplexed
 * connection to the leader, blocking and {@code CompletableFuture} calls),
 * {@link io.ticketing.Ticket}, the options and the exception hierarchy under
 * {@link io.ticketing.TicketingException}.
 *
 * <p>Nothing here is null unless marked {@code @Nullable} (JSpecify's
 * {@code @NullMarked}): Kotlin sees these types with their nullability.
 */
@NullMarked
package io.ticketing;

import org.jspecify.annotations.NullMarked;
