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

// Design note, for maintainers (not part of the package documentation).
//
// The package is one attachment with thin request builders over it, the
// way etcd's concurrency package builds its Mutex and Election on a
// Session; the Java and C# coordination clients have the same parts:
//
//   - link.go: the package's use of the Ticketing client's connection
//     layer (the broker's shared connection, or a session's own on an older
//     server); every call into that layer is in this file.
//   - attachment.go, deadline.go, retry.go: the attachment, one per
//     Session. It attaches the session, restores it with a higher seq_no
//     after a lost connection, keeps the conservative deadline and its
//     keep-alives, and sends the session's requests: a safe request is sent
//     again after a restore (before each send a hook may rewrite it: an
//     acquire carries what is left of its queue timeout), an unsafe one
//     whose answer was lost is ErrIndeterminate, and only answers that
//     follow a commit move the deadline. It knows nothing of semaphores,
//     leases or watches; it tells them what happened through four hooks:
//     detached (a lost connection: watches fire empty), holds ended (the
//     deadline passed), ended (the session ended) and lost (a hold lost to
//     a force delete).
//   - handle.go: Session, the public handle: its attachment and the state
//     of the requests built over it (leases, watches, withdrawals).
//   - semaphores.go, acquire.go, lease.go, describe.go, watches.go: the
//     request builders. Each turns a call into a wire request, hands it to
//     the attachment, and turns the answer into its result: a create,
//     update or delete; an acquire and the Lease it grants (a lease's
//     context derives from the attachment's holds); a describe with its
//     paging (pages that disagree on the semaphore's version start it
//     again) and its watch.
//   - recipes.go, discovery.go: Mutex, Election, Discovery and Publication,
//     built from the requests above.
//   - client.go: node requests, on the broker's connection.
//
// Nothing in the attachment refers back to the builders or to Client; the
// builders refer to the attachment.
