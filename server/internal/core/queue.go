package core

import (
	"container/list"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds the queues and admission: requests, waiters, the FIFO of
// each key, acquire/release/cancel handling, handoff and answers.

// Request is one client request handed from a connection to the core.
type Request struct {
	Kind  wire.Type // A, L, U, D, C, or K (coordination)
	Conn  Replier   // where its answers go
	ID    uint32
	Admin bool // sent on an admin session
	Owner wire.Owner
	Wait  uint8
	Lease uint8
	Token uint64
	Key   string
	At    time.Time // its receipt
	// Principal: for an acquire the name its hold records, for a release
	// the principal it is restricted to ("" = unrestricted), see fsm.Op;
	// for a coordination request the connection's principal (its sessions
	// count against its quota).
	Principal string

	Op uint8 // K: the coordination sub-op (coord.go), without wire.CoordForSession
	// ForSession: K: the request named its session (Coord.Session), as a
	// connection that carries several sessions does (sessions.go).
	ForSession bool
	Coord      *wire.Coord // K: its body, decoded and checked by the reader; it must not alias buffers the reader reuses
}

// reply is one request waiting for an acquire's final answer.
type reply struct {
	c          Replier
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

func (c *Core) handle(r Request) {
	if r.Kind == reqClosed {
		c.dropConn(r.Conn)
		return
	}
	if !c.serving {
		r.Conn.End(c.srv.NotLeaderFrame())
		return
	}
	if r.Admin {
		c.admins[r.Conn] = struct{}{}
	}
	if c.trace != nil {
		defer c.traceReceived(c.pending, c.pending.len(), r.At)
	}
	switch r.Kind {
	case wire.TypeAcquire:
		c.acquire(r)
	case wire.TypeRelease:
		c.pending.add(fsm.Op{Kind: fsm.OpRelease, Key: r.Key, Token: r.Token, Principal: r.Principal}, cause{kind: causeRelease, c: r.Conn, id: r.ID})
		c.handoff(r.Key)
	case wire.TypeReleaseOwner:
		c.releaseOwner(r)
	case wire.TypeCancel:
		c.cancel(r)
	case wire.TypeDescribe:
		c.pending.addRead(readReq{c: r.Conn, id: r.ID, key: r.Key})
	case wire.TypeCoord:
		c.coordRequest(r)
	}
}

func (c *Core) acquire(r Request) {
	if w, ok := c.owners[fsm.Owner(r.Owner)]; ok && w.key != r.Key {
		// An owner names one attempt on one key. Joining the waiter of
		// another key would answer this key's request with that key's
		// grant; not acquiring is the safe answer.
		c.metrics.NotAcquired()
		r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.ID})
		return
	} else if ok && w.holder != r.Principal {
		// Another principal's owner (read from a describe): not its waiter.
		c.metrics.NotAcquired()
		r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.ID})
		return
	} else if ok && w.elem != nil && r.Wait == 0 {
		// wait = 0 is one immediate attempt, never queued: the owner's
		// waiter is queued, so that attempt would find the key taken.
		c.metrics.NotAcquired()
		r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.ID})
		return
	} else if ok {
		// The same owner again: one queue entry, both requests get its answer.
		w.replies = append(w.replies, reply{c: r.Conn, id: r.ID, at: r.At, once: r.Wait == 0})
		c.track(r.Conn, w)
		if w.elem != nil {
			c.sendQueued(w, len(w.replies)-1)
		}
		return
	}
	q := c.queues[r.Key]
	busy := q != nil && (q.attempting != nil || q.waiting.Len() > 0)
	h, held := c.holdOf(r.Key)
	if held && h.Owner == fsm.Owner(r.Owner) && h.Principal == r.Principal {
		// This owner already holds the key: the same grant, no queue entry,
		// and only the lease the leader will still enforce, from a leader
		// that still leads as far as Raft knows.
		if c.deposed("a grant of an existing hold") {
			return
		}
		r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeGranted, ID: r.ID, Token: h.Token, LeaseMs: c.leaseLeft(r.Key, h, r.At)})
		return
	}
	if busy || held {
		// The key is taken (in the applied state, or by an attempt being
		// committed). Not acquiring is always a safe answer, so wait 0 is
		// answered from here; a waiter queues without a commit and is tried
		// when the release or expiry that frees the key is applied.
		if r.Wait == 0 {
			c.metrics.NotAcquired()
			r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.ID})
			return
		}
		if q == nil {
			q = &keyQueue{}
		}
		if reason, ok := c.waiterRoom(q, r.Principal); !ok {
			c.reject(r, reason)
			return
		}
		c.queues[r.Key] = q
		w := c.newWaiter(r)
		c.waiters++
		c.countWaiter(w.holder, 1)
		q.n++
		w.elem = q.waiting.PushBack(w)
		c.sendQueued(w, 0)
		return
	}
	if c.state.Held()+c.attempts >= c.cfg.Limits.MaxHeld {
		c.reject(r, wire.CapacityHeld)
		return
	}
	if !c.heldRoom(r.Principal) {
		c.reject(r, wire.CapacityPrincipalHeld)
		return
	}
	if q == nil {
		q = &keyQueue{}
	}
	if r.Wait > 0 {
		if reason, ok := c.waiterRoom(q, r.Principal); !ok {
			c.reject(r, reason)
			return
		}
	}
	c.queues[r.Key] = q
	w := c.newWaiter(r)
	if r.Wait > 0 {
		c.waiters++
		c.countWaiter(w.holder, 1)
		q.n++
	}
	c.startAttempt(q, w)
}

func (c *Core) holdOf(key string) (h fsm.Hold, ok bool) {
	c.state.Read(func(st *fsm.State) { h, ok = st.Get(key) })
	return h, ok
}

func (c *Core) waiterRoom(q *keyQueue, principal string) (uint8, bool) {
	if !c.principalWaiterRoom(principal) {
		return wire.CapacityPrincipalWaiters, false
	}
	l := c.cfg.Limits
	if q.n >= l.MaxWaitersPerKey {
		return wire.CapacityKeyWaiters, false
	}
	if c.waiters >= l.MaxWaiters {
		return wire.CapacityWaiters, false
	}
	return 0, true
}

func (c *Core) reject(r Request, reason uint8) {
	c.metrics.CapacityReject(reason)
	r.Conn.Finish(r.ID, &wire.Frame{Type: wire.TypeCapacity, ID: r.ID, Reason: reason})
}

func (c *Core) newWaiter(r Request) *waiter {
	w := &waiter{key: r.Key, owner: fsm.Owner(r.Owner), holder: r.Principal, leaseMs: uint32(r.Lease) * 1000, wait: r.Wait,
		arrived: r.At, replies: []reply{{c: r.Conn, id: r.ID, at: r.At}}}
	if r.Wait > 0 {
		w.deadline = r.At.Add(time.Duration(r.Wait) * time.Second)
		w.timer = &timer{at: w.deadline, w: w}
		c.addTimer(w.timer)
	}
	c.owners[w.owner] = w
	c.track(r.Conn, w)
	return w
}

// track records that cn has a reply in w (connWaiters).
func (c *Core) track(cn Replier, w *waiter) {
	ws := c.connWaiters[cn]
	if ws == nil {
		ws = make(map[*waiter]struct{})
		c.connWaiters[cn] = ws
	}
	ws[w] = struct{}{}
}

// untrack forgets that cn has a reply in w.
func (c *Core) untrack(cn Replier, w *waiter) {
	if ws := c.connWaiters[cn]; ws != nil {
		delete(ws, w)
	}
}

func (c *Core) sendQueued(w *waiter, i int) {
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
	r.c.Send(&wire.Frame{Type: wire.TypeQueued, ID: r.id, Count: uint32(pos)})
}

func (c *Core) startAttempt(q *keyQueue, w *waiter) {
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
func (c *Core) handoff(key string) {
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

func (c *Core) maybeDropQueue(key string, q *keyQueue) {
	if q.attempting == nil && q.waiting.Len() == 0 {
		delete(c.queues, key)
	}
}

func (c *Core) cancel(r Request) {
	w, ok := c.owners[fsm.Owner(r.Owner)]
	if !ok {
		return // already answered: a grant stands, its G is on the wire
	}
	for i := range w.replies {
		rp := &w.replies[i]
		if rp.c != r.Conn || rp.id != r.ID || rp.cancelled {
			continue
		}
		if w.attempt {
			rp.cancelled = true // answered when the attempt commits: G stands, else X
			return
		}
		rp.c.Finish(rp.id, &wire.Frame{Type: wire.TypeCancelled, ID: rp.id})
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
func (c *Core) releaseOwner(r Request) {
	owner := fsm.Owner(r.Owner)
	// Only the waiter's own principal (or an admin) may withdraw it.
	if w, ok := c.owners[owner]; ok && w.key == r.Key && !w.done && (r.Principal == "" || w.holder == "" || w.holder == r.Principal) {
		if w.attempt {
			w.withdrawn = true // answered when the attempt is applied
		} else {
			c.answer(w, wire.Frame{Type: wire.TypeCancelled})
			c.retire(w)
		}
	}
	c.pending.add(fsm.Op{Kind: fsm.OpReleaseOwner, Key: r.Key, Owner: owner, Principal: r.Principal}, cause{kind: causeRelease, c: r.Conn, id: r.ID})
	c.handoff(r.Key)
}

// retire removes a waiter that will get no grant: from its queue, the owner
// index and the counts.
func (c *Core) retire(w *waiter) {
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
		c.untrack(r.c, w)
	}
}

func (c *Core) dropConn(cn Replier) {
	delete(c.admins, cn)
	for w := range c.connWaiters[cn] {
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
	delete(c.connWaiters, cn)
	c.coordConnClosed(cn)
}

// answer sends one frame to every reply of w and forgets them.
func (c *Core) answer(w *waiter, f wire.Frame) {
	for _, r := range w.replies {
		f.ID = r.id
		r.c.Finish(r.id, &f)
		c.untrack(r.c, w)
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
func (c *Core) leaseLeft(key string, h fsm.Hold, at time.Time) uint32 {
	end, ok := c.leaseEnd(key, h)
	if !ok {
		return 0
	}
	left := end.Sub(at)
	if left <= 0 {
		return 0
	}
	return min(uint32(left/time.Millisecond), h.LeaseMs)
}

// leaseEnd is when the lease of key's hold h ends as every leader will
// enforce it (see leaseLeft); ok is false when its end is already being
// committed.
func (c *Core) leaseEnd(key string, h fsm.Hold) (end time.Time, ok bool) {
	t := c.leases[key]
	if t == nil || t.token != h.Token {
		return time.Time{}, false
	}
	end = t.at
	if t.promise.Before(end) {
		end = t.promise
	}
	return end, true
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
func (c *Core) answerGranted(w *waiter, h fsm.Hold, existing bool, sealed time.Time) bool {
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
		if r.c.Finish(r.id, &f) {
			delivered = true
		}
		c.untrack(r.c, w)
	}
	w.replies = nil
	return delivered
}

func (c *Core) queuedMs(w *waiter) uint32 {
	return uint32(c.clk.Now().Sub(w.arrived) / time.Millisecond)
}
