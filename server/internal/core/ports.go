package core

// This file holds the core's seams: the small interfaces through which the
// core reaches Raft, the applied state, metrics, the server's serving state,
// quotas and the clock (Ports), and the one through which it answers a
// client (Replier). The server package supplies the real ones; unit tests
// (fake_test.go) supply fakes: no Raft, no fsync, no sockets.

import (
	"log/slog"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Outcome is what became of one proposed batch.
type Outcome uint8

const (
	// Applied: committed and applied; the results are the state machine's,
	// one per op.
	Applied Outcome = iota
	// Refused: refused before it was written to the log, so nothing of it
	// can ever be applied (not leader, leadership transfer, shutdown).
	Refused
	// Unknown: it may or may not be applied, now or later.
	Unknown
)

// Replier is one client connection as the core sees it: where the answers
// to its requests go. The connection side implements it; the core never
// reads or changes a connection's state otherwise. Every method may be
// called from the core's goroutine only and must not block on the client.
type Replier interface {
	// Send queues a frame that is not a request's final answer (Q, a
	// coordination event). It reports false when the connection is closing.
	Send(f *wire.Frame) bool
	// Finish queues request id's final answer and frees the id. It reports
	// false when the connection is closing and the answer cannot be
	// delivered. f may be reused once Finish returns.
	Finish(id uint32, f *wire.Frame) bool
	// End queues a last frame (M or E) and closes the connection after it.
	End(f *wire.Frame)
	// Forbid answers request id F for reason and records the refusal (op
	// and key name it for the audit log).
	Forbid(id uint32, op, key string, reason uint8)
	// AllowCoord checks the principal's current rights on the coordination
	// node path; when they do not allow it, it answers request id (sub-op
	// op) UNAUTHORIZED, records the refusal and reports false.
	AllowCoord(id uint32, op uint8, path string) bool
	// Remote is the client's address (host:port), for the console.
	Remote() string
}

// ReplicatedLog is Raft as the core uses it.
type ReplicatedLog interface {
	// Propose appends one encoded batch (fsm.AppendBatch) to the log. It
	// returns at once; the entry's outcome comes from wait, which blocks:
	// when it is Applied, the state machine's results, one per op.
	Propose(data []byte) (wait func() (results []fsm.Result, o Outcome, err error))
	// Barrier blocks until every entry committed before it is applied.
	Barrier() error
	// Leadership is this server's role and current term, read now.
	Leadership() Leadership
}

// AppliedState is the state machine's applied state (node.Node supplies it).
type AppliedState interface {
	// Read runs fn with the applied state; fn must not keep it.
	Read(fn func(*fsm.State))
	// Held is the number of tickets held in the applied state.
	Held() int
}

// Serving is the server around the core.
type Serving interface {
	// SetServing is told when the takeover is applied (true) and when
	// leadership is lost (false).
	SetServing(on bool)
	// NotLeaderFrame is the M to send to a client this server cannot serve.
	NotLeaderFrame() *wire.Frame
}

// Metrics is where the core counts what it does.
type Metrics interface {
	Grant()
	Release()
	Expiry()
	NotAcquired()
	CapacityReject(reason uint8)    // a B sent, by its reason
	AcquireSeconds(d time.Duration) // arrival to grant
	QueueWait(d time.Duration)      // arrival to grant of a queued acquire
	CommitSeconds(d time.Duration)  // proposal to outcome of a batch
}

// Quotas is how the core reads per-principal quotas and reports what it
// counts per principal (nil: no quotas).
type Quotas interface {
	QuotaOf(principal string) Quota
	// Rejected counts a refusal for the named quota (QuotaHeld, ...).
	Rejected(principal, quota string)
	PublishWaiters(principal string, n int)
	PublishSessions(principal string, n int)
}

// Quota is what of a principal's quota the core decides (0: none).
type Quota struct {
	HeldTickets          int
	Waiters              int
	CoordinationSessions int
}

// Names of the quotas the core decides, in metrics and messages.
const (
	QuotaHeld     = "held_tickets"
	QuotaWaiters  = "waiters"
	QuotaSessions = "coordination_sessions"
)

// Limits are the server-wide bounds the core enforces.
type Limits struct {
	MaxHeld          int // tickets held
	MaxWaiters       int // waiters with wait > 0
	MaxWaitersPerKey int
}

// Config is the configuration the core reads.
type Config struct {
	NodeID    string // recorded in the takeover entry
	Advertise string // the client address recorded in the takeover entry
	Limits    Limits
}

// Clock is the core's time: now, and timers that fire on its channel.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) ClockTimer
	After(d time.Duration) <-chan time.Time
}

// ClockTimer is a timer of a clock. Reset discards a value not yet received,
// as time.Timer.Reset does since Go 1.23.
type ClockTimer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
}

// Ports are the seams a core is built with.
type Ports struct {
	Log     ReplicatedLog
	State   AppliedState
	Server  Serving
	Metrics Metrics
	Config  Config
	Logger  *slog.Logger
	Clock   Clock
	Quotas  Quotas // nil: none
}

// WallClock is the real clock.
type WallClock struct{}

func (WallClock) Now() time.Time                         { return time.Now() }
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (WallClock) NewTimer(d time.Duration) ClockTimer    { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (t wallTimer) C() <-chan time.Time   { return t.t.C }
func (t wallTimer) Reset(d time.Duration) { t.t.Reset(d) }
