package core

import (
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds the core's loop and pipeline: the select loop, sealing and
// proposing batches, awaiting their outcomes in log order, and leadership
// changes (new term, leader barrier).

type coreEvent struct {
	leader      *Leadership
	barrierDone *barrierResult
	pause       <-chan struct{} // tests: the core waits until it is closed
	paused      chan<- struct{} // with pause, when set: closed once the core waits
	inspect     func(*Core)     // the console: reads the queues (inspect.go)
	quiesce     bool            // Quiesce: propose nothing more
}

// Test hooks, nil in ticketd: set only by a build with -tags stallhook
// (stallhook.go, for the nemesis harness).
var (
	// commitHook runs in the awaiter after a batch committed, before the
	// core learns its outcome.
	commitHook func(c *Core, b *batch, res []fsm.Result)
	// startHook runs when the core starts.
	startHook func(c *Core)
)

// Leadership is Raft's state as the watcher last saw it: whether this server
// leads, and in which term. A term change while leading is a lost and
// regained leadership, however few notifications Raft delivered.
type Leadership struct {
	Leader bool
	Term   uint64
}

type barrierResult struct {
	epoch uint64
	err   error
}

// clock is the leader's time for batch stamps: Unix ms that never goes
// backwards across leaders (it starts at the state's last time at least) and
// advances with the monotonic clock.
func (c *Core) clock() int64 {
	return c.clockBase + c.clk.Now().Sub(c.clockMono).Milliseconds()
}

// Run is the core's goroutine. Each turn takes one thing (a request with
// everything queued behind it, an outcome, an event, a timer) and then
// proposes what it gathered; unit tests drive the same steps without run.
func (c *Core) Run() {
	if startHook != nil {
		startHook(c)
	}
	go c.proposer()
	go c.awaiter()
	for {
		reqs := c.reqs
		if c.pending.len() >= maxBatchOps {
			reqs = nil // backpressure: let the batch in flight finish first
		}
		select {
		case <-c.stop:
			close(c.propose) // the proposer and awaiter drain what is in flight
			return
		case r := <-reqs:
			c.onRequest(r)
		case a := <-c.results:
			c.onResult(a)
		case ev := <-c.events:
			c.event(ev)
		case <-c.timer.C():
			c.fireTimers()
		case <-c.retryT.C():
			c.retryNow()
		}
		c.afterStep()
	}
}

// onRequest handles r and every request already waiting behind it, so that
// they share one batch.
func (c *Core) onRequest(r Request) {
	c.handle(r)
	for c.pending.len() < maxBatchOps {
		select {
		case r := <-c.reqs:
			c.handle(r)
		default:
			return
		}
	}
}

// onResult handles the outcome of one proposed batch.
func (c *Core) onResult(a applied) {
	c.inflight--
	if c.trace == nil {
		c.applied(a)
		return
	}
	took := c.clk.Now()
	c.applied(a)
	c.traceAnswered(a.b, took, c.clk.Now())
}

// afterStep ends every turn of the loop: propose what was gathered, publish
// the gauges.
func (c *Core) afterStep() {
	c.flush()
	if c.quiescing && c.inflight == 0 {
		select {
		case <-c.quiesced:
		default:
			close(c.quiesced)
		}
	}
	c.waiterGauge.Store(int64(c.waiters))
	c.timerGauge.Store(int64(len(c.timers)))
}

// flush proposes the gathered batch when a slot is free.
func (c *Core) flush() {
	if c.quiescing || c.inflight >= c.maxInFlight || !c.leading || !c.takeRetry() {
		return
	}
	b := c.pending
	if b.empty() {
		return
	}
	b.epoch = c.epoch
	b.time = c.clock()
	b.data = fsm.AppendBatch(nil, &fsm.Batch{Time: b.time, Ops: b.ops})
	b.sealed = c.clk.Now()
	c.pending = &batch{}
	c.inflight++
	c.propose <- b // never blocks: at most maxInFlight are out
}

// proposer hands sealed batches to the log in order. It ends when the core
// closes propose, and then closes await.
func (c *Core) proposer() {
	defer close(c.await)
	for b := range c.propose {
		wait := c.log.Propose(b.data)
		if c.trace != nil {
			b.trace.proposed = c.clk.Now()
		}
		c.await <- proposal{b: b, wait: wait}
	}
}

// awaiter waits for each proposal's outcome in log order and hands it to the
// core. It drains every proposal even while stopping, so that no future is
// left waiting when Raft shuts down (Raft does not answer entries still in
// its queue at shutdown).
func (c *Core) awaiter() {
	defer close(c.drained)
	for p := range c.await {
		res, o, err := p.wait()
		if c.trace != nil {
			p.b.trace.awaited = c.clk.Now()
		}
		c.metrics.CommitSeconds(c.clk.Now().Sub(p.b.sealed))
		if commitHook != nil && o == Applied {
			commitHook(c, p.b, res)
		}
		if g := c.resultGate.Load(); g != nil {
			select {
			case <-*g:
			case <-c.stop:
			}
		}
		select {
		case c.results <- applied{b: p.b, res: res, o: o, err: err}:
		case <-c.stop:
		}
	}
}

func (c *Core) event(ev coreEvent) {
	switch {
	case ev.pause != nil:
		if ev.paused != nil {
			close(ev.paused)
		}
		<-ev.pause
	case ev.inspect != nil:
		ev.inspect(c)
	case ev.quiesce:
		c.quiescing = true
	case ev.leader != nil:
		l := *ev.leader
		if l.Leader == c.leading && (!l.Leader || l.Term == c.term) {
			return // nothing changed
		}
		c.newTerm(l)
	case ev.barrierDone != nil:
		if ev.barrierDone.epoch != c.epoch || !c.leading {
			return
		}
		if ev.barrierDone.err != nil {
			if !c.log.Leadership().Leader {
				c.logger.Info("leader barrier failed; leadership is gone", "err", ev.barrierDone.err)
				return // the watcher reports the change
			}
			// Still leader (a leadership transfer that failed, say): try
			// again, or this leader would never serve.
			c.logger.Warn("leader barrier failed; retrying", "err", ev.barrierDone.err)
			c.barrier(retryDelay)
			return
		}
		var last int64
		c.state.Read(func(st *fsm.State) { last = st.LastTime() })
		c.clockBase, c.clockMono = max(c.clk.Now().UnixMilli(), last), c.clk.Now()
		c.pending.add(fsm.Op{Kind: fsm.OpTakeover, NodeID: c.cfg.NodeID, Addr: c.cfg.Advertise}, cause{kind: causeTakeover})
	}
}

// newTerm starts over after any change of leadership (lost, gained, or lost
// and regained in a new term): every connection of the previous term ends
// with M, since its waiters and in-flight requests cannot be answered here,
// and a new leader takes over again from the applied state.
func (c *Core) newTerm(l Leadership) {
	c.epoch++
	c.reset()
	c.leading, c.serving, c.term = l.Leader, false, l.Term
	c.srv.SetServing(false)
	if l.Leader {
		c.barrier(0)
	}
}

// barrier waits (after delay) for a Raft barrier, so that everything earlier
// leaders committed is applied, and reports it to the core.
func (c *Core) barrier(delay time.Duration) {
	epoch := c.epoch
	go func() {
		if delay > 0 {
			select {
			case <-c.clk.After(delay): // backoff before a retry
			case <-c.stop:
				return
			}
		}
		err := c.log.Barrier()
		c.event_(coreEvent{barrierDone: &barrierResult{epoch: epoch, err: err}})
	}()
}
