// Package coordination is the Go client of Ticketing's coordination nodes
// (docs/coordination.md): nodes addressed by path, sessions that survive a
// dropped connection and a leader change, and counting semaphores with
// shared and exclusive holds, FIFO queues and watches, on the same cluster,
// port and protocol as tickets.
//
// A Client is made by New over a ticketing.Broker and uses the broker's
// connection layer: its dial order and staggered dials, leader following
// and backoff, liveness rule, TLS, token, dialer and logger, and the same
// error sentinels (ErrUnavailable, ErrIndeterminate, ErrClosed, ... are
// the ticketing values). Node requests go on the broker's connection to the
// leader, and so do sessions when the server carries several sessions on
// one connection (every server of this release; each session of an older
// server gets a connection of its own, dialled the same way). Dial, the
// deprecated constructor, does the same over a Ticketing client of its own.
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
// increasing counter as ticket tokens. The Session's Context, every Lease's
// Context and an Election's leadership context end at the session's
// conservative deadline — the send time of the last request the server
// answered after a commit, plus the session timeout, less 1 % and 100 ms —
// whatever the connection does, so that the client gives a hold up before
// the server can hand it to anyone else (docs/coordination.md, "The
// client's deadline"). Watching the Session's Context is enough to stop in
// time; after a restore, Context returns a new one.
//
// The recipes (Mutex, Election, Discovery, Publication) keep their
// semaphores in a name space of their own ("recipe/<kind>/<name>") with a
// marker in their data, and refuse (ErrWrongKind) a semaphore they did not
// create.
package coordination
