package core

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

const (
	// maxInFlightBatches bounds the Raft entries proposed and not yet
	// applied. While they commit, new operations gather in the next batch:
	// this is the group commit that lets many clients share one fsync.
	maxInFlightBatches = 4
	// maxBatchOps bounds one entry. Requests wait in the channel (and then in
	// the clients' sockets) while a full batch waits for its turn.
	maxBatchOps = 4096
	// retryDelay spaces the retries of a batch that Raft refused without
	// writing it (a leadership transfer in progress) while this server
	// stays leader, and of a failed leader barrier.
	retryDelay = 50 * time.Millisecond
)

// reqClosed is the request kind that tells the core a connection ended. It
// travels on the request channel, behind every request the connection sent,
// so the core never sees a connection's close before its last request.
const reqClosed wire.Type = 0

// Core owns every piece of leader-local state: the queues, the batch being
// gathered, the timers, which connection carries which coordination session.
// It runs on one goroutine (Run), so none of it needs a lock. It reaches
// Raft, the applied state, metrics, the server and the clock only through
// its Ports, and answers clients only through their Replier (ports.go).
type Core struct {
	log     ReplicatedLog
	state   AppliedState
	srv     Serving
	metrics Metrics
	cfg     Config
	logger  *slog.Logger
	clk     Clock
	quota   Quotas

	reqs    chan Request
	results chan applied
	events  chan coreEvent
	propose chan *batch
	await   chan proposal
	stop    chan struct{}
	drained chan struct{} // closed when every proposal has an outcome

	// quiescing: a planned stop is under way; nothing more is proposed, and
	// quiesced is closed once every batch proposed before has been
	// answered (Quiesce).
	quiescing bool
	quiesced  chan struct{}

	epoch     uint64
	term      uint64 // the Raft term this core leads in
	leading   bool   // leader, takeover may still be committing
	serving   bool   // takeover committed: requests are served
	clockBase int64
	clockMono time.Time

	pending  *batch
	inflight int
	// retry holds the batches Raft refused without writing them, in log
	// order; they are proposed again, ahead of everything gathered since,
	// once retryT has fired and every batch proposed before is settled.
	// Until then nothing else is proposed: the log keeps the order in which
	// this leader accepted requests.
	retry    []*batch
	retryDue bool       // retryT fired since the last refusal
	retryT   ClockTimer // fires when the batches in retry are due
	queues   map[string]*keyQueue
	owners   map[fsm.Owner]*waiter
	waiters  int // waiters with wait > 0, server-wide
	attempts int // OpAcquire in flight
	// admins are the admin sessions that sent ticket requests in this term.
	// Losing leadership ends them with M like client connections (which
	// SetServing ends): their waiters and in-flight requests are forgotten.
	admins map[Replier]struct{}
	// connWaiters are the waiters each connection has a reply in, so that
	// its close (ConnClosed) drops its replies.
	connWaiters map[Replier]map[*waiter]struct{}

	timers timerHeap
	leases map[string]*timer // key -> the lease timer of its hold
	timer  ClockTimer

	co       coordCore // coordination sessions, waiters and watches (coord.go)
	sessions bindings  // which connection carries which session (sessions.go)
	qc       quotaCore // per-principal counts (quota.go)

	// resultGate, when set (tests only), holds each batch's outcome in the
	// awaiter until a value arrives on it (or it is closed).
	resultGate atomic.Pointer[chan struct{}]

	maxInFlight int                                 // batches proposed and not yet applied, at most
	trace       func(stage string, d time.Duration) // stagetrace.go; nil when off

	waiterGauge atomic.Int64 // c.waiters, for metrics
	timerGauge  atomic.Int64 // len(c.timers), for tests
}

// New makes a core on its ports; Run starts it.
func New(p Ports) *Core {
	c := &Core{
		log:         p.Log,
		state:       p.State,
		srv:         p.Server,
		metrics:     p.Metrics,
		cfg:         p.Config,
		logger:      p.Logger,
		clk:         p.Clock,
		quota:       p.Quotas,
		reqs:        make(chan Request, 8192),
		results:     make(chan applied, inFlightBatches+1),
		events:      make(chan coreEvent, 64),
		propose:     make(chan *batch, inFlightBatches),
		await:       make(chan proposal, inFlightBatches),
		maxInFlight: inFlightBatches,
		trace:       stageTrace,
		stop:        make(chan struct{}),
		drained:     make(chan struct{}),
		quiesced:    make(chan struct{}),
		timer:       p.Clock.NewTimer(time.Hour),
		retryT:      p.Clock.NewTimer(time.Hour),
	}
	c.reset()
	return c
}

func (c *Core) reset() {
	// Waiters of the previous term are gone with their connections; mark
	// them so that a late connection close does not touch the new state.
	for _, w := range c.owners {
		w.done = true
	}
	for _, t := range c.timers {
		t.idx = -1
		if t.w != nil {
			t.w.timer = nil
		}
	}
	c.pending = &batch{}
	c.retry, c.retryDue = nil, false
	c.queues = make(map[string]*keyQueue)
	c.owners = make(map[fsm.Owner]*waiter)
	c.waiters, c.attempts = 0, 0
	for cn := range c.admins {
		cn.End(c.srv.NotLeaderFrame())
	}
	c.admins = make(map[Replier]struct{})
	c.connWaiters = make(map[Replier]map[*waiter]struct{})
	c.timers = nil
	c.leases = make(map[string]*timer)
	c.co.reset()
	c.sessions.reset()
	c.quotaReset()
}

// Submit hands the core one request. It blocks while the core's queue is
// full (backpressure to the connection's reader).
func (c *Core) Submit(r Request) { c.send(c.reqs, r) }

// ConnClosed tells the core that cn ended. It must be called after cn's
// last Submit (the reader's exit): it is queued behind cn's requests.
func (c *Core) ConnClosed(cn Replier) { c.send(c.reqs, Request{Kind: reqClosed, Conn: cn}) }

// LeaderChange tells the core Raft's role and term as the watcher sees it.
func (c *Core) LeaderChange(l Leadership) { c.event_(coreEvent{leader: &l}) }

// Stop ends the core's loop; the proposals in flight still get their
// outcome (Drained).
func (c *Core) Stop() { close(c.stop) }

// Drained is closed when every proposal has an outcome, after Stop.
func (c *Core) Drained() <-chan struct{} { return c.drained }

// Quiesce prepares a planned stop: the core proposes nothing more (requests
// still arrive and wait, unproposed), and the returned channel is closed
// once every batch proposed before has its outcome and its answers have
// been handed to the connections. A request without an answer then was
// never proposed: it was not executed.
func (c *Core) Quiesce() <-chan struct{} {
	c.event_(coreEvent{quiesce: true})
	return c.quiesced
}

// Waiters is the number of acquires waiting with wait > 0, as of the core's
// last step.
func (c *Core) Waiters() int64 { return c.waiterGauge.Load() }

// Timers is the number of live wait and lease timers, as of the core's last
// step.
func (c *Core) Timers() int64 { return c.timerGauge.Load() }

// Queued is the number of requests waiting for the core.
func (c *Core) Queued() int { return len(c.reqs) }

// Pause stops the core's goroutine until resume is called: requests and
// connection closes queue up meanwhile, as they do when the core is busy.
func (c *Core) Pause() (resume func()) {
	ch := make(chan struct{})
	c.event_(coreEvent{pause: ch})
	return func() { close(ch) }
}

// GateResults makes the core wait for a value on the returned channel
// before it learns the outcome of each committed batch; close the channel
// to let every outcome through. For tests.
func (c *Core) GateResults() chan struct{} {
	ch := make(chan struct{})
	c.resultGate.Store(&ch)
	return ch
}

func (c *Core) send(ch chan Request, r Request) {
	select {
	case ch <- r:
	case <-c.stop:
	}
}

// event_ hands an event to the core unless it has stopped.
func (c *Core) event_(ev coreEvent) {
	select {
	case c.events <- ev:
	case <-c.stop:
	}
}
