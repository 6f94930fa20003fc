// Package coordination is the Go client of Ticketing's coordination nodes
// (docs/coordination.md): nodes addressed by path, sessions that survive a
// dropped connection and a leader change, and counting semaphores with
// shared and exclusive holds, FIFO queues and watches, on the same cluster,
// port and protocol as tickets.
//
// A Client manages nodes; a Session, opened on one node, reconnects and
// restores itself (within its timeout) whenever its connection is lost.
// Acquires and describes in flight are sent again after a restore (a
// repeated acquire replaces the earlier one and keeps its queue position);
// creates, updates and deletes whose answer was lost report
// ErrIndeterminate instead of being guessed. Every per-operation status is
// returned as an error matching its sentinel (ErrNotFound, ...).
//
// A Lease's Token is its order id: a fencing token from the same strictly
// increasing counter as ticket tokens.
package coordination
