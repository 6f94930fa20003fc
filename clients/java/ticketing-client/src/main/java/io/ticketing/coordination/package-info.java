/**
 * The Java client of Ticketing's coordination nodes (docs/coordination.md):
 * nodes addressed by path, sessions that survive a dropped connection and a
 * leader change, and counting semaphores with shared and exclusive holds,
 * FIFO queues and watches, over a {@link io.ticketing.TicketBroker}'s
 * connection.
 *
 * <p>A {@link io.ticketing.coordination.CoordinationClient} is made over a
 * broker and uses its connection to the leader; sessions share that
 * connection when the server carries several sessions on one connection
 * (an older server: each session gets a connection of its own to the same
 * leader). A {@link io.ticketing.coordination.Session} is built on one
 * internal attachment that attaches, restores the session after a lost
 * connection, keeps it alive, and keeps the conservative client deadline
 * (docs/protocol.md, "A coordination session's deadline"): its
 * {@link io.ticketing.coordination.Lease}s end on the client at that
 * deadline, before the server can hand their holds to anyone else.
 * Semaphore, describe and watch calls and the recipes
 * ({@link io.ticketing.coordination.Mutex},
 * {@link io.ticketing.coordination.Election},
 * {@link io.ticketing.coordination.Discovery},
 * {@link io.ticketing.coordination.Publication}) are thin request builders
 * over it; node requests over the client.
 */
package io.ticketing.coordination;
