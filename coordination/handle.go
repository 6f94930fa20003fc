package coordination

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// State is a session's state as its client sees it.
type State int

const (
	// Attached: connected to the leader; holds and waits are in force.
	Attached State = iota + 1
	// Detached: the connection was lost; the session is being restored and
	// keeps its holds and queue positions until its timeout.
	Detached
	// Expired: the session ended (timed out, stopped, or its node dropped).
	// Its holds are released; Context is done.
	Expired
)

func (s State) String() string {
	switch s {
	case Attached:
		return "ATTACHED"
	case Detached:
		return "DETACHED"
	case Expired:
		return "EXPIRED"
	}
	return "UNKNOWN"
}

// SessionOption configures a session.
type SessionOption func(*Session)

// WithTimeout sets how long the session survives a lost connection (default
// 30 s, at least MinSessionTimeout, at most 30 min). The session's holds
// end on the client a little earlier than on the server: see Lease.Context.
func WithTimeout(d time.Duration) SessionOption { return func(s *Session) { s.timeout = d } }

// Bounds of a session's timeout. Below MinSessionTimeout the allowances of
// the client's deadline (DeadlineDriftPercent, DeadlineMargin) leave too
// little time between two keep-alives for a hold to be kept.
const (
	MinSessionTimeout = 500 * time.Millisecond
	MaxSessionTimeout = 30 * time.Minute
)

// WithDescription sets the session's description (up to 1024 bytes).
func WithDescription(d string) SessionOption { return func(s *Session) { s.desc = d } }

// WithStateCallback calls fn at every state change, in order, one call at
// a time, on a goroutine of the session's (never on the connection's
// reader): a slow fn delays only its later calls, which wait in a queue,
// never the session or the other sessions on its connection.
func WithStateCallback(fn func(State)) SessionOption { return func(s *Session) { s.onState = fn } }

// Session is a coordination session on one node. It reconnects and
// restores itself after a lost connection; Context ends when it expires.
type Session struct {
	c       *Client
	path    string
	timeout time.Duration
	desc    string
	onState func(State)
	key     []byte

	ctx    context.Context
	cancel context.CancelCauseFunc
	states callbackQueue // the state callback's calls, in order
	done   chan struct{} // the run loop ended

	mu       sync.Mutex
	id       uint64
	seq      uint64
	l        *link
	attached chan struct{} // closed while attached
	state    State
	ended    error
	leases   map[string]*Lease
	watches  map[*watch]struct{}

	// The conservative deadline (docs/coordination.md, "The client's
	// deadline"): confirmed is the send time of the last request the server
	// answered after a commit on the attached connection; holds ends at
	// confirmed + timeout − allowances unless a later answer moves it, and
	// every lease derives from it.
	confirmed   time.Time
	deadline    time.Time
	holds       context.Context
	holdsCancel context.CancelCauseFunc
	timer       *time.Timer
	withdrawing map[string]chan struct{} // names whose wait is being withdrawn in the background
	callbacks   callbackQueue            // the caller's callbacks (OnQueued), off the connection's reader
	grace       time.Duration            // the node's session grace period, as last described

	unsubscribe func()          // ends the session's subscription to the broker's notifications
	lastShared  *transport.Conn // the broker's connection the session was last attached on (nil: its own)
	stopped     bool            // the server confirmed the session's end (stopped or ended)
}

// Session starts a session on the node at path.
func (c *Client) Session(ctx context.Context, path string, opts ...SessionOption) (*Session, error) {
	s := &Session{c: c, path: path, timeout: 30 * time.Second, key: make([]byte, 16),
		done:   make(chan struct{}),
		leases: make(map[string]*Lease), watches: make(map[*watch]struct{})}
	for _, o := range opts {
		o(s)
	}
	if s.timeout < MinSessionTimeout || s.timeout > MaxSessionTimeout {
		return nil, &StatusError{Op: "start session on " + path, Status: wire.CoordBadRequest,
			Message: fmt.Sprintf("timeout: %v, want %v to %v (nothing was sent)", s.timeout, MinSessionTimeout, MaxSessionTimeout)}
	}
	if err := checkSizes(wire.CoordAttach, s.attachBody(0, 1)); err != nil {
		return nil, err
	}
	rand.Read(s.key)
	if err := c.sessionStarted(); err != nil {
		return nil, fmt.Errorf("%w: start session on %s: the client is closed", err, path)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.withdrawing = make(map[string]chan struct{})
	s.grace = defaultGrace
	l, st, ans, sent, err := s.start(ctx)
	if err == nil {
		err = statusError("start session on "+path, st, ans.Message)
	} else if errors.Is(err, errLinkLost) {
		err = fmt.Errorf("%w: start session on %s: the connection was lost", ErrUnavailable, path)
	}
	if err != nil {
		if l != nil {
			l.close()
		}
		s.cancel(err)
		c.sessionEnded()
		return nil, err
	}
	s.id, s.seq, s.l, s.state = ans.Session, ans.SeqNo, l, Attached
	l.id = s.id
	if l.shared {
		s.lastShared = l.c
	}
	// After the id is known: the broker's connection carries the
	// notifications of every session on it, each takes its own.
	s.unsubscribe = c.t.Subscribe(func(_ *transport.Conn, f wire.Frame) { s.event(f) })
	s.attached = make(chan struct{})
	close(s.attached)
	s.mu.Lock()
	s.confirmLocked(l, sent)
	s.mu.Unlock()
	s.setState(Attached)
	go s.run()
	go s.keepAlive()
	return s, nil
}

// ID is the session's id.
func (s *Session) ID() uint64 { return s.id }

// Context ends when the client can no longer rely on the session's holds:
// at the session's conservative deadline (no answer that follows a commit
// for timeout × 0.99 − 100 ms since the send time of the last answered
// request: the server might expire the session soon; docs/coordination.md,
// "The client's deadline"), or when the session ends. context.Cause says
// which: ErrDeadlinePassed, ErrSessionExpired, ErrClosed. Watching it is
// enough to stop in time: every lease and leadership of the session ends
// with it. Its Err checks the deadline when called, so a process that was
// paused past the deadline sees it ended at once, before any timer runs.
//
// After the deadline the session restores itself when it can; once it is
// ATTACHED again, Context returns a new context (the ended one stays
// ended), and holds come back only from new answers (acquire or campaign
// again).
func (s *Session) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds == nil || s.ended != nil {
		return s.ctx // ended: its cause says why the session ended
	}
	return &holdContext{Context: s.holds, s: s}
}

// State is the session's current state. It checks the deadline when
// called: a session whose deadline has passed is never reported ATTACHED,
// even before the deadline's timer has run (a process resumed after a
// pause).
func (s *Session) State() State {
	s.mu.Lock()
	l := s.checkDeadlineLocked()
	st := s.state
	if st == Attached && s.holds != nil && s.holds.Err() != nil {
		st = Detached // the restore that follows is under way
	}
	s.mu.Unlock()
	if l != nil {
		l.fail(errDeadlinePassed)
	}
	return st
}

// Close stops the session: its holds are released at once.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	l, ended := s.l, s.ended
	s.mu.Unlock()
	if ended != nil {
		return nil
	}
	var err error
	if l != nil {
		var st uint16
		var ans wire.Coord
		st, ans, err = l.call(ctx, wire.CoordStop, &wire.Coord{}, nil)
		if err == nil && (st == wire.CoordSuccess || st == wire.CoordSessionExpired) {
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
		}
		if err == nil && st != wire.CoordSessionExpired {
			err = statusError("stop session", st, ans.Message)
		} else if errors.Is(err, errLinkLost) {
			err = nil // the session times out on the server instead
		}
	}
	s.end(fmt.Errorf("%w: session closed", ErrClosed))
	<-s.done
	return err
}
