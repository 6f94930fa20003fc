package server

import (
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Per-principal quotas decided by the leader's core: held tickets, waiters
// and coordination sessions are counted where they are decided, against
// the leader's current view (the applied state plus the attempts it is
// committing). A new leader starts from the applied state (holds) and from
// nothing (waiters and sessions, which end with the old leader's
// connections), so a quota holds across leader changes. The state machine
// only counts holds per principal (fsm.State.HeldBy); it decides nothing.

// quotaCore is the core's per-principal counts; the core's goroutine owns it.
type quotaCore struct {
	attempts map[string]int // OpAcquire in flight, by holder principal
	waiters  map[string]int // waiters with wait > 0, by holder principal
	sessions map[string]int // coordination sessions attached, by connection principal
}

func (c *core) quotaReset() {
	for p := range c.qc.waiters {
		c.publishWaiters(p, 0)
	}
	for p := range c.qc.sessions {
		if c.quota != nil {
			c.quota.publishSessions(p, 0)
		}
	}
	c.qc = quotaCore{attempts: map[string]int{}, waiters: map[string]int{}, sessions: map[string]int{}}
}

func (c *core) quotaOf(principal string) Quota {
	if c.quota == nil || principal == "" {
		return Quota{}
	}
	return c.quota.quotaOf(principal)
}

func (c *core) quotaRejected(principal, quota string) {
	if c.quota != nil {
		c.quota.quotaRejected(principal, quota)
	}
}

func (c *core) publishWaiters(principal string, n int) {
	if c.quota != nil && principal != "" {
		c.quota.publishWaiters(principal, n)
	}
}

// heldRoom: the principal may be granted one more ticket.
func (c *core) heldRoom(principal string) bool {
	q := c.quotaOf(principal).HeldTickets
	if q == 0 {
		return true
	}
	var held int
	c.state.Read(func(st *fsm.State) { held = st.HeldBy(principal) })
	if held+c.qc.attempts[principal] < q {
		return true
	}
	c.quotaRejected(principal, quotaHeld)
	return false
}

// principalWaiterRoom: the principal may queue one more acquire.
func (c *core) principalWaiterRoom(principal string) bool {
	q := c.quotaOf(principal).Waiters
	if q == 0 || c.qc.waiters[principal] < q {
		return true
	}
	c.quotaRejected(principal, quotaWaiters)
	return false
}

// countAttempt and countWaiter follow c.attempts and c.waiters per principal.
func (c *core) countAttempt(principal string, d int) {
	if c.qc.attempts[principal] += d; c.qc.attempts[principal] <= 0 {
		delete(c.qc.attempts, principal)
	}
}

func (c *core) countWaiter(principal string, d int) {
	n := c.qc.waiters[principal] + d
	if n <= 0 {
		delete(c.qc.waiters, principal)
	} else {
		c.qc.waiters[principal] = n
	}
	c.publishWaiters(principal, n)
}

// grantRoom is checked when a queued waiter reaches the head of its key's
// queue: a principal at its held-tickets quota is answered B (reason 7)
// there rather than granted, and the next waiter gets its turn.
func (c *core) grantRoom(w *waiter) bool {
	if c.heldRoom(w.holder) {
		return true
	}
	c.metrics.capacityReject(capacityLabel(wire.CapacityPrincipalHeld))
	c.answer(w, wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityPrincipalHeld})
	c.retire(w)
	return false
}

// sessionRoom: the connection's principal may attach one more session.
func (c *core) sessionRoom(cn *conn) (int, bool) {
	q := c.quotaOf(cn.principal).CoordinationSessions
	if q == 0 || c.qc.sessions[cn.principal] < q {
		return q, true
	}
	c.quotaRejected(cn.principal, quotaSessions)
	return q, false
}

// countSession follows the sessions attached per principal (coord.go).
func (c *core) countSession(cn *conn, d int) {
	n := c.qc.sessions[cn.principal] + d
	if n <= 0 {
		delete(c.qc.sessions, cn.principal)
	} else {
		c.qc.sessions[cn.principal] = n
	}
	if c.quota != nil && cn.principal != "" {
		c.quota.publishSessions(cn.principal, max(n, 0))
	}
}
