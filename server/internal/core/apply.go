package core

import (
	"container/heap"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds apply handling: what the core does when a proposed batch
// is applied (answers, grants, handoffs, takeover) or fails to commit
// (re-proposed, or the leader starts over).

// failed handles a batch that did not commit. The core's state must end up
// as if the batch had never been proposed, or this leader must start over.
func (c *Core) failed(b *batch, o Outcome, err error) {
	if o == Refused {
		if c.log.Leadership().Leader {
			// Still leader (a leadership transfer in progress, which may
			// fail): the batch is proposed again, with its attempts, expiries
			// and answers still pending, so no key is wedged and no timer lost.
			c.logger.Info("Raft refused a batch without writing it; proposing it again", "err", err, "ops", len(b.ops))
			c.retry = append(c.retry, b)
			c.retryDue = false
			c.retryT.Reset(retryDelay)
			return
		}
		// Not the leader any more, and nothing of the batch happened: its
		// clients are told so (M), and they retry safely at the new leader.
		c.logger.Info("Raft refused a batch: not the leader; its clients are sent to the new leader", "err", err, "ops", len(b.ops))
		c.tellBatch(b, c.srv.NotLeaderFrame())
		return
	}
	c.logger.Error("a batch failed to commit; its clients are told the Outcome is unknown", "err", err, "ops", len(b.ops))
	msg := "the server could not commit the request (" + err.Error() + "); its Outcome is unknown"
	c.tellBatch(b, &wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeInternal), Text: []byte(msg)})
	// The entry may still be applied: only a fresh takeover (barrier, then
	// timers rebuilt from the applied state) knows the state again.
	c.newTerm(c.log.Leadership())
}

// deposed reports whether Raft has lost this core's leadership (or lost and
// regained it in a new term) while the watcher has not said so yet: a
// stalled process resumes with Raft's news and its pending work both ready.
// Then nothing is answered from the old term: the core starts the new one
// at once, every connection ends with M, and their acquires are
// indeterminate, which is always safe (design.md, "Deadlines across
// leaders"). what names the answer withheld, for the log.
func (c *Core) deposed(what string) bool {
	l := c.log.Leadership()
	if l.Leader && l.Term == c.term {
		return false
	}
	c.logger.Info("leadership changed before "+what+" was answered; clients are sent to the new leader", "term", c.term)
	c.newTerm(l)
	return true
}

// tellBatch ends the connection of every request in b with the frame f.
func (c *Core) tellBatch(b *batch, f *wire.Frame) {
	for _, cs := range b.causes {
		switch {
		case cs.c != nil:
			cs.c.End(f)
		case cs.w != nil:
			for _, r := range cs.w.replies {
				r.c.End(f)
			}
		}
	}
	for _, rd := range b.reads {
		rd.c.End(f)
	}
}

// retryNow marks the refused batches due: flush proposes them again once
// every batch proposed before them is settled.
func (c *Core) retryNow() { c.retryDue = len(c.retry) > 0 }

// takeRetry puts the refused batches back in front of the pending one, in
// their order, to be proposed again. It reports whether anything may be
// proposed now: nothing is while refused batches wait for their retry, nor
// while a batch proposed before the retry has no outcome yet (it may be
// refused too, and must then go first).
func (c *Core) takeRetry() bool {
	if len(c.retry) == 0 {
		return true
	}
	if !c.retryDue || c.inflight > 0 {
		return false
	}
	nb := &batch{}
	for _, b := range append(c.retry, c.pending) {
		nb.merge(b)
	}
	c.retry, c.retryDue, c.pending = nil, false, nb
	return true
}

func (c *Core) applied(a applied) {
	b := a.b
	if b.epoch != c.epoch || !c.leading {
		return // leadership changed: those connections were closed with M
	}
	if c.deposed("a batch's Outcome") {
		return
	}
	if a.o != Applied {
		c.failed(b, a.o, a.err)
		return
	}
	now := c.clk.Now()
	b.each(a.res, func(op *fsm.Op, cs cause, res fsm.Result) {
		switch cs.kind {
		case causeTakeover:
			c.takeoverDone(now, b.sealed)
		case causeAttempt:
			c.attemptDone(cs.w, res, now, b.sealed)
		case causeRelease:
			switch res.Status {
			case fsm.Released:
				c.metrics.Release()
				cs.c.Finish(cs.id, &wire.Frame{Type: wire.TypeReleased, ID: cs.id})
			case fsm.Forbidden:
				name := "release"
				if op.Kind == fsm.OpReleaseOwner {
					name = "release_owner"
				}
				cs.c.Forbid(cs.id, name, op.Key, wire.ForbiddenOwner)
			default:
				cs.c.Finish(cs.id, &wire.Frame{Type: wire.TypeNotHeld, ID: cs.id})
			}
			c.freed(op.Key, res)
		case causeExpire:
			if res.Status == fsm.Released {
				c.metrics.Expiry()
			} else {
				c.recheckExpiry(op.Key, op.Token, now)
			}
			c.freed(op.Key, res)
		case causeOrphan:
			c.freed(op.Key, res)
		case causeCoord:
			c.coordApplied(op, res, cs, now)
		}
	})
	if len(b.reads) > 0 {
		if n := len(c.retry); n > 0 {
			// An earlier batch was refused and waits for its retry: these
			// reads must see it applied (a D right behind an L sees the key
			// free), so they are answered after it.
			c.retry[n-1].reads = append(c.retry[n-1].reads, b.reads...)
			return
		}
		c.answerReads(b.reads)
	}
}

func (c *Core) freed(key string, res fsm.Result) {
	if res.Status == fsm.Released {
		c.leaseEnded(key, res.Hold.Token)
		c.handoff(key)
	}
}

// attemptDone handles the result of w's attempt, applied at now in a batch
// sealed at sealed (before its commit: the bound of every promise made for
// a grant in it).
func (c *Core) attemptDone(w *waiter, res fsm.Result, now, sealed time.Time) {
	q := c.queues[w.key]
	w.attempt = false
	c.attempts--
	c.countAttempt(w.holder, -1)
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
			c.metrics.Grant()
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
			c.metrics.Grant()
			lease := time.Duration(res.Hold.LeaseMs) * time.Millisecond
			c.setLease(w.key, res.Hold.Token, now.Add(lease), sealed.Add(lease))
			if len(w.replies) > 0 {
				c.leases[w.key].remote = w.replies[0].c.Remote()
			}
		}
		if w.wait > 0 {
			c.metrics.QueueWait(now.Sub(w.arrived))
		}
		c.metrics.AcquireSeconds(c.clk.Now().Sub(w.arrived))
		delivered := c.answerGranted(w, res.Hold, res.Status == fsm.Existing, sealed)
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
				r.c.Finish(r.id, &wire.Frame{Type: wire.TypeCancelled, ID: r.id})
			} else if r.once && w.wait > 0 {
				// A wait-0 request that joined a waiter: its one attempt
				// failed, and it is never queued.
				c.metrics.NotAcquired()
				r.c.Finish(r.id, &wire.Frame{Type: wire.TypeNotAcquired, ID: r.id})
			} else {
				kept = append(kept, r)
			}
		}
		w.replies = kept
		switch {
		case len(w.replies) == 0:
			c.retire(w)
		case w.wait == 0:
			c.metrics.NotAcquired()
			c.answer(w, wire.Frame{Type: wire.TypeNotAcquired})
			c.retire(w)
		case !now.Before(w.deadline):
			c.metrics.NotAcquired()
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
func (c *Core) releaseOrphan(key string, token uint64) {
	c.leaseEnded(key, token)
	c.pending.add(fsm.Op{Kind: fsm.OpRelease, Key: key, Token: token}, cause{kind: causeOrphan})
	c.handoff(key)
}

// recheckExpiry tries the expiry of a hold the state machine kept again
// soon. Its lease promises nothing more meanwhile (a zero promise): the
// hold's end is being decided.
func (c *Core) recheckExpiry(key string, token uint64, now time.Time) {
	if h, ok := c.holdOf(key); ok && h.Token == token {
		c.setLease(key, token, now.Add(50*time.Millisecond), time.Time{})
	}
}

// takeoverDone starts serving once the takeover entry, sealed at sealed, is
// applied at now.
func (c *Core) takeoverDone(now, sealed time.Time) {
	// Every remaining lease restarts in full from now: a new leader extends
	// leases, never shortens them (the state machine did the same to
	// ExpiresAt). What a client is told of them counts from the takeover's
	// sealing, before its commit, which no later leader's takeover precedes.
	c.state.Read(func(st *fsm.State) {
		// Sized once: a million holds would otherwise grow the map and the
		// heap through every doubling, the largest cost of a takeover.
		if n := st.Len(); len(c.leases) == 0 && len(c.timers) == 0 {
			c.leases = make(map[string]*timer, n)
			c.timers = make(timerHeap, 0, n)
		}
		st.Range(func(k string, h fsm.Hold) bool {
			lease := time.Duration(h.LeaseMs) * time.Millisecond
			t := &timer{at: now.Add(lease), promise: sealed.Add(lease), key: k, token: h.Token, idx: len(c.timers)}
			c.timers = append(c.timers, t)
			c.leases[k] = t
			return true
		})
	})
	c.coordTakeover(now)
	heap.Init(&c.timers)
	c.resetTimer()
	c.serving = true
	c.srv.SetServing(true)
	c.logger.Info("leading: serving clients", "node", c.cfg.NodeID, "held", c.state.Held())
}

func (c *Core) answerReads(reads []readReq) {
	clock := c.clock()
	c.state.Read(func(st *fsm.State) {
		for _, rd := range reads {
			if rd.fn != nil {
				rd.fn(st)
				continue
			}
			f := wire.Frame{Type: wire.TypeInfo, ID: rd.id}
			if h, ok := st.Get(rd.key); ok {
				f.Flags = wire.InfoHeld
				f.Token, f.Owner, f.LeaseMs = h.Token, wire.Owner(h.Owner), h.LeaseMs
				if rem := h.ExpiresAt - clock; rem > 0 {
					f.Remaining = uint32(rem)
				}
			}
			if q := c.queues[rd.key]; q != nil {
				f.Count = uint32(q.waiting.Len())
			}
			rd.c.Finish(rd.id, &f)
		}
	})
}
