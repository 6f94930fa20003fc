package coordsm

import (
	"slices"
	"sort"
)

// Expire is the command's log kind (never reused); its op carries Session: leader-proposed, checked against ExpiresAt.
const Expire Kind = 37

func init() { register(&cmdExpire) }

var cmdExpire = command{kind: Expire, name: "expire", fields: fSession,
	doc: "Proposed by the leader: ends a detached session whose expiry the batch time has reached.",
	apply: func(a *applier, o *Op) Status {
		ss := a.c.sessions[o.Session]
		if ss == nil {
			return SessionExpired
		}
		if ss.attached || a.now < ss.expiresAt {
			return PreconditionFailed
		}
		a.endSession(ss, EndExpired)
		return Success
	}}

// endSession releases every hold and drops every wait of ss, then hands the
// semaphores it left to their waiters, all in this one entry.
func (a *applier) endSession(ss *session, reason uint8) {
	c, r := a.c, a.r
	n := c.nodes[ss.node]
	names := make([]string, 0, len(ss.sems))
	for name := range ss.sems {
		names = append(names, name)
	}
	sort.Strings(names)
	r.event(Event{Kind: EventSessionEnded, Path: n.path, Session: ss.id, Reason: reason})
	for _, name := range names {
		sem := n.sems[name]
		c.touch(sem)
		if i := holderIndex(sem.owners, ss.id); i >= 0 {
			sem.count -= sem.owners[i].Count
			sem.owners = slices.Delete(sem.owners, i, i+1)
			r.changed(n.path, name, false, true)
		} else if i := holderIndex(sem.waiters, ss.id); i >= 0 {
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
		}
	}
	delete(n.sessions, ss.id)
	delete(c.sessions, ss.id)
	for _, name := range names {
		a.pump(n, n.sems[name], 0)
	}
}
