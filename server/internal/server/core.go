package server

import (
	"container/heap"
	"container/list"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
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

// request is one client request handed from a connection to the core.
type request struct {
	kind  wire.Type
	c     *conn
	id    uint32
	owner wire.Owner
	wait  uint8
	lease uint8
	token uint64
	key   string
	at    time.Time
	// principal: for an acquire the name its hold records, for a release
	// the principal it is restricted to ("" = unrestricted). See fsm.Op.
	principal string

	op   uint8  // K: the coordination sub-op (coord.go)
	body []byte // K: its body, copied
}

// reply is one request waiting for an acquire's final answer.
type reply struct {
	c          *conn
	id         uint32
	at         time.Time // this request's receipt: its G is measured from here
	cancelled  bool
	queuedSent bool
	once       bool // wait = 0: one attempt, never queued
}

// waiter is one acquire attempt (one owner) not yet answered: attempting a
// grant, or queued for its key.
type waiter struct {
	key      string
	owner    fsm.Owner
	holder   string // principal recorded in the hold
	leaseMs  uint32
	wait     uint8
	arrived  time.Time
	deadline time.Time // zero for wait = 0
	replies  []reply
	elem     *list.Element // position in its key's queue, nil when not queued
	timer    *timer        // its wait deadline, nil for wait = 0
	attempt  bool          // an OpAcquire for it is in a proposed batch
	// withdrawn: a release by its owner (U) came while its attempt was
	// being committed. The OpReleaseOwner follows the attempt in the log and
	// ends the grant if it is made, so its requests are answered X, never G.
	withdrawn bool
	done      bool
}

func (w *waiter) live() int {
	n := 0
	for _, r := range w.replies {
		if !r.cancelled {
			n++
		}
	}
	return n
}

// keyQueue is the FIFO of one key. At most one acquire per key is being
// committed at a time (attempting); later arrivals queue behind it, so grants
// follow arrival order even while entries are in flight.
type keyQueue struct {
	waiting    list.List // of *waiter
	attempting *waiter
	n          int // waiters with wait > 0 counted against the limits
}

type causeKind uint8

const (
	causeAttempt causeKind = iota + 1
	causeRelease
	causeExpire
	causeOrphan
	causeTakeover
	causeCoord // coord.go
)

type cause struct {
	kind causeKind
	w    *waiter
	c    *conn
	id   uint32
}

type readReq struct {
	c   *conn
	id  uint32
	key string

	fn func(st *fsm.State) // a coordination read (coord.go) instead of a key's
}

type batch struct {
	epoch  uint64
	ops    []fsm.Op
	causes []cause
	reads  []readReq
	data   []byte
	time   int64
	sealed time.Time
}

type applied struct {
	b   *batch
	res *node.Applied
	err error
}

type proposal struct {
	b *batch
	f raft.ApplyFuture
}

type coreEvent struct {
	leader      *leadership
	barrierDone *barrierResult
	pause       <-chan struct{} // tests: the core waits until it is closed
}

// leadership is Raft's state as the watcher last saw it: whether this server
// leads, and in which term. A term change while leading is a lost and
// regained leadership, however few notifications Raft delivered.
type leadership struct {
	leader bool
	term   uint64
}

type barrierResult struct {
	epoch uint64
	err   error
}

// core owns every piece of leader-local state: the queues, the batch being
// gathered, the timers. It runs on one goroutine, so none of it needs a lock.
type core struct {
	s       *Server
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
	retry    []*batch    // refused by Raft without being written; proposed again
	retryT   *time.Timer // fires when the batches in retry are due
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
	timer  *time.Timer

	co coordCore // coordination sessions, waiters and watches (coord.go)

	// resultGate, when set (tests only), holds each batch's outcome in the
	// awaiter until a value arrives on it (or it is closed).
	resultGate atomic.Pointer[chan struct{}]

	waiterGauge atomic.Int64 // c.waiters, for metrics
	timerGauge  atomic.Int64 // len(c.timers), for tests
}

func newCore(s *Server) *core {
	c := &core{
		s:       s,
		reqs:    make(chan request, 8192),
		results: make(chan applied, maxInFlightBatches+1),
		events:  make(chan coreEvent, 64),
		propose: make(chan *batch, maxInFlightBatches),
		await:   make(chan proposal, maxInFlightBatches),
		stop:    make(chan struct{}),
		drained: make(chan struct{}),
		timer:   time.NewTimer(time.Hour),
		retryT:  time.NewTimer(time.Hour),
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
	c.retry = nil
	c.queues = make(map[string]*keyQueue)
	c.owners = make(map[fsm.Owner]*waiter)
	c.waiters, c.attempts = 0, 0
	for cn := range c.admins {
		cn.fatal(c.s.notLeaderFrame())
	}
	c.admins = make(map[*conn]struct{})
	c.timers = nil
	c.leases = make(map[string]*timer)
	c.co.reset()
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

// clock is the leader's time for batch stamps: Unix ms that never goes
// backwards across leaders (it starts at the state's last time at least) and
// advances with the monotonic clock.
func (c *core) clock() int64 {
	return c.clockBase + time.Since(c.clockMono).Milliseconds()
}

func (c *core) run() {
	go c.proposer()
	go c.awaiter()
	for {
		reqs := c.reqs
		if len(c.pending.ops) >= maxBatchOps {
			reqs = nil // backpressure: let the batch in flight finish first
		}
		select {
		case <-c.stop:
			close(c.propose) // the proposer and awaiter drain what is in flight
			return
		case r := <-reqs:
			c.handle(r)
			// Gather everything already waiting into this batch.
		gather:
			for len(c.pending.ops) < maxBatchOps {
				select {
				case r := <-c.reqs:
					c.handle(r)
				default:
					break gather
				}
			}
		case a := <-c.results:
			c.inflight--
			c.applied(a)
		case ev := <-c.events:
			c.event(ev)
		case <-c.timer.C:
			c.fireTimers()
		case <-c.retryT.C:
			c.retryNow()
		}
		c.flush()
		c.waiterGauge.Store(int64(c.waiters))
		c.timerGauge.Store(int64(len(c.timers)))
	}
}

// flush proposes the gathered batch when a slot is free.
func (c *core) flush() {
	b := c.pending
	if c.inflight >= maxInFlightBatches || (len(b.ops) == 0 && len(b.reads) == 0) || !c.leading {
		return
	}
	b.epoch = c.epoch
	b.time = c.clock()
	b.data = fsm.AppendBatch(nil, &fsm.Batch{Time: b.time, Ops: b.ops})
	b.sealed = time.Now()
	c.pending = &batch{}
	c.inflight++
	c.propose <- b // never blocks: at most maxInFlightBatches are out
}

// proposer hands sealed batches to Raft in order. It ends when the core
// closes propose, and then closes await.
func (c *core) proposer() {
	defer close(c.await)
	for b := range c.propose {
		c.await <- proposal{b: b, f: c.s.node.Raft().Apply(b.data, 0)}
	}
}

// awaiter waits for each proposal's outcome in log order and hands it to the
// core. It drains every proposal even while stopping, so that no future is
// left waiting when Raft shuts down (Raft does not answer entries still in
// its queue at shutdown).
func (c *core) awaiter() {
	defer close(c.drained)
	for p := range c.await {
		err := p.f.Error()
		var res *node.Applied
		if err == nil {
			res, _ = p.f.Response().(*node.Applied)
			if res == nil {
				err = fmt.Errorf("no result from the state machine")
			}
		}
		c.s.metrics.commitSeconds.Observe(time.Since(p.b.sealed).Seconds())
		if g := c.resultGate.Load(); g != nil {
			select {
			case <-*g:
			case <-c.stop:
			}
		}
		select {
		case c.results <- applied{b: p.b, res: res, err: err}:
		case <-c.stop:
		}
	}
}

func (c *core) event(ev coreEvent) {
	switch {
	case ev.pause != nil:
		<-ev.pause
	case ev.leader != nil:
		l := *ev.leader
		if l.leader == c.leading && (!l.leader || l.term == c.term) {
			return // nothing changed
		}
		c.newTerm(l)
	case ev.barrierDone != nil:
		if ev.barrierDone.epoch != c.epoch || !c.leading {
			return
		}
		if ev.barrierDone.err != nil {
			if c.s.node.Raft().State() != raft.Leader {
				c.s.log.Info("leader barrier failed; leadership is gone", "err", ev.barrierDone.err)
				return // the watcher reports the change
			}
			// Still leader (a leadership transfer that failed, say): try
			// again, or this leader would never serve.
			c.s.log.Warn("leader barrier failed; retrying", "err", ev.barrierDone.err)
			c.barrier(retryDelay)
			return
		}
		var last int64
		c.s.node.Read(func(st *fsm.State) { last = st.LastTime() })
		c.clockBase, c.clockMono = max(time.Now().UnixMilli(), last), time.Now()
		c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpTakeover, NodeID: c.s.cfg.NodeID, Addr: c.s.cfg.AdvertiseClientAddr})
		c.pending.causes = append(c.pending.causes, cause{kind: causeTakeover})
	}
}

// newTerm starts over after any change of leadership (lost, gained, or lost
// and regained in a new term): every connection of the previous term ends
// with M, since its waiters and in-flight requests cannot be answered here,
// and a new leader takes over again from the applied state.
func (c *core) newTerm(l leadership) {
	c.epoch++
	c.reset()
	c.leading, c.serving, c.term = l.leader, false, l.term
	c.s.setServing(false)
	if l.leader {
		c.barrier(0)
	}
}

// barrier waits (after delay) for a Raft barrier, so that everything earlier
// leaders committed is applied, and reports it to the core.
func (c *core) barrier(delay time.Duration) {
	epoch := c.epoch
	go func() {
		if delay > 0 {
			select {
			case <-time.After(delay): // backoff before a retry
			case <-c.stop:
				return
			}
		}
		err := c.s.node.Raft().Barrier(0).Error()
		c.event_(coreEvent{barrierDone: &barrierResult{epoch: epoch, err: err}})
	}()
}

func (c *core) handle(r request) {
	if r.kind == reqClosed {
		c.dropConn(r.c)
		return
	}
	if !c.serving {
		r.c.fatal(c.s.notLeaderFrame())
		return
	}
	if r.c.admin {
		c.admins[r.c] = struct{}{}
	}
	switch r.kind {
	case wire.TypeAcquire:
		c.acquire(r)
	case wire.TypeRelease:
		c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpRelease, Key: r.key, Token: r.token, Principal: r.principal})
		c.pending.causes = append(c.pending.causes, cause{kind: causeRelease, c: r.c, id: r.id})
		c.handoff(r.key)
	case wire.TypeReleaseOwner:
		c.releaseOwner(r)
	case wire.TypeCancel:
		c.cancel(r)
	case wire.TypeDescribe:
		c.pending.reads = append(c.pending.reads, readReq{c: r.c, id: r.id, key: r.key})
	case wire.TypeCoord:
		c.coordRequest(r)
	}
}

func (c *core) acquire(r request) {
	if w, ok := c.owners[fsm.Owner(r.owner)]; ok && w.key != r.key {
		// An owner names one attempt on one key. Joining the waiter of
		// another key would answer this key's request with that key's
		// grant; not acquiring is the safe answer.
		c.s.metrics.notAcquired.Inc()
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
		return
	} else if ok && w.holder != r.principal {
		// Another principal's owner (read from a describe): not its waiter.
		c.s.metrics.notAcquired.Inc()
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
		return
	} else if ok && w.elem != nil && r.wait == 0 {
		// wait = 0 is one immediate attempt, never queued: the owner's
		// waiter is queued, so that attempt would find the key taken.
		c.s.metrics.notAcquired.Inc()
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
		return
	} else if ok {
		// The same owner again: one queue entry, both requests get its answer.
		w.replies = append(w.replies, reply{c: r.c, id: r.id, at: r.at, once: r.wait == 0})
		c.track(r.c, w)
		if w.elem != nil {
			c.sendQueued(w, len(w.replies)-1)
		}
		return
	}
	q := c.queues[r.key]
	busy := q != nil && (q.attempting != nil || q.waiting.Len() > 0)
	h, held := c.holdOf(r.key)
	if held && h.Owner == fsm.Owner(r.owner) && h.Principal == r.principal {
		// This owner already holds the key: the same grant, no queue entry,
		// and only the lease the leader will still enforce.
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeGranted, ID: r.id, Token: h.Token, LeaseMs: c.leaseLeft(r.key, h, r.at)})
		return
	}
	if busy || held {
		// The key is taken (in the applied state, or by an attempt being
		// committed). Not acquiring is always a safe answer, so wait 0 is
		// answered from here; a waiter queues without a commit and is tried
		// when the release or expiry that frees the key is applied.
		if r.wait == 0 {
			c.s.metrics.notAcquired.Inc()
			r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
			return
		}
		if q == nil {
			q = &keyQueue{}
		}
		if reason, ok := c.waiterRoom(q); !ok {
			c.reject(r, reason)
			return
		}
		c.queues[r.key] = q
		w := c.newWaiter(r)
		c.waiters++
		q.n++
		w.elem = q.waiting.PushBack(w)
		c.sendQueued(w, 0)
		return
	}
	if c.s.node.Held()+c.attempts >= c.s.cfg.Limits.MaxHeld {
		c.reject(r, wire.CapacityHeld)
		return
	}
	if q == nil {
		q = &keyQueue{}
	}
	if r.wait > 0 {
		if reason, ok := c.waiterRoom(q); !ok {
			c.reject(r, reason)
			return
		}
	}
	c.queues[r.key] = q
	w := c.newWaiter(r)
	if r.wait > 0 {
		c.waiters++
		q.n++
	}
	c.startAttempt(q, w)
}

func (c *core) holdOf(key string) (h fsm.Hold, ok bool) {
	c.s.node.Read(func(st *fsm.State) { h, ok = st.Get(key) })
	return h, ok
}

func (c *core) waiterRoom(q *keyQueue) (uint8, bool) {
	l := c.s.cfg.Limits
	if q.n >= l.MaxWaitersPerKey {
		return wire.CapacityKeyWaiters, false
	}
	if c.waiters >= l.MaxWaiters {
		return wire.CapacityWaiters, false
	}
	return 0, true
}

func (c *core) reject(r request, reason uint8) {
	c.s.metrics.capacityRejects.WithLabelValues(capacityLabel(reason)).Inc()
	r.c.finish(r.id, &wire.Frame{Type: wire.TypeCapacity, ID: r.id, Reason: reason})
}

func (c *core) newWaiter(r request) *waiter {
	w := &waiter{key: r.key, owner: fsm.Owner(r.owner), holder: r.principal, leaseMs: uint32(r.lease) * 1000, wait: r.wait,
		arrived: r.at, replies: []reply{{c: r.c, id: r.id, at: r.at}}}
	if r.wait > 0 {
		w.deadline = r.at.Add(time.Duration(r.wait) * time.Second)
		w.timer = &timer{at: w.deadline, w: w}
		c.addTimer(w.timer)
	}
	c.owners[w.owner] = w
	c.track(r.c, w)
	return w
}

func (c *core) track(cn *conn, w *waiter) {
	if cn.waiters == nil {
		cn.waiters = make(map[*waiter]struct{})
	}
	cn.waiters[w] = struct{}{}
}

func (c *core) sendQueued(w *waiter, i int) {
	r := &w.replies[i]
	if r.queuedSent {
		return
	}
	r.queuedSent = true
	pos := 0
	if q := c.queues[w.key]; q != nil {
		pos = q.waiting.Len()
		if q.attempting != nil {
			pos++
		}
	}
	r.c.send(&wire.Frame{Type: wire.TypeQueued, ID: r.id, Count: uint32(pos)})
}

func (c *core) startAttempt(q *keyQueue, w *waiter) {
	q.attempting = w
	w.attempt = true
	c.attempts++
	c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpAcquire, Key: w.key, Owner: w.owner, LeaseMs: w.leaseMs, Principal: w.holder})
	c.pending.causes = append(c.pending.causes, cause{kind: causeAttempt, w: w})
}

// handoff puts an attempt for the head waiter of key into the pending batch,
// right after the op that may free the key: if it does, the waiter is granted
// by the same entry (one commit per handoff); if not, the attempt finds the
// key busy and the waiter goes back to the head of the queue.
func (c *core) handoff(key string) {
	q := c.queues[key]
	if q == nil || q.attempting != nil {
		return
	}
	for q.waiting.Len() > 0 {
		w := q.waiting.Remove(q.waiting.Front()).(*waiter)
		w.elem = nil
		if w.done {
			continue
		}
		c.startAttempt(q, w)
		return
	}
	c.maybeDropQueue(key, q)
}

func (c *core) maybeDropQueue(key string, q *keyQueue) {
	if q.attempting == nil && q.waiting.Len() == 0 {
		delete(c.queues, key)
	}
}

func (c *core) cancel(r request) {
	w, ok := c.owners[fsm.Owner(r.owner)]
	if !ok {
		return // already answered: a grant stands, its G is on the wire
	}
	for i := range w.replies {
		rp := &w.replies[i]
		if rp.c != r.c || rp.id != r.id || rp.cancelled {
			continue
		}
		if w.attempt {
			rp.cancelled = true // answered when the attempt commits: G stands, else X
			return
		}
		rp.c.finish(rp.id, &wire.Frame{Type: wire.TypeCancelled, ID: rp.id})
		w.replies = append(w.replies[:i], w.replies[i+1:]...)
		if len(w.replies) == 0 {
			c.retire(w)
		}
		return
	}
}

// releaseOwner ends whatever r.owner has of r.key: a waiter of that owner
// still queued here is withdrawn (its acquires are answered X), and the hold,
// if that owner has it, is released through Raft like a release by token. A
// client uses it after an indeterminate acquire: it knows the owner it sent,
// not the token.
func (c *core) releaseOwner(r request) {
	owner := fsm.Owner(r.owner)
	// Only the waiter's own principal (or an admin) may withdraw it.
	if w, ok := c.owners[owner]; ok && w.key == r.key && !w.done && (r.principal == "" || w.holder == "" || w.holder == r.principal) {
		if w.attempt {
			w.withdrawn = true // answered when the attempt is applied
		} else {
			c.answer(w, wire.Frame{Type: wire.TypeCancelled})
			c.retire(w)
		}
	}
	c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpReleaseOwner, Key: r.key, Owner: owner, Principal: r.principal})
	c.pending.causes = append(c.pending.causes, cause{kind: causeRelease, c: r.c, id: r.id})
	c.handoff(r.key)
}

// retire removes a waiter that will get no grant: from its queue, the owner
// index and the counts.
func (c *core) retire(w *waiter) {
	if w.done {
		return
	}
	w.done = true
	c.removeTimer(w.timer)
	w.timer = nil
	delete(c.owners, w.owner)
	q := c.queues[w.key]
	if w.wait > 0 {
		c.waiters--
		if q != nil {
			q.n--
		}
	}
	if q != nil {
		if w.elem != nil {
			q.waiting.Remove(w.elem)
			w.elem = nil
		}
		c.maybeDropQueue(w.key, q)
	}
	for _, r := range w.replies {
		if r.c.waiters != nil {
			delete(r.c.waiters, w)
		}
	}
}

func (c *core) dropConn(cn *conn) {
	delete(c.admins, cn)
	for w := range cn.waiters {
		kept := w.replies[:0]
		for _, r := range w.replies {
			if r.c != cn {
				kept = append(kept, r)
			}
		}
		w.replies = kept
		if len(w.replies) == 0 && !w.attempt {
			c.retire(w)
		}
	}
	cn.waiters = nil
	c.coordConnClosed(cn)
}

// answer sends one frame to every reply of w and forgets them.
func (c *core) answer(w *waiter, f wire.Frame) {
	for _, r := range w.replies {
		f.ID = r.id
		r.c.finish(r.id, &f)
		if r.c.waiters != nil {
			delete(r.c.waiters, w)
		}
	}
	w.replies = nil
}

// leaseLeft is what remains, at, of the lease of key's hold h as this leader
// will enforce it (its expiry timer), in whole ms and never more than the
// hold's lease: a G for an existing hold must not promise more. It is 0 when
// the hold's end is already being committed (expiry, or orphan release).
func (c *core) leaseLeft(key string, h fsm.Hold, at time.Time) uint32 {
	t := c.leases[key]
	if t == nil || t.token != h.Token {
		return 0
	}
	left := t.at.Sub(at)
	if left <= 0 {
		return 0
	}
	return min(uint32(left/time.Millisecond), h.LeaseMs)
}

// answerGranted answers every request of w with G for hold h. Each G is
// measured from its own request's receipt (protocol.md, "What G reports"):
// for a new grant queued_ms runs to now, when the leader's expiry timer
// started, and lease_ms is the full lease from then; for an existing hold
// queued_ms is 0 and lease_ms is what remains of it at the receipt.
// It reports whether any G could be delivered (a connection that is closing
// takes no more answers).
func (c *core) answerGranted(w *waiter, h fsm.Hold, existing bool, now time.Time) bool {
	delivered := false
	for _, r := range w.replies {
		f := wire.Frame{Type: wire.TypeGranted, ID: r.id, Token: h.Token, LeaseMs: h.LeaseMs}
		switch {
		case existing:
			f.LeaseMs = c.leaseLeft(w.key, h, r.at)
		case w.wait > 0:
			f.QueuedMs = uint32(max(now.Sub(r.at), 0) / time.Millisecond)
		}
		if r.c.finish(r.id, &f) {
			delivered = true
		}
		if r.c.waiters != nil {
			delete(r.c.waiters, w)
		}
	}
	w.replies = nil
	return delivered
}

func (c *core) queuedMs(w *waiter) uint32 {
	return uint32(time.Since(w.arrived) / time.Millisecond)
}

// neverWritten reports whether Raft refused an entry before writing it to
// its log, so that nothing of it can ever be applied.
func neverWritten(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrEnqueueTimeout)
}

// failed handles a batch that did not commit. The core's state must end up
// as if the batch had never been proposed, or this leader must start over.
func (c *core) failed(b *batch, err error) {
	if neverWritten(err) {
		if c.s.node.Raft().State() == raft.Leader {
			// Still leader (a leadership transfer in progress, which may
			// fail): the batch is proposed again, with its attempts, expiries
			// and answers still pending, so no key is wedged and no timer lost.
			c.s.log.Info("Raft refused a batch without writing it; proposing it again", "err", err, "ops", len(b.ops))
			c.retry = append(c.retry, b)
			c.retryT.Reset(retryDelay)
			return
		}
		// Not the leader any more, and nothing of the batch happened: its
		// clients are told so (M), and they retry safely at the new leader.
		c.s.log.Info("Raft refused a batch: not the leader; its clients are sent to the new leader", "err", err, "ops", len(b.ops))
		c.tellBatch(b, c.s.notLeaderFrame())
		return
	}
	c.s.log.Error("a batch failed to commit; its clients are told the outcome is unknown", "err", err, "ops", len(b.ops))
	msg := "the server could not commit the request (" + err.Error() + "); its outcome is unknown"
	c.tellBatch(b, &wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeInternal), Text: []byte(msg)})
	// The entry may still be applied: only a fresh takeover (barrier, then
	// timers rebuilt from the applied state) knows the state again.
	r := c.s.node.Raft()
	c.newTerm(leadership{leader: r.State() == raft.Leader, term: r.CurrentTerm()})
}

// tellBatch ends the connection of every request in b with the frame f.
func (c *core) tellBatch(b *batch, f *wire.Frame) {
	for _, cs := range b.causes {
		switch {
		case cs.c != nil:
			cs.c.fatal(f)
		case cs.w != nil:
			for _, r := range cs.w.replies {
				r.c.fatal(f)
			}
		}
	}
	for _, rd := range b.reads {
		rd.c.fatal(f)
	}
}

// retryNow puts the refused batches back in front of the pending one, in
// their order, to be proposed again.
func (c *core) retryNow() {
	if len(c.retry) == 0 {
		return
	}
	nb := &batch{}
	for _, b := range append(c.retry, c.pending) {
		nb.ops = append(nb.ops, b.ops...)
		nb.causes = append(nb.causes, b.causes...)
		nb.reads = append(nb.reads, b.reads...)
	}
	c.retry, c.pending = nil, nb
}

func (c *core) applied(a applied) {
	b := a.b
	if b.epoch != c.epoch || !c.leading {
		return // leadership changed: those connections were closed with M
	}
	if a.err != nil {
		c.failed(b, a.err)
		return
	}
	now := time.Now()
	for i, res := range a.res.Results {
		op, cs := &b.ops[i], b.causes[i]
		switch cs.kind {
		case causeTakeover:
			c.takeoverDone(now)
		case causeAttempt:
			c.attemptDone(cs.w, res, now)
		case causeRelease:
			if res.Status == fsm.Released {
				c.s.metrics.releases.Inc()
				cs.c.finish(cs.id, &wire.Frame{Type: wire.TypeReleased, ID: cs.id})
			} else if res.Status == fsm.Forbidden {
				name := "release"
				if op.Kind == fsm.OpReleaseOwner {
					name = "release_owner"
				}
				cs.c.refuse(cs.id, name, op.Key, wire.ForbiddenOwner)
			} else {
				cs.c.finish(cs.id, &wire.Frame{Type: wire.TypeNotHeld, ID: cs.id})
			}
			c.freed(op.Key, res)
		case causeExpire:
			if res.Status == fsm.Released {
				c.s.metrics.expiries.Inc()
			} else {
				c.recheckExpiry(op.Key, op.Token, now)
			}
			c.freed(op.Key, res)
		case causeOrphan:
			c.freed(op.Key, res)
		case causeCoord:
			c.coordApplied(op, res, cs, now)
		}
	}
	if len(b.reads) > 0 {
		c.answerReads(b.reads)
	}
}

func (c *core) freed(key string, res fsm.Result) {
	if res.Status == fsm.Released {
		c.leaseEnded(key, res.Hold.Token)
		c.handoff(key)
	}
}

func (c *core) attemptDone(w *waiter, res fsm.Result, now time.Time) {
	q := c.queues[w.key]
	w.attempt = false
	c.attempts--
	if q != nil && q.attempting == w {
		q.attempting = nil
	}
	if w.withdrawn {
		// Its owner released it (U) while the attempt was committing: its
		// requests are answered X. The OpReleaseOwner normally follows the
		// attempt in the log and ends a grant made here; a release of this
		// exact token ends it too when a retried attempt was applied after
		// that U (then it finds nothing, or the hold already ended).
		c.answer(w, wire.Frame{Type: wire.TypeCancelled})
		c.retire(w)
		if res.Status == fsm.Granted {
			c.s.metrics.grants.Inc()
			c.releaseOrphan(w.key, res.Hold.Token)
		}
		if q != nil {
			c.maybeDropQueue(w.key, q)
		}
		return
	}
	switch res.Status {
	case fsm.Granted, fsm.Existing:
		if res.Status == fsm.Granted {
			c.s.metrics.grants.Inc()
			c.setLease(w.key, res.Hold.Token, now.Add(time.Duration(res.Hold.LeaseMs)*time.Millisecond))
		}
		if w.wait > 0 {
			c.s.metrics.queueWait.Observe(now.Sub(w.arrived).Seconds())
		}
		c.s.metrics.acquireSeconds.Observe(time.Since(w.arrived).Seconds())
		delivered := c.answerGranted(w, res.Hold, res.Status == fsm.Existing, now)
		c.retire(w)
		if !delivered && res.Status == fsm.Granted {
			// Nobody can ever learn this token (its connections are gone or
			// closing), so end the hold now instead of at lease expiry.
			c.releaseOrphan(w.key, res.Hold.Token)
		}
	case fsm.Busy:
		// Answer the cancelled requests; the others wait, at the head.
		kept := w.replies[:0]
		for _, r := range w.replies {
			if r.cancelled {
				r.c.finish(r.id, &wire.Frame{Type: wire.TypeCancelled, ID: r.id})
			} else if r.once && w.wait > 0 {
				// A wait-0 request that joined a waiter: its one attempt
				// failed, and it is never queued.
				c.s.metrics.notAcquired.Inc()
				r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
			} else {
				kept = append(kept, r)
			}
		}
		w.replies = kept
		switch {
		case len(w.replies) == 0:
			c.retire(w)
		case w.wait == 0:
			c.s.metrics.notAcquired.Inc()
			c.answer(w, wire.Frame{Type: wire.TypeNotAcquired})
			c.retire(w)
		case !now.Before(w.deadline):
			c.s.metrics.notAcquired.Inc()
			c.answer(w, wire.Frame{Type: wire.TypeNotAcquired, QueuedMs: c.queuedMs(w)})
			c.retire(w)
		default:
			if q == nil {
				q = &keyQueue{n: 1}
				c.queues[w.key] = q
			}
			w.elem = q.waiting.PushFront(w)
			for i := range w.replies {
				c.sendQueued(w, i)
			}
		}
	default:
		c.answer(w, wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeInternal), Text: []byte("the state machine refused the acquire")})
		c.retire(w)
	}
	if q != nil {
		c.maybeDropQueue(w.key, q)
	}
}

// releaseOrphan proposes the release of a grant that nobody received. Its
// lease timer goes at once: until the release is applied the hold is still
// in the state, and a G for it (its owner asking again) must promise no
// lease (leaseLeft is 0 without a timer), since the release will end it.
// If the release never commits, a new term rebuilds the timers.
func (c *core) releaseOrphan(key string, token uint64) {
	c.leaseEnded(key, token)
	c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpRelease, Key: key, Token: token})
	c.pending.causes = append(c.pending.causes, cause{kind: causeOrphan})
	c.handoff(key)
}

func (c *core) recheckExpiry(key string, token uint64, now time.Time) {
	if h, ok := c.holdOf(key); ok && h.Token == token {
		c.setLease(key, token, now.Add(50*time.Millisecond))
	}
}

func (c *core) takeoverDone(now time.Time) {
	// Every remaining lease restarts in full from now: a new leader extends
	// leases, never shortens them (the state machine did the same to ExpiresAt).
	c.s.node.Read(func(st *fsm.State) {
		st.Range(func(k string, h fsm.Hold) bool {
			t := &timer{at: now.Add(time.Duration(h.LeaseMs) * time.Millisecond), key: k, token: h.Token, idx: len(c.timers)}
			c.timers = append(c.timers, t)
			c.leases[k] = t
			return true
		})
	})
	c.coordTakeover(now)
	heap.Init(&c.timers)
	c.resetTimer()
	c.serving = true
	c.s.setServing(true)
	c.s.log.Info("leading: serving clients", "node", c.s.cfg.NodeID, "held", c.s.node.Held())
}

func (c *core) answerReads(reads []readReq) {
	clock := c.clock()
	c.s.node.Read(func(st *fsm.State) {
		for _, rd := range reads {
			if rd.fn != nil {
				rd.fn(st)
				continue
			}
			f := wire.Frame{Type: wire.TypeInfo, ID: rd.id}
			if h, ok := st.Get(rd.key); ok {
				f.Flags = 1
				f.Token, f.Owner, f.LeaseMs = h.Token, wire.Owner(h.Owner), h.LeaseMs
				if rem := h.ExpiresAt - clock; rem > 0 {
					f.Remaining = uint32(rem)
				}
			}
			if q := c.queues[rd.key]; q != nil {
				f.Count = uint32(q.waiting.Len())
			}
			rd.c.finish(rd.id, &f)
		}
	})
}

// Timers: wait deadlines of waiters and lease deadlines of holds, in one
// heap. Each timer knows its place in the heap, so a release or a retired
// waiter removes its timer at once: the heap holds live deadlines only.
type timer struct {
	at    time.Time
	w     *waiter // a wait deadline, or
	key   string  // the lease deadline of key's hold under token
	token uint64
	fn    func() // or a coordination deadline (coord.go)
	idx   int    // position in the heap; -1 when not in it
}

type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

func (c *core) addTimer(t *timer) {
	heap.Push(&c.timers, t)
	if t.idx == 0 {
		c.resetTimer()
	}
}

func (c *core) removeTimer(t *timer) {
	if t != nil && t.idx >= 0 {
		heap.Remove(&c.timers, t.idx)
	}
}

// setLease (re)starts the lease timer of key's hold under token.
func (c *core) setLease(key string, token uint64, at time.Time) {
	c.removeTimer(c.leases[key])
	t := &timer{at: at, key: key, token: token}
	c.leases[key] = t
	c.addTimer(t)
}

// leaseEnded forgets the lease timer of a hold that was released or expired.
func (c *core) leaseEnded(key string, token uint64) {
	if t := c.leases[key]; t != nil && t.token == token {
		c.removeTimer(t)
		delete(c.leases, key)
	}
}

func (c *core) resetTimer() {
	if len(c.timers) == 0 {
		c.timer.Reset(time.Hour)
		return
	}
	c.timer.Reset(max(time.Until(c.timers[0].at), 0))
}

func (c *core) fireTimers() {
	now := time.Now()
	var expire []*timer
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		t := heap.Pop(&c.timers).(*timer)
		if t.fn != nil {
			t.fn()
			continue
		}
		if t.w != nil {
			t.w.timer = nil
			c.waitExpired(t.w)
			continue
		}
		if c.leases[t.key] == t {
			delete(c.leases, t.key)
		}
		if c.serving {
			expire = append(expire, t)
		}
	}
	if len(expire) > 0 {
		c.s.node.Read(func(st *fsm.State) {
			kept := expire[:0]
			for _, t := range expire {
				if h, ok := st.Get(t.key); ok && h.Token == t.token {
					kept = append(kept, t)
				}
			}
			expire = kept
		})
		for _, t := range expire {
			c.pending.ops = append(c.pending.ops, fsm.Op{Kind: fsm.OpExpire, Key: t.key, Token: t.token})
			c.pending.causes = append(c.pending.causes, cause{kind: causeExpire})
			c.handoff(t.key)
		}
	}
	c.resetTimer()
}

func (c *core) waitExpired(w *waiter) {
	if w.done || w.attempt {
		return // an attempt in flight decides: granted stands, busy answers W
	}
	c.s.metrics.notAcquired.Inc()
	c.answer(w, wire.Frame{Type: wire.TypeNotAcquired, QueuedMs: c.queuedMs(w)})
	c.retire(w)
}

func capacityLabel(reason uint8) string {
	switch reason {
	case wire.CapacityHeld:
		return "held"
	case wire.CapacityKeyWaiters:
		return "key_waiters"
	case wire.CapacityWaiters:
		return "waiters"
	case wire.CapacityInFlight:
		return "in_flight"
	case wire.CapacityConnections:
		return "connections"
	}
	return "other"
}
