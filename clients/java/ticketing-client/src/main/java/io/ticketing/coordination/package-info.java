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
 * leader). A {@link io.ticketing.coordination.Session} attaches, restores
 * itself after a lost connection, keeps itself alive, and keeps the
 * conservative client deadline (docs/protocol.md, "A coordination
 * session's deadline"): its {@link io.ticketing.coordination.Lease}s end
 * on the client at that deadline, before the server can hand their holds to
 * anyone else. Semaphore and node requests are thin request builders over
 * the session and the client.
 */
package io.ticketing.coordination;
