package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// The allowances of a session's deadline, the same as a ticket's: the
// server's clock may run up to 1 % faster than the client's, and the
// client's timers may act up to 100 ms late.
const (
	DeadlineDriftPercent = ticketing.ClockDriftPercent
	DeadlineMargin       = ticketing.ClockDriftMargin
)

// defaultGrace is a node's default session grace period, assumed until the
// session has described its node.
const defaultGrace = 10 * time.Second

// deadlineSpan is how long after a confirmed send time the session's holds
// stay valid on the client:
//
//	timeout × (1 − DeadlineDriftPercent/100) − DeadlineMargin
func deadlineSpan(timeout time.Duration) time.Duration {
	return timeout - timeout*DeadlineDriftPercent/100 - DeadlineMargin
}

// confirmLocked records that the server answered, after a commit, a
// request sent at sent on l: the session existed on the server then, so it
// cannot expire there before sent + timeout (counted on the server's clock).
// Answers on a connection that is not the session's current one do not
// count. a.mu is held.
func (a *attachment) confirmLocked(l *link, sent time.Time) {
	if a.ended != nil || l == nil || l != a.l || l.givenUp || !sent.After(a.confirmed) {
		return
	}
	a.confirmed = sent
	a.deadline = sent.Add(deadlineSpan(a.timeout))
	if a.holds == nil || a.holds.Err() != nil {
		a.holds, a.holdsCancel = context.WithCancelCause(a.ctx)
	}
	if a.timer == nil {
		a.timer = time.AfterFunc(time.Until(a.deadline), a.deadlinePassed)
	} else {
		a.timer.Reset(time.Until(a.deadline))
	}
}

// confirm is confirmLocked for callers without a.mu.
func (a *attachment) confirm(l *link, sent time.Time) {
	a.mu.Lock()
	a.confirmLocked(l, sent)
	a.mu.Unlock()
}

// deadlinePassed runs when the deadline timer fires.
func (a *attachment) deadlinePassed() {
	a.mu.Lock()
	l := a.checkDeadlineLocked()
	a.mu.Unlock()
	if l != nil {
		l.fail(errDeadlinePassed)
	}
}

// errDeadlinePassed ends a connection on which the session could not be
// confirmed in time.
var errDeadlinePassed = errors.New("coordination: the session's deadline passed without an answer on this connection")

// checkDeadlineLocked ends the holds when the deadline has passed: every
// lease's context ends, and the session stops reporting ATTACHED (its
// connection, if any, is returned to be closed, which starts a restore).
// Holds come back only through the server: a lease of the session after a
// restore is a new acquire's answer. a.mu is held.
func (a *attachment) checkDeadlineLocked() *link {
	if a.ended != nil || a.deadline.IsZero() || time.Now().Before(a.deadline) {
		return nil // the timer is set to the current deadline by confirmLocked
	}
	if a.holds.Err() == nil {
		a.holdsCancel(fmt.Errorf("%w: session %d: the server answered no request sent in the last %v (timeout %v less the allowances): it may expire the session, so its holds and leadership are given up",
			ErrDeadlinePassed, a.id, a.deadline.Sub(a.confirmed).Round(time.Millisecond), a.timeout))
		a.hooks.holdsEnded()
		a.log.Warn("coordination session deadline passed: holds given up", "session", a.id, "path", a.path, "timeout", a.timeout)
	}
	l := a.l
	if l != nil && a.state == Attached {
		// A late answer on it confirms nothing: the session restores on
		// the next link and gets a fresh Context there.
		l.givenUp = true
		return l
	}
	return nil
}

// keepAlive confirms the session when nothing else has for a third of its
// deadline's span: a describe of its node, answered after a commit, on the
// session's connection. While none is answered (the connection's bytes are
// held up behind a large request, say), another goes out every twelfth of
// the span, without waiting for the first: the one sent last before the
// link cleared moves the deadline, so the session keeps its holds while
// the link is held up by one large request at a time for up to about
// eleven twelfths of the span, less a commit (the connection lets one large
// request at a time on its way).
func (a *attachment) keepAlive() {
	span := deadlineSpan(a.timeout)
	every := max(span/3, time.Millisecond)
	t := time.NewTimer(every / 2)
	defer t.Stop()
	var lastSent time.Time
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		l, due := a.l, a.confirmed.Add(every)
		a.mu.Unlock()
		now := time.Now()
		again := lastSent.Add(every / 4)
		if l != nil && !now.Before(due) && !now.Before(again) {
			lastSent = now
			again = now.Add(every / 4)
			go a.keepAliveOn(l, span)
		}
		a.mu.Lock()
		due = a.confirmed.Add(every)
		a.mu.Unlock()
		if due.Before(again) {
			due = again
		}
		t.Reset(max(time.Until(due), time.Millisecond))
	}
}

// keepAliveOn sends one keep-alive on l and confirms the session with its
// answer.
func (a *attachment) keepAliveOn(l *link, span time.Duration) {
	ctx, cancel := context.WithTimeout(a.ctx, span)
	defer cancel()
	st, ans, sent, err := l.callSent(ctx, wire.CoordDescribeNode, &wire.Coord{Path: []byte(a.path)}, nil)
	if err != nil || st != wire.CoordSuccess {
		return
	}
	a.mu.Lock()
	a.confirmLocked(l, sent)
	if ans.GraceMs > 0 {
		a.grace = time.Duration(ans.GraceMs) * time.Millisecond
	}
	a.mu.Unlock()
}

// holdContext is a lease's context: Err also checks the session's deadline
// on the spot.
type holdContext struct {
	context.Context
	a *attachment
}

func (c *holdContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.a.mu.Lock()
	l := c.a.checkDeadlineLocked()
	c.a.mu.Unlock()
	if l != nil {
		l.fail(errDeadlinePassed)
	}
	return c.Context.Err()
}

// context is the context of the session's holds while they last (live),
// else the session's own context, whose cause says why the session ended.
func (a *attachment) context() (ctx context.Context, live bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holds == nil || a.ended != nil {
		return a.ctx, false
	}
	return a.holds, true
}

// liveHolds is the context a new hold derives from, or why there is none:
// the session ended, or its deadline passed while the answer that grants
// the hold was on its way (the hold exists on the server, but this session
// cannot vouch for it now).
func (a *attachment) liveHolds() (context.Context, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended != nil {
		return nil, a.ended
	}
	if a.holds == nil || a.holds.Err() != nil {
		return nil, context.Cause(a.holds)
	}
	return a.holds, nil
}
