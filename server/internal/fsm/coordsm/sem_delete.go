package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// DeleteSem is the command's log kind (never reused); its op carries Session, SeqNo, Name, Force.
const DeleteSem Kind = 41

func init() { register(&cmdDeleteSem) }

var cmdDeleteSem = command{kind: DeleteSem, name: "delete semaphore", fields: fSession | fSeqNo | fName | fForce,
	request: wire.CoordDeleteSemaphore, inSession: true,
	build: func(b *wire.Coord) Op { return Op{Name: string(b.Name), Force: b.Flags&wire.CoordFlagForce != 0} },
	doc:   "Deletes semaphore Name: refused while held or awaited unless Force, which aborts its waiters and takes its owners' holds.",
	apply: onSemaphore(func(a *applier, n *node, _ *session, sem *semaphore, o *Op) Status {
		c, r := a.c, a.r
		if sem == nil {
			return NotFound
		}
		if (len(sem.owners) > 0 || len(sem.waiters) > 0) && !o.Force {
			return PreconditionFailed
		}
		for _, w := range sem.waiters {
			r.event(Event{Kind: EventAborted, Path: n.path, Session: w.Session, Name: sem.name, OrderID: w.OrderID})
			delete(c.sessions[w.Session].sems, sem.name)
		}
		for _, h := range sem.owners {
			r.event(Event{Kind: EventLost, Path: n.path, Session: h.Session, Name: sem.name, OrderID: h.OrderID, Count: h.Count})
			delete(c.sessions[h.Session].sems, sem.name)
		}
		n.waiters -= len(sem.waiters)
		delete(n.sems, sem.name)
		r.changed(n.path, sem.name, true, true)
		return Success
	})}
