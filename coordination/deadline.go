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
// count. s.mu is held.
func (s *Session) confirmLocked(l *link, sent time.Time) {
	if s.ended != nil || l == nil || l != s.l || l.givenUp || !sent.After(s.confirmed) {
		return
	}
	s.confirmed = sent
	s.deadline = sent.Add(deadlineSpan(s.timeout))
	if s.holds == nil || s.holds.Err() != nil {
		s.holds, s.holdsCancel = context.WithCancelCause(s.ctx)
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(s.deadline), s.deadlinePassed)
	} else {
		s.timer.Reset(time.Until(s.deadline))
	}
}

// confirm is confirmLocked for callers without s.mu.
func (s *Session) confirm(l *link, sent time.Time) {
	s.mu.Lock()
	s.confirmLocked(l, sent)
	s.mu.Unlock()
}

// deadlinePassed runs when the deadline timer fires.
func (s *Session) deadlinePassed() {
	s.mu.Lock()
	l := s.checkDeadlineLocked()
	s.mu.Unlock()
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
// restore is a new acquire's answer. s.mu is held.
func (s *Session) checkDeadlineLocked() *link {
	if s.ended != nil || s.deadline.IsZero() || time.Now().Before(s.deadline) {
		return nil // the timer is set to the current deadline by confirmLocked
	}
	if s.holds.Err() == nil {
		s.holdsCancel(fmt.Errorf("%w: session %d: the server answered no request sent in the last %v (timeout %v less the allowances): it may expire the session, so its holds and leadership are given up",
			ErrDeadlinePassed, s.id, s.deadline.Sub(s.confirmed).Round(time.Millisecond), s.timeout))
		s.leases = map[string]*Lease{}
		s.c.log.Warn("coordination session deadline passed: holds given up", "session", s.id, "path", s.path, "timeout", s.timeout)
	}
	l := s.l
	if l != nil && s.state == Attached {
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
func (s *Session) keepAlive() {
	span := deadlineSpan(s.timeout)
	every := max(span/3, time.Millisecond)
	t := time.NewTimer(every / 2)
	defer t.Stop()
	var lastSent time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		l, due := s.l, s.confirmed.Add(every)
		s.mu.Unlock()
		now := time.Now()
		again := lastSent.Add(every / 4)
		if l != nil && !now.Before(due) && !now.Before(again) {
			lastSent = now
			again = now.Add(every / 4)
			go s.keepAliveOn(l, span)
		}
		s.mu.Lock()
		due = s.confirmed.Add(every)
		s.mu.Unlock()
		if due.Before(again) {
			due = again
		}
		t.Reset(max(time.Until(due), time.Millisecond))
	}
}

// keepAliveOn sends one keep-alive on l and confirms the session with its
// answer.
func (s *Session) keepAliveOn(l *link, span time.Duration) {
	ctx, cancel := context.WithTimeout(s.ctx, span)
	defer cancel()
	st, ans, sent, err := l.callSent(ctx, wire.CoordDescribeNode, &wire.Coord{Path: []byte(s.path)}, nil)
	if err != nil || st != wire.CoordSuccess {
		return
	}
	s.mu.Lock()
	s.confirmLocked(l, sent)
	if ans.GraceMs > 0 {
		s.grace = time.Duration(ans.GraceMs) * time.Millisecond
	}
	s.mu.Unlock()
}

// holdContext is a lease's context: Err also checks the session's deadline
// on the spot.
type holdContext struct {
	context.Context
	s *Session
}

func (c *holdContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.s.mu.Lock()
	l := c.s.checkDeadlineLocked()
	c.s.mu.Unlock()
	if l != nil {
		l.fail(errDeadlinePassed)
	}
	return c.Context.Err()
}
