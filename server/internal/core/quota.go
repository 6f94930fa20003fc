package core

import (
	"fmt"

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

func (c *Core) quotaReset() {
	for p := range c.qc.waiters {
		c.publishWaiters(p, 0)
	}
	for p := range c.qc.sessions {
		if c.quota != nil {
			c.quota.PublishSessions(p, 0)
		}
	}
	c.qc = quotaCore{attempts: map[string]int{}, waiters: map[string]int{}, sessions: map[string]int{}}
}

func (c *Core) quotaOf(principal string) Quota {
	if c.quota == nil || principal == "" {
		return Quota{}
	}
	return c.quota.QuotaOf(principal)
}

func (c *Core) quotaRejected(principal, quota string) {
	if c.quota != nil {
		c.quota.Rejected(principal, quota)
	}
}

func (c *Core) publishWaiters(principal string, n int) {
	if c.quota != nil && principal != "" {
		c.quota.PublishWaiters(principal, n)
	}
}

// heldRoom: the principal may be granted one more ticket.
func (c *Core) heldRoom(principal string) bool {
	q := c.quotaOf(principal).HeldTickets
	if q == 0 {
		return true
	}
	var held int
	c.state.Read(func(st *fsm.State) { held = st.HeldBy(principal) })
	if held+c.qc.attempts[principal] < q {
		return true
	}
	c.quotaRejected(principal, QuotaHeld)
	return false
}

// principalWaiterRoom: the principal may queue one more acquire.
func (c *Core) principalWaiterRoom(principal string) bool {
	q := c.quotaOf(principal).Waiters
	if q == 0 || c.qc.waiters[principal] < q {
		return true
	}
	c.quotaRejected(principal, QuotaWaiters)
	return false
}

// countAttempt and countWaiter follow c.attempts and c.waiters per principal.
func (c *Core) countAttempt(principal string, d int) {
	if c.qc.attempts[principal] += d; c.qc.attempts[principal] <= 0 {
		delete(c.qc.attempts, principal)
	}
}

func (c *Core) countWaiter(principal string, d int) {
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
func (c *Core) grantRoom(w *waiter) bool {
	if c.heldRoom(w.holder) {
		return true
	}
	c.metrics.CapacityReject(wire.CapacityPrincipalHeld)
	c.answer(w, wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityPrincipalHeld})
	c.retire(w)
	return false
}

// sessionRoom: the connection's principal may attach one more session.
func (c *Core) sessionRoom(principal string) (int, bool) {
	q := c.quotaOf(principal).CoordinationSessions
	if q == 0 || c.qc.sessions[principal] < q {
		return q, true
	}
	c.quotaRejected(principal, QuotaSessions)
	return q, false
}

// countSession follows the sessions attached per principal (coord.go).
func (c *Core) countSession(principal string, d int) {
	n := c.qc.sessions[principal] + d
	if n <= 0 {
		delete(c.qc.sessions, principal)
	} else {
		c.qc.sessions[principal] = n
	}
	if c.quota != nil && principal != "" {
		c.quota.PublishSessions(principal, max(n, 0))
	}
}

// quotaMessage is the text of a coordination refusal for a quota.
func quotaMessage(principal, quota string, limit int) string {
	return fmt.Sprintf("the principal %q has its quota of %s (%d): see its [auth] quota", principal, quota, limit)
}
