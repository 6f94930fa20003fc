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
//   - ErrNotAcquired: not granted within the wait ("not acquired").
//   - ErrCapacity: a server capacity limit ("capacity reject"), final and
//     returned at once; the client does not retry it. *CapacityError has the
//     reason.
//   - ErrIndeterminate: the request may have been sent but its final answer
//     was lost (connection dropped or silent for 3 ping intervals, the server
//     ended the session with "not the leader" or an error, the server sent an
//     invalid frame). The ticket may or may not have been granted: do not
//     enter the critical section. An acquire is never re-sent automatically.
//     For an acquire the error holds an *IndeterminateError with the key and
//     the owner it sent; when the connection ended before the answer (also
//     after a cancel), the broker asks the leader on its next connection to
//     end whatever that owner holds or waits for on the key (release by
//     owner), so an orphaned grant is freed within a reconnect instead of at
//     the end of its lease. An admin operation that changes the cluster
//     (AddMember, RemoveMember, TransferLeader) whose answer was lost is
//     ErrIndeterminate too: it may have been applied.
//   - ErrBudgetExceeded: granted, but with less conservative time left than
//     the work budget; the client released it.
//   - ErrPermissionDenied: the server refused the request for this client's
//     principal ("forbidden"): its role does not allow it, the key is outside
//     its key prefixes, or the ticket was granted to another principal. Final,
//     not retried, nothing happened, the connection stays usable.
//     *PermissionError has the reason.
//   - ErrWrongCluster: the servers that answered belong to another cluster
//     than the one the broker is pinned to (see Cluster below); it also
//     matches ErrUnavailable. *WrongClusterError has both cluster IDs.
//   - ErrUnauthenticated, ErrClosed, ErrUnavailable, ErrInvalidArgument,
//     ErrNotHeld (a release found the token no longer holding the key),
//     ErrNotHeldAfterRetry (also ErrNotHeld: "not held" answered a release sent
//     again after the first attempt's answer was lost, so the first
//     attempt may be what released the ticket).
//
// A server that ends the session with an error sends a stable code: the error
// holds a *ServerError with that Code. The errors implement retry.RetryClasser
// (package github.com/ticketing-io/ticketing/retry): capacity rejects are
// OVERLOADED, unknown outcomes UNDETERMINED and unusable connections
// TRANSPORT_UNAVAILABLE (both retried only for idempotent work), invalid
// arguments INVALID_ARGUMENT, and everything else NON_RETRYABLE (or CANCELED,
// TIMEOUT for an ended context); those are never retried.
//
// # Cancellation
//
// If ctx ends before a request was sent, nothing is sent. If an acquire may
// already have been sent, Acquire returns ctx's error at once and sends a
// cancel for that acquire; if the server grants it anyway, the client
// releases that exact token in the background. Other requests on the
// connection are not affected.
//
// # Releasing
//
// Ticket.Release sends the release and reports the outcome: nil for
// "released", ErrNotHeld for "not held" (ErrNotHeldAfterRetry as well when
// "not held" answered a retry after a lost answer: the earlier attempt may
// have released it), and an error (never presumed success) when no final
// answer came within ReleaseBound (5 s from the call), across reconnects,
// always with the exact token. Ticket.Close is a best-effort release in the
// background for defer: it is sent at once on its own goroutine, pipelined
// with every other request on the connection, and retried for ReleaseBound
// from the call; only when WithReleaseQueue releases (16,384 by default) are
// already outstanding is it dropped and ErrReleaseDropped returned. Its
// outcome goes to WithReleaseObserver and to the logger; callers who need the
// outcome call Release. Compensating releases (a grant that arrived after its
// acquire was cancelled, or too late for its work budget) run the same way.
//
// Broker.Close releases what it can still reach before it closes the
// connection: it cancels the acquires still waiting (their callers get
// ErrClosed and ErrIndeterminate), releases any grant that arrives while it
// waits (an acquire granted during Close returns ErrClosed, never a ticket
// that could no longer be released), and waits for background releases,
// each within its own ReleaseBound.
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
// the request waited in the key's queue. The leader starts its lease clock
// no earlier than its receipt of the request (itself after sent) plus
// queued, and enforces at least lease from then, so its lease ends no
// earlier than sent + queued + lease. The 1 % (ClockDriftPercent) allows for
// the two clocks running at different rates, and the 100 ms
// (ClockDriftMargin) for the client's own reaction: timers and checks that
// act on the deadline can run late. A leader change only ever extends
// leases. The deadline is therefore never later than the server's
// (docs/protocol.md, "The client's deadline").
//
// # Connections
//
// Connect returns at once and connects in the background. The broker has
// one session at a time, always with the leader (a follower answers the
// hello with "not the leader", naming the leader when it knows it).
//
// Order. Each round of connection attempts tries, in this order and without
// repeats: the leader named by the "not the leader" that ended the last
// session, the last server that accepted a session, then the listed addresses
// in their order. The first attempt starts at once; the next one starts as
// soon as every running attempt has failed, or after DialStagger (250 ms)
// while one is still running, in parallel: a server that accepts TCP but never
// answers costs a stagger, not the dial timeout (DefaultDialTimeout, 5 s,
// which bounds TCP, TLS and the hello of one attempt). The first session
// established wins; later ones are closed. A hello answered "not the leader"
// with the leader's address puts that address next in the round.
//
// Backoff. Leader hints (a "not the leader" naming the leader, at the hello or
// ending a session) are followed at once, at most len(addresses)+2 times in a
// row. After that, after a round in which every attempt failed, and after a
// session that ended without a hint, the broker waits a jittered exponential
// backoff: uniform in [d/2, d], d doubling from 25 ms up to 1 s; a session
// that lasted more than a second resets it. Two servers that each name the
// other therefore cost at most len(addresses)+3 sessions per backoff period,
// not a storm. "connection ended" is logged at Info at most once a second (the
// number of lines left out is added to the next one).
//
// Refusals. A server that refuses the hello (a token or client certificate
// it does not accept, an unsupported version, an untrusted server
// certificate, TLS on one side only, a peer that does not speak the
// protocol, its connection limit) only makes the broker move on
// to the next address: the refusal is remembered for that address, and
// calls keep waiting for a connection until their own context ends. Only
// when every listed address has refused, for the same reason, do WaitReady
// and calls return that refusal promptly (ErrUnauthenticated, ErrCapacity,
// ...); the broker keeps retrying in the background either way. Releases
// are the exception: they keep retrying through refusals for their
// ReleaseBound, and return the refusal only when it ends without a
// connection. A server that has served this broker a session and later
// closes a hello without answering has stopped mid-hello: that is a failed
// attempt, not a refusal.
//
// Cluster. Tokens are comparable only within one cluster, so a broker
// serves one: it pins the cluster ID of the first server whose hello answer
// reports one (Broker.ClusterID), or the one given with WithClusterID, and
// refuses every server of another cluster, such as a server whose data was
// wiped and that founded a cluster of its own: it closes that connection
// before sending anything and moves on to the next address, as for a
// refusal. When every listed address is of another cluster, WaitReady and
// calls return ErrWrongCluster promptly; when their context ends while no
// server of the pinned cluster answered and one of another cluster was
// refused, they return ErrWrongCluster with ErrUnavailable. A server with no
// cluster ID yet (a cluster still forming) is used without pinning while
// nothing is pinned, and refused afterwards. A server older than cluster IDs
// reports none and is used unchecked (a rolling upgrade keeps working). A
// cluster restored from a backup has a new ID: give clients the new one with
// WithClusterID, or restart them (docs/deployment.md, "Backup and restore").
// Coordination clients over a broker (package coordination) inherit its pin.
//
// Liveness. The broker answers the server's pings and treats 3 ping
// intervals without a byte as a dead connection. It asks for idle pings:
// a server that has them pings an idle connection (nothing in flight, never
// a coordination request) every idle interval (ticketd: 20 s), and the
// broker then gives an idle connection up after 3 idle intervals without a
// byte, a busy one 3 ping intervals after it became busy, as before
// (docs/protocol.md, "Idle connections"). A server that announces
// interval 0 sends no pings; the broker then sends its own every
// DefaultClientPing (500 ms) and applies the same rule. Every answer is
// bounded on a live connection too: an acquire waits its wait plus
// DefaultAnswerGrace (10 s, or 3 ping intervals if longer) before it is
// indeterminate, a describe or admin request DefaultAnswerGrace before it
// fails. Writes go out in pieces of at most 256 KiB, each under its own
// deadline; after a failed write the broker still reads, for up to a second,
// the answers, "not the leader" or error the server had already sent.
//
// In-flight limits. The server's answer to the hello gives the connection's
// in-flight limit, which counts two classes separately: acquires, and the
// other requests (release, release-by-owner, describe, admin). The broker
// keeps to both; a caller over a limit waits for a free slot of its class
// while its ctx allows, having sent nothing. Acquires waiting in a key's queue
// therefore never hold up a release or a describe.
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
