package coordsm

import "slices"

// Timeout is the command's log kind (never reused); its op carries Session, Name, OrderID: leader-proposed, checked against the deadline.
const Timeout Kind = 44

func init() { register(&cmdTimeout) }

var cmdTimeout = command{kind: Timeout, name: "timeout", fields: fSession | fName | fOrder,
	doc: "Proposed by the leader: ends the queued acquire OrderID of the session once the batch time has reached its deadline.",
	apply: func(a *applier, o *Op) Status {
		c := a.c
		ss := c.sessions[o.Session]
		if ss == nil {
			return SessionExpired
		}
		n := c.nodes[ss.node]
		sem := n.sems[o.Name]
		if sem == nil {
			return PreconditionFailed
		}
		i := holderIndex(sem.waiters, ss.id)
		if i < 0 || sem.waiters[i].OrderID != o.OrderID || a.now < sem.waiters[i].Deadline {
			return PreconditionFailed
		}
		a.r.event(Event{Kind: EventTimedOut, Path: n.path, Session: ss.id, Name: sem.name, OrderID: o.OrderID})
		sem.waiters = slices.Delete(sem.waiters, i, i+1)
		n.waiters--
		c.touch(sem)
		delete(ss.sems, sem.name)
		a.pump(n, sem, 0)
		return Success
	}}
