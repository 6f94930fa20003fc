package server

import (
	"container/list"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds the queues and admission: requests, waiters, the FIFO of
// each key, acquire/release/cancel handling, handoff and answers.

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

// keyQueue is the FIFO of one key. At most one acquire per key is being
// committed at a time (attempting); later arrivals queue behind it, so grants
// follow arrival order even while entries are in flight.
type keyQueue struct {
	waiting    list.List // of *waiter
	attempting *waiter
	n          int // waiters with wait > 0 counted against the limits
}

func (c *core) handle(r request) {
	if r.kind == reqClosed {
		c.dropConn(r.c)
		return
	}
	if !c.serving {
		r.c.fatal(c.srv.notLeaderFrame())
		return
	}
	if r.c.admin {
		c.admins[r.c] = struct{}{}
	}
	switch r.kind {
	case wire.TypeAcquire:
		c.acquire(r)
	case wire.TypeRelease:
		c.pending.add(fsm.Op{Kind: fsm.OpRelease, Key: r.key, Token: r.token, Principal: r.principal}, cause{kind: causeRelease, c: r.c, id: r.id})
		c.handoff(r.key)
	case wire.TypeReleaseOwner:
		c.releaseOwner(r)
	case wire.TypeCancel:
		c.cancel(r)
	case wire.TypeDescribe:
		c.pending.addRead(readReq{c: r.c, id: r.id, key: r.key})
	case wire.TypeCoord:
		c.coordRequest(r)
	}
}

func (c *core) acquire(r request) {
	if w, ok := c.owners[fsm.Owner(r.owner)]; ok && w.key != r.key {
		// An owner names one attempt on one key. Joining the waiter of
		// another key would answer this key's request with that key's
		// grant; not acquiring is the safe answer.
		c.metrics.notAcquired()
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
		return
	} else if ok && w.holder != r.principal {
		// Another principal's owner (read from a describe): not its waiter.
		c.metrics.notAcquired()
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
		return
	} else if ok && w.elem != nil && r.wait == 0 {
		// wait = 0 is one immediate attempt, never queued: the owner's
		// waiter is queued, so that attempt would find the key taken.
		c.metrics.notAcquired()
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
		// and only the lease the leader will still enforce, from a leader
		// that still leads as far as Raft knows.
		if c.deposed("a grant of an existing hold") {
			return
		}
		r.c.finish(r.id, &wire.Frame{Type: wire.TypeGranted, ID: r.id, Token: h.Token, LeaseMs: c.leaseLeft(r.key, h, r.at)})
		return
	}
	if busy || held {
		// The key is taken (in the applied state, or by an attempt being
		// committed). Not acquiring is always a safe answer, so wait 0 is
		// answered from here; a waiter queues without a commit and is tried
		// when the release or expiry that frees the key is applied.
		if r.wait == 0 {
			c.metrics.notAcquired()
			r.c.finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
			return
		}
		if q == nil {
			q = &keyQueue{}
		}
		if reason, ok := c.waiterRoom(q, r.principal); !ok {
			c.reject(r, reason)
			return
		}
		c.queues[r.key] = q
		w := c.newWaiter(r)
		c.waiters++
		c.countWaiter(w.holder, 1)
		q.n++
		w.elem = q.waiting.PushBack(w)
		c.sendQueued(w, 0)
		return
	}
	if c.state.Held()+c.attempts >= c.cfg.limits.MaxHeld {
		c.reject(r, wire.CapacityHeld)
		return
	}
	if !c.heldRoom(r.principal) {
		c.reject(r, wire.CapacityPrincipalHeld)
		return
	}
	if q == nil {
		q = &keyQueue{}
	}
	if r.wait > 0 {
		if reason, ok := c.waiterRoom(q, r.principal); !ok {
			c.reject(r, reason)
			return
		}
	}
	c.queues[r.key] = q
	w := c.newWaiter(r)
	if r.wait > 0 {
		c.waiters++
		c.countWaiter(w.holder, 1)
		q.n++
	}
	c.startAttempt(q, w)
}

func (c *core) holdOf(key string) (h fsm.Hold, ok bool) {
	c.state.Read(func(st *fsm.State) { h, ok = st.Get(key) })
	return h, ok
}

func (c *core) waiterRoom(q *keyQueue, principal string) (uint8, bool) {
	if !c.principalWaiterRoom(principal) {
		return wire.CapacityPrincipalWaiters, false
	}
	l := c.cfg.limits
	if q.n >= l.MaxWaitersPerKey {
		return wire.CapacityKeyWaiters, false
	}
	if c.waiters >= l.MaxWaiters {
		return wire.CapacityWaiters, false
	}
	return 0, true
}

func (c *core) reject(r request, reason uint8) {
	c.metrics.capacityReject(capacityLabel(reason))
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
	c.countAttempt(w.holder, 1)
	c.pending.add(fsm.Op{Kind: fsm.OpAcquire, Key: w.key, Owner: w.owner, LeaseMs: w.leaseMs, Principal: w.holder}, cause{kind: causeAttempt, w: w})
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
		if w.done || !c.grantRoom(w) {
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
	c.pending.add(fsm.Op{Kind: fsm.OpReleaseOwner, Key: r.key, Owner: owner, Principal: r.principal}, cause{kind: causeRelease, c: r.c, id: r.id})
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
		c.countWaiter(w.holder, -1)
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

// leaseLeft is what remains, at, of the lease of key's hold h as every
// leader will enforce it, in whole ms and never more than the hold's lease:
// a G for an existing hold must not promise more. It ends at this leader's
// expiry timer or at the timer's promise (counted from before the commit
// that started the lease, so no later leader ends it earlier), whichever
// comes first. It is 0 when the hold's end is already being committed
// (expiry, or orphan release).
func (c *core) leaseLeft(key string, h fsm.Hold, at time.Time) uint32 {
	t := c.leases[key]
	if t == nil || t.token != h.Token {
		return 0
	}
	end := t.at
	if t.promise.Before(end) {
		end = t.promise
	}
	left := end.Sub(at)
	if left <= 0 {
		return 0
	}
	return min(uint32(left/time.Millisecond), h.LeaseMs)
}

// answerGranted answers every request of w with G for hold h, granted by a
// batch sealed at sealed. Each G is measured from its own request's receipt
// (protocol.md, "What G reports"). For a new grant the lease clock starts,
// for every promise, at the sealing, before the commit: no later leader can
// take over before the commit, and each restarts the lease in full at its
// takeover (design.md, "Deadlines across leaders"). queued_ms runs from the
// receipt to the sealing (0 for wait 0, or for a request received after
// it), and lease_ms is the lease from there, less whatever of it passed
// before a receipt after the sealing. For an existing hold queued_ms is 0
// and lease_ms is what remains of it at the receipt (leaseLeft).
// It reports whether any G could be delivered (a connection that is closing
// takes no more answers).
func (c *core) answerGranted(w *waiter, h fsm.Hold, existing bool, sealed time.Time) bool {
	delivered := false
	end := sealed.Add(time.Duration(h.LeaseMs) * time.Millisecond)
	for _, r := range w.replies {
		f := wire.Frame{Type: wire.TypeGranted, ID: r.id, Token: h.Token, LeaseMs: h.LeaseMs}
		switch {
		case existing:
			f.LeaseMs = c.leaseLeft(w.key, h, r.at)
		default:
			if w.wait > 0 {
				f.QueuedMs = uint32(max(sealed.Sub(r.at), 0) / time.Millisecond)
			}
			start := r.at.Add(time.Duration(f.QueuedMs) * time.Millisecond)
			f.LeaseMs = min(uint32(max(end.Sub(start), 0)/time.Millisecond), h.LeaseMs)
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
	return uint32(c.clk.Now().Sub(w.arrived) / time.Millisecond)
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
	if q := quotaOfReason(reason); q != "" {
		return "principal_" + q
	}
	return "other"
}
