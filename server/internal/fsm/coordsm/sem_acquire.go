package coordsm

import (
	"math"
	"slices"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Acquire is the command's log kind (never reused); its op carries Session, SeqNo, Name, Count, TimeoutMs, Data, Ephemeral.
const Acquire Kind = 42

func init() { register(&cmdAcquire) }

var cmdAcquire = command{kind: Acquire, name: "acquire", fields: fSession | fSeqNo | fName | fCount | fTimeout | fData | fEphemeral,
	request: wire.CoordAcquire, inSession: true, build: func(b *wire.Coord) Op {
		return Op{Name: string(b.Name), Data: string(b.Data), Count: b.Count, TimeoutMs: b.TimeoutMs, Ephemeral: b.Flags&wire.CoordFlagEphemeral != 0}
	},
	doc:   "Takes Count of semaphore Name for the session, or queues for it up to TimeoutMs; an Ephemeral one is created on first use. Order ids come from the fencing-token counter.",
	apply: onSemaphore(acquireSem)}

func acquireSem(a *applier, n *node, ss *session, sem *semaphore, o *Op) Status {
	c, r := a.c, a.r
	if o.Count == 0 {
		return BadRequest
	}
	if sem == nil {
		if !o.Ephemeral {
			return NotFound
		}
		if len(n.sems) >= int(n.cfg.MaxSemaphores) {
			return LimitExceeded
		}
		// An empty new semaphore grants any count: it is never left empty.
		sem = &semaphore{name: o.Name, limit: math.MaxUint64, ephemeral: true}
		c.touch(sem)
		n.sems[o.Name] = sem
	}
	if o.Count != Exclusive && o.Count > sem.limit {
		return BadRequest
	}
	eff := effective(o.Count, sem.limit)
	if i := holderIndex(sem.owners, ss.id); i >= 0 {
		h := &sem.owners[i]
		if eff > h.Count {
			return BadRequest
		}
		lowered := eff < h.Count
		sem.count -= h.Count - eff
		h.Count, h.Data, h.TimeoutMs = eff, o.Data, o.TimeoutMs
		c.touch(sem)
		r.Acquired, r.OrderID, r.Count = true, h.OrderID, eff
		r.changed(n.path, sem.name, false, true)
		if lowered {
			a.pump(n, sem, 0)
		}
		return Success
	}
	if i := holderIndex(sem.waiters, ss.id); i >= 0 {
		w := &sem.waiters[i]
		r.event(Event{Kind: EventAborted, Path: n.path, Session: ss.id, Name: sem.name, OrderID: w.OrderID})
		w.Count, w.Data, w.TimeoutMs, w.Deadline = o.Count, o.Data, o.TimeoutMs, addMs(a.now, o.TimeoutMs)
		c.touch(sem)
		r.OrderID = w.OrderID
		a.pump(n, sem, w.OrderID)
		if j := holderIndex(sem.owners, ss.id); j >= 0 {
			r.Acquired, r.Count = true, sem.owners[j].Count
			return Success
		}
		if o.TimeoutMs == 0 {
			i = holderIndex(sem.waiters, ss.id)
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
			delete(ss.sems, sem.name)
			a.pump(n, sem, 0) // it may have been blocking the head
			a.dropIfUnused(n, sem)
			return Success
		}
		r.Queued = true
		return Success
	}
	if len(sem.waiters) == 0 && fits(sem, o.Count) {
		order := a.nextToken()
		sem.owners = append(sem.owners, Holder{OrderID: order, Session: ss.id, Count: eff, TimeoutMs: o.TimeoutMs, Data: o.Data})
		c.touch(sem)
		sem.count += eff
		ss.sems[sem.name] = true
		r.Acquired, r.OrderID, r.Count = true, order, eff
		r.changed(n.path, sem.name, false, true)
		return Success
	}
	if o.TimeoutMs == 0 {
		return Success // tried once: not acquired, not queued
	}
	if n.waiters >= int(n.cfg.MaxWaiters) {
		return LimitExceeded
	}
	order := a.nextToken()
	sem.waiters = append(sem.waiters, Holder{OrderID: order, Session: ss.id, Count: o.Count,
		TimeoutMs: o.TimeoutMs, Data: o.Data, Deadline: addMs(a.now, o.TimeoutMs)})
	n.waiters++
	c.touch(sem)
	ss.sems[sem.name] = true
	r.Queued, r.OrderID = true, order
	return Success
}

// pump grants waiters from the head of the queue while the head fits: strict
// FIFO with head-of-line blocking. A grant to order id self (the requester of
// this op, answered directly) is not reported as an event.
func (a *applier) pump(n *node, sem *semaphore, self uint64) {
	r := a.r
	granted := false
	for len(sem.waiters) > 0 && fits(sem, sem.waiters[0].Count) {
		w := sem.waiters[0]
		sem.waiters = slices.Delete(sem.waiters, 0, 1)
		n.waiters--
		w.Count = effective(w.Count, sem.limit)
		w.Deadline = 0
		sem.count += w.Count
		// Every owner was granted before this waiter queued (grants follow
		// the queue), so appending keeps owners in order-id order.
		sem.owners = append(sem.owners, w)
		granted = true
		if w.OrderID != self {
			r.event(Event{Kind: EventGranted, Path: n.path, Session: w.Session, Name: sem.name, OrderID: w.OrderID, Count: w.Count})
		}
	}
	if granted {
		a.c.touch(sem)
		r.changed(n.path, sem.name, false, true)
	}
	a.dropIfUnused(n, sem)
}

// dropIfUnused deletes an ephemeral semaphore nobody holds or waits for.
func (a *applier) dropIfUnused(n *node, sem *semaphore) {
	if sem.ephemeral && len(sem.owners) == 0 && len(sem.waiters) == 0 && n.sems[sem.name] == sem {
		delete(n.sems, sem.name)
		a.r.changed(n.path, sem.name, true, true)
	}
}
