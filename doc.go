// Package ticketing is the Go client of Ticketing, a fault-tolerant
// lock/ticket service. A ticket is an exclusive, leased hold on a key,
// identified by a fencing token that is strictly larger than every token
// granted before it.
//
// Create one Broker per process and share it: it is safe for concurrent use
// by any number of goroutines and multiplexes every request over one
// connection to the cluster leader.
//
//	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225",
//		ticketing.WithToken("123"), ticketing.WithTLS(ticketing.TLSSystemRoots()))
//	if err != nil {
//		return err // bad configuration only; connecting happens in the background
//	}
//	defer b.Close()
//	ready, cancel := context.WithTimeout(ctx, 10*time.Second)
//	defer cancel()
//	if err := b.WaitReady(ready); err != nil {
//		return err // wrong address, token or TLS setting, or no leader within 10 s
//	}
//
//	// wait up to 5 s in the key's queue, lease 30 s, need at least 2 s of work time
//	t, err := b.Acquire(ctx, "orders/42", 5*time.Second, 30*time.Second, 2*time.Second)
//	if err != nil {
//		return err // do not enter the critical section
//	}
//	defer t.Close() // best-effort background release if Release is not reached
//	work, stop := t.Context(ctx) // done at the ticket's conservative deadline or release
//	defer stop()
//	// ... the protected work under work, fenced with t.Token() ...
//	return t.Release(ctx)
//
// Acquire (like every call) waits for a connection to the leader as long as
// its ctx allows: wait bounds the time in the key's queue, not the time
// without a connection. Give ctx a deadline, and call WaitReady with a
// timeout at start-up so that a wrong address fails the start instead of
// the first request.
//
// A ticket is not "run once": it excludes concurrent holders of a key, and a
// holder that was paused past its lease can still finish its work after the
// next holder started (the fence then orders the two writes, see below). Work
// that must happen at most once per period needs its own record, such as a
// unique row per job run written in the fenced transaction. Work longer than
// the longest lease (250 s) is not supported by one ticket: split it into
// fenced steps that each fit in a lease and record progress between them.
//
// # Fencing: the token must guard the protected write
//
// A lease can end while its holder still runs (a long GC pause, a stalled
// VM, a partition), and then another process gets the key. The ticket alone
// therefore cannot protect a write; the token can. In the same database
// transaction as the protected write:
//
//  1. read the key's stored high-water token and reject the write if
//     t.Token() <= stored_high_water;
//  2. store t.Token() as the new high-water mark;
//  3. do the business write;
//  4. commit;
//
// and only then release the ticket. For example, in SQL:
//
//	UPDATE fences SET token = $token WHERE key = $key AND token < $token  -- 0 rows: stale, roll back
//	UPDATE orders SET ... WHERE id = $id
//	COMMIT
//
// A stale holder's transaction then fails instead of overwriting the work
// of the current one.
// Package github.com/ticketing-io/ticketing/fence implements this check for
// PostgreSQL, MySQL and SQLite.
//
// # Arguments
//
// wait is 0..255 s (0 is one immediate attempt that never queues), lease is
// 1..250 s, and the work budget (required, may be zero) is at most what the
// lease can leave: the conservative deadline of an immediate grant, lease ×
// 0.99 − 0.1 s (29.6 s of a 30 s lease, so a whole-second budget of at most
// 29 s). Fractions of a second are rounded up to whole seconds, the budget's
// too. Out-of-range values, a budget no grant of that lease could leave and
// keys outside 1..1024 bytes are rejected with ErrInvalidArgument before
// anything is sent (the message gives the largest budget that fits), never
// clamped. Work longer than 250 s is not supported.
//
// # Outcomes
//
// Every error works with errors.Is and says in words what happened:
//
//   - ErrNotAcquired: not granted within the wait (W).
//   - ErrCapacity: a server limit (B), final and returned at once; the client
//     does not retry it. *CapacityError has the reason.
//   - ErrIndeterminate: the request may have been sent but its final answer
//     was lost (connection dropped or silent for 3 ping intervals, the
//     session ended with M or E, the server sent an invalid frame). The
//     ticket may or may not have been granted: do not enter the critical
//     section. An acquire is never re-sent automatically.
//   - ErrBudgetExceeded: granted, but with less conservative time left than
//     the work budget; the client released it.
//   - ErrPermissionDenied: the server refused the request for this client's
//     principal (F): its role does not allow it, the key is outside its key
//     prefixes, or the ticket was granted to another principal. Final, not
//     retried, nothing happened, the connection stays usable.
//     *PermissionError has the reason.
//   - ErrUnauthenticated, ErrClosed, ErrUnavailable, ErrInvalidArgument,
//     ErrNotHeld (a release found the token no longer holding the key).
//
// Errors sent by the server in an E frame are *ServerError with the wire
// Code. The errors implement retry.RetryClasser (package
// github.com/ticketing-io/ticketing/retry): capacity rejects are OVERLOADED,
// unknown outcomes UNDETERMINED and unusable connections
// TRANSPORT_UNAVAILABLE (both retried only for idempotent work), and
// everything else is not retried.
//
// # Cancellation
//
// If ctx ends before a request was sent, nothing is sent. If an acquire may
// already have been sent, Acquire returns ctx's error at once and sends a
// cancel (C) for that acquire; if the server grants it anyway, the client
// releases that exact token in the background. Other requests on the
// connection are not affected.
//
// # Releasing
//
// Ticket.Release sends the release and reports the outcome: nil for R,
// ErrNotHeld for N, and an error (never presumed success) when no final
// answer came within ReleaseBound (5 s from the call), across reconnects,
// always with the exact token. Ticket.Close is a best-effort release in the
// background for defer: a bounded queue served by a fixed number of
// workers, retried for ReleaseBound from when it was queued; when the queue
// is full the release is dropped and ErrReleaseDropped returned. Its outcome
// goes to WithReleaseObserver and to the logger; callers who need the
// outcome call Release.
//
// Broker.ReleaseToken releases by key and exact token, with the same
// outcomes and bound, a ticket that is known only by its key and token: one
// acquired by another process, or whose token was persisted.
//
// # The conservative deadline
//
// A ticket is handed out only if its conservative remaining time is positive
// and at least the work budget. Ticket.Deadline is computed on this
// machine's monotonic clock from the moment the acquire was sent (not from
// when the grant arrived):
//
//	deadline = sent + (lease + queued) × (1 − 1%) − 100 ms
//
// where lease is the granted lease and queued the time the server reports
// the request waited in the key's queue. The server starts the lease when it
// commits the grant, which is after it received the request (itself after
// sent) and after the request left the queue, so its lease ends no earlier
// than sent + queued + lease. The 1 % (ClockDriftPercent) allows for the two
// clocks running at different rates, and the 100 ms (ClockDriftMargin) for
// millisecond truncation. A leader change only ever extends leases. The
// deadline is therefore never later than the server's.
//
// # Connections
//
// Connect returns at once and connects in the background: to the leader
// named by an M frame when a server knows it, otherwise to the listed
// addresses in turn with jittered exponential backoff. The broker answers
// the server's pings and treats 3 ping intervals of silence as a dead
// connection. It respects the server's per-connection in-flight limit:
// callers over it wait for a free slot while their ctx allows (having sent
// nothing). While the server refuses the hello (wrong token, unsupported
// version, untrusted or refused certificate, TLS on one side only,
// connection limit), WaitReady and calls return that error promptly and the
// broker keeps retrying.
//
// TLS has four modes: TLSOff (default), TLSSystemRoots, TLSCAFile and
// TLSInsecureSkipVerify (tests only). Servers that require client
// certificates (mutual TLS) get one from TLSMode.WithClientCert:
//
//	ticketing.WithTLS(ticketing.TLSCAFile("ca.crt").WithClientCert("client.crt", "client.key"))
//
// A server that refuses the client certificate, or requires one, is
// reported promptly as ErrUnauthenticated. TLS on one side only is reported
// promptly too, saying so: a TLS server that closes a plain connection (the
// client then checks, with a TLS handshake on a second connection, that the
// server answers TLS), or a plain server that answers a TLS handshake with
// a Ticketing frame.
//
// A peer that does not speak the protocol is named at once too: one that
// closes the connection without answering the hello (ticketd's Raft port
// 5226, or a proxy without a backend), and one that stays silent for a
// second and then turns out, on a second connection, to speak HTTP
// (ticketd's metrics port 5227) or PostgreSQL.
//
// # Logging
//
// The broker logs only through a logger given with WithLogger; without one
// it logs nothing (it never writes to slog.Default). A background release
// that finds the ticket already ended (ErrNotHeld, the usual end of a
// deferred Close after the lease ran out) is logged at Debug, other failed
// background releases at Warn; every outcome also goes to
// WithReleaseObserver.
//
// Admin (DialAdmin) is a separate session with one node for operators'
// tools: status, membership changes, leader transfer and snapshots for
// backups.
package ticketing
