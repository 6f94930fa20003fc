package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

import "slices"

// Release is the command's log kind (never reused); its op carries Session, SeqNo, Name.
const Release Kind = 43

func init() { register(&cmdRelease) }

var cmdRelease = command{kind: Release, name: "release", fields: fSession | fSeqNo | fName,
	request: wire.CoordRelease, inSession: true, build: func(b *wire.Coord) Op { return Op{Name: string(b.Name)} },
	doc: "Ends the session's hold on, or wait for, semaphore Name and grants the waiters that now fit.",
	apply: onSemaphore(func(a *applier, n *node, ss *session, sem *semaphore, _ *Op) Status {
		r := a.r
		if sem == nil {
			return Success // nothing to release: Changed stays false
		}
		if i := holderIndex(sem.owners, ss.id); i >= 0 {
			sem.count -= sem.owners[i].Count
			sem.owners = slices.Delete(sem.owners, i, i+1)
			r.changed(n.path, sem.name, false, true)
		} else if i := holderIndex(sem.waiters, ss.id); i >= 0 {
			r.event(Event{Kind: EventAborted, Path: n.path, Session: ss.id, Name: sem.name, OrderID: sem.waiters[i].OrderID})
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
		} else {
			return Success
		}
		r.Changed = true
		a.c.touch(sem)
		delete(ss.sems, sem.name)
		a.pump(n, sem, 0)
		return Success
	})}
