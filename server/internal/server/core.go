package server

import (
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

// core owns every piece of leader-local state: the queues, the batch being
// gathered, the timers. It runs on one goroutine, so none of it needs a lock.
// It reaches Raft, the applied state, metrics, the server and the clock only
// through its ports (core_ports.go).
type core struct {
	corePorts
	reqs    chan request
	results chan applied
	events  chan coreEvent
	propose chan *batch
	await   chan proposal
	stop    chan struct{}
	drained chan struct{} // closed when every proposal has an outcome

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
	retryT   clockTimer // fires when the batches in retry are due
	queues   map[string]*keyQueue
	owners   map[fsm.Owner]*waiter
	waiters  int // waiters with wait > 0, server-wide
	attempts int // OpAcquire in flight
	// admins are the admin sessions that sent ticket requests in this term.
	// Losing leadership ends them with M like client connections (which
	// setServing ends): their waiters and in-flight requests are forgotten.
	admins map[*conn]struct{}

	timers timerHeap
	leases map[string]*timer // key -> the lease timer of its hold
	timer  clockTimer

	co coordCore // coordination sessions, waiters and watches (coord.go)
	qc quotaCore // per-principal counts (core_quota.go)

	// resultGate, when set (tests only), holds each batch's outcome in the
	// awaiter until a value arrives on it (or it is closed).
	resultGate atomic.Pointer[chan struct{}]

	waiterGauge atomic.Int64 // c.waiters, for metrics
	timerGauge  atomic.Int64 // len(c.timers), for tests
}

func newCore(p corePorts) *core {
	c := &core{
		corePorts: p,
		reqs:      make(chan request, 8192),
		results:   make(chan applied, maxInFlightBatches+1),
		events:    make(chan coreEvent, 64),
		propose:   make(chan *batch, maxInFlightBatches),
		await:     make(chan proposal, maxInFlightBatches),
		stop:      make(chan struct{}),
		drained:   make(chan struct{}),
		timer:     p.clk.NewTimer(time.Hour),
		retryT:    p.clk.NewTimer(time.Hour),
	}
	c.reset()
	return c
}

func (c *core) reset() {
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
		cn.fatal(c.srv.notLeaderFrame())
	}
	c.admins = make(map[*conn]struct{})
	c.timers = nil
	c.leases = make(map[string]*timer)
	c.co.reset()
	c.quotaReset()
}

func (c *core) submit(r request) { c.send(c.reqs, r) }

// connClosed tells the core that cn ended. It must be called after cn's
// last submit (the reader's exit): it is queued behind cn's requests.
func (c *core) connClosed(cn *conn)       { c.send(c.reqs, request{kind: reqClosed, c: cn}) }
func (c *core) leaderChange(l leadership) { c.event_(coreEvent{leader: &l}) }

func (c *core) send(ch chan request, r request) {
	select {
	case ch <- r:
	case <-c.stop:
	}
}

// event_ hands an event to the core unless it has stopped.
func (c *core) event_(ev coreEvent) {
	select {
	case c.events <- ev:
	case <-c.stop:
	}
}
