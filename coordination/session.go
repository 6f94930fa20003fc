package coordination

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing"
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

// connect returns a link for the session: on the broker's connection when
// its server carries several sessions on one connection, else on a
// connection of the session's own, dialled as the broker dials.
func (s *Session) connect(ctx context.Context) (*link, error) {
	shared, err := s.c.t.Shared(ctx)
	if err != nil {
		return nil, fmt.Errorf("coordination: session on %s: %w", s.path, err)
	}
	if shared.Sessions() {
		return newLink(shared, true), nil
	}
	own, err := s.c.t.Dedicated(ctx, s.event)
	if err != nil {
		return nil, fmt.Errorf("coordination: session on %s: %w", s.path, err)
	}
	return newLink(own, false), nil
}

// start connects and attaches a new session. If ctx ends before the
// attach is answered on the broker's connection, the answer is still
// awaited in the background and a session it created is stopped: on a
// connection that lives on, it would otherwise never be detached, so never
// expire.
func (s *Session) start(ctx context.Context) (*link, uint16, wire.Coord, time.Time, error) {
	l, err := s.connect(ctx)
	if err != nil {
		return nil, 0, wire.Coord{}, time.Time{}, err
	}
	if !l.shared {
		st, ans, sent, err := l.callSent(ctx, wire.CoordAttach, s.attachBody(0, 1), nil)
		return l, st, ans, sent, err
	}
	type result struct {
		st   uint16
		ans  wire.Coord
		sent time.Time
		err  error
	}
	res := make(chan result, 1)
	left := make(chan struct{})
	go func() {
		st, ans, sent, err := l.callSent(context.Background(), wire.CoordAttach, s.attachBody(0, 1), nil)
		select {
		case res <- result{st, ans, sent, err}:
		case <-left:
			if err == nil && st == wire.CoordSuccess {
				stopOn(l.c, ans.Session)
			}
		}
	}()
	select {
	case r := <-res:
		return l, r.st, r.ans, r.sent, r.err
	case <-ctx.Done():
		close(left)
		select {
		case r := <-res: // answered meanwhile
			if r.err == nil && r.st == wire.CoordSuccess {
				stopOn(l.c, r.ans.Session)
			}
		default:
		}
		return l, 0, wire.Coord{}, time.Time{}, ctx.Err()
	}
}

// stopBound bounds a background stop of a session on the broker's
// connection.
const stopBound = 10 * time.Second

// stopOn stops session id on the broker's connection c in the background,
// if c is still open: a session given up by its client must not stay
// attached to a connection that lives on.
func stopOn(c *transport.Conn, id uint64) {
	select {
	case <-c.Done():
		return // the server detached it; it expires on its own
	default:
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		_, _, _, _ = exchange(ctx, c, nil, wire.CoordStop|wire.CoordForSession, &wire.Coord{Session: id}, nil)
	}()
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

func (s *Session) attachBody(id, seq uint64) *wire.Coord {
	return &wire.Coord{Path: []byte(s.path), Session: id, SeqNo: seq, TimeoutMs: uint64(s.timeout / time.Millisecond),
		Key: s.key, Desc: []byte(s.desc)}
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

// setState queues the state callback's call; it never blocks (s.mu may be
// held, and the connection's reader may be the caller).
func (s *Session) setState(st State) {
	if fn := s.onState; fn != nil {
		s.states.push(func() { fn(st) })
	}
}

// run restores the session whenever its connection is lost, until it ends.
func (s *Session) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		l := s.l
		s.mu.Unlock()
		if l == nil {
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-l.done:
		}
		s.mu.Lock()
		if s.ended != nil {
			s.mu.Unlock()
			return
		}
		s.l, s.state = nil, Detached
		s.attached = make(chan struct{})
		s.fireWatchesLocked()
		s.setState(Detached)
		close(l.detached)
		s.mu.Unlock()
		s.c.log.Info("coordination session detached: restoring", "session", s.id, "path", s.path, "err", l.lostErr())
		if err := s.restore(); err != nil {
			s.end(err)
			return
		}
	}
}

// restore reconnects and attaches again with a higher seq_no. It tries for
// the session's timeout plus the node's grace period (a new leader keeps a
// detached session that long): the holds have ended at the deadline
// already, so trying on risks nothing and can save the session's queue
// positions; the server's SESSION_EXPIRED ends it sooner.
func (s *Session) restore() error {
	s.mu.Lock()
	window := s.timeout + s.grace
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, window)
	defer cancel()
	for {
		l, err := s.connect(ctx)
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: session %d: the Ticketing client it uses was closed", ErrClosed, s.id)
		}
		if err != nil {
			return fmt.Errorf("%w: session %d could not be restored within its timeout and the node's grace period (%v): %v", ErrSessionExpired, s.id, window, err)
		}
		l.id = s.id
		s.mu.Lock()
		s.seq++
		seq := s.seq
		s.mu.Unlock()
		st, ans, sent, err := l.callSent(ctx, wire.CoordAttach, s.attachBody(s.id, seq), nil)
		if errors.Is(err, errLinkLost) {
			continue
		}
		if err != nil {
			l.close()
			return fmt.Errorf("%w: session %d: %v", ErrSessionExpired, s.id, err)
		}
		if err := statusError(fmt.Sprintf("restore session %d", s.id), st, ans.Message); err != nil {
			l.close()
			return err
		}
		s.mu.Lock()
		if s.ended != nil {
			s.mu.Unlock()
			l.close()
			return s.ended
		}
		s.l, s.state = l, Attached
		if l.shared {
			s.lastShared = l.c
		}
		s.confirmLocked(l, sent)
		s.c.log.Info("coordination session restored", "session", s.id, "path", s.path, "seq_no", seq)
		close(s.attached)
		s.setState(Attached)
		s.mu.Unlock()
		return nil
	}
}

// event handles notifications with id 0.
func (s *Session) event(f wire.Frame) {
	var b wire.Coord
	if wire.DecodeCoord(&f, &b) != nil {
		return
	}
	switch f.Op {
	case wire.CoordLost:
		s.mu.Lock()
		le := s.leases[string(b.Name)]
		if le != nil && le.token == b.OrderID {
			delete(s.leases, le.name)
		}
		s.mu.Unlock()
		if le != nil && le.token == b.OrderID {
			le.cancel(fmt.Errorf("%w: %s: the semaphore was deleted with force", ErrLost, le.name))
		}
	case wire.CoordSessionEnded:
		if b.Session == s.id {
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			if b.Reason == wire.CoordEndStopped {
				go s.end(fmt.Errorf("%w: session %d stopped", ErrClosed, s.id)) // by Close, or another attach of it
			} else {
				go s.end(fmt.Errorf("%w: session %d ended on the server (reason %d: 1 expired, 3 node dropped)", ErrSessionExpired, s.id, b.Reason))
			}
		}
	}
}

// end ends the session once: leases and Context are cancelled, watches fire.
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return
	}
	s.ended = err
	s.state = Expired
	if !errors.Is(err, ErrClosed) {
		s.c.log.Warn("coordination session ended", "session", s.id, "path", s.path, "err", err)
	}
	l := s.l
	s.l = nil
	leases := s.leases
	s.leases = map[string]*Lease{}
	s.fireWatchesLocked()
	s.setState(Expired)
	if s.timer != nil {
		s.timer.Stop()
	}
	shared, stopped := s.lastShared, s.stopped
	s.mu.Unlock()
	s.cancel(err)
	for _, le := range leases {
		le.cancel(err)
	}
	if l != nil {
		l.close()
	}
	if shared != nil && !stopped {
		// Given up by the client without the server's word: on the
		// broker's connection, which lives on, it would stay attached.
		stopOn(shared, s.id)
	}
	if s.unsubscribe != nil {
		s.unsubscribe()
	}
	s.c.sessionEnded()
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

// current waits until the session is attached and returns its connection.
func (s *Session) current(ctx context.Context) (*link, error) {
	for {
		s.mu.Lock()
		l, ch, ended := s.l, s.attached, s.ended
		s.mu.Unlock()
		if ended != nil {
			return nil, ended
		}
		if l != nil {
			return l, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.ctx.Done():
		}
	}
}

// do sends a request of this session. A safe request is sent again after a
// restore when its connection was lost; an unsafe one reports
// ErrIndeterminate. A request whose connection the server ended twice with
// an error (E) before it said anything about the request is not sent a
// third time: it may be what ends the connections. An answer that follows
// a commit confirms the session (moves its deadline); a refusal the server
// may make without one (wire.CoordConfirmsSession) does not.
func (s *Session) do(ctx context.Context, what string, op uint8, body *wire.Coord, safe bool, note func(wire.Frame)) (wire.Coord, error) {
	return s.doEach(ctx, what, op, body, safe, note, nil)
}

// doEach is do with before, if set, called before every send (an acquire
// sets the time left of its queue timeout).
func (s *Session) doEach(ctx context.Context, what string, op uint8, body *wire.Coord, safe bool, note func(wire.Frame), before func()) (wire.Coord, error) {
	if err := checkSizes(op, body); err != nil {
		err.(*StatusError).Op = what
		return wire.Coord{}, err
	}
	losses := 0
	for {
		l, err := s.current(ctx)
		if err != nil {
			return wire.Coord{}, err
		}
		if before != nil {
			before()
		}
		var heard atomic.Bool // a notification for this request arrived
		wrapped := note
		if note != nil {
			wrapped = func(f wire.Frame) { heard.Store(true); note(f) }
		} else if op == wire.CoordAcquire || op == wire.CoordDescribeSemaphore {
			wrapped = func(wire.Frame) { heard.Store(true) }
		}
		st, ans, sent, err := l.callSent(ctx, op, body, wrapped)
		if errors.Is(err, errLinkLost) {
			if !sent.IsZero() && !heard.Load() && l.endedByServer() {
				losses++
			}
			// Wait until the session has let go of this connection, so
			// that a request sent again goes on the next one.
			select {
			case <-l.detached:
			case <-s.ctx.Done():
			case <-ctx.Done():
				return wire.Coord{}, ctx.Err()
			}
			if safe && losses < 2 {
				continue
			}
			if safe {
				return wire.Coord{}, fmt.Errorf("%w: %s: the server ended the connection twice with an error while the request was in flight, before it answered: not sent again", ErrIndeterminate, what)
			}
			return wire.Coord{}, fmt.Errorf("%w: %s: the connection was lost before the answer", ErrIndeterminate, what)
		}
		if err != nil {
			return wire.Coord{}, err
		}
		if wire.CoordConfirmsSession(st) {
			s.confirm(l, sent)
		}
		return ans, statusError(what, st, ans.Message)
	}
}

// CreateSemaphore creates a persistent semaphore with limit > 0.
func (s *Session) CreateSemaphore(ctx context.Context, name string, limit uint64, data []byte) error {
	_, err := s.do(ctx, "create semaphore "+name, wire.CoordCreateSemaphore, &wire.Coord{Name: []byte(name), Limit: limit, Data: data}, false, nil)
	return err
}

// UpdateSemaphore replaces the semaphore's data (no ownership needed).
func (s *Session) UpdateSemaphore(ctx context.Context, name string, data []byte) error {
	_, err := s.do(ctx, "update semaphore "+name, wire.CoordUpdateSemaphore, &wire.Coord{Name: []byte(name), Data: data}, false, nil)
	return err
}

// DeleteSemaphore deletes the semaphore. Without force a semaphore in use
// is ErrPreconditionFailed; with force its waiters are aborted and its
// owners lose their leases (their Context ends).
func (s *Session) DeleteSemaphore(ctx context.Context, name string, force bool) error {
	b := &wire.Coord{Name: []byte(name)}
	if force {
		b.Flags = wire.CoordFlagForce
	}
	_, err := s.do(ctx, "delete semaphore "+name, wire.CoordDeleteSemaphore, b, false, nil)
	return err
}

// AcquireOption configures an acquire.
type AcquireOption func(*acquireOpts)

type acquireOpts struct {
	count     uint64
	timeout   time.Duration
	forever   bool
	data      []byte
	ephemeral bool
	onQueued  func(orderID uint64)
}

// Count asks for n units (1..limit).
func Count(n uint64) AcquireOption { return func(o *acquireOpts) { o.count = n } }

// Shared asks for one unit (the default).
func Shared() AcquireOption { return Count(1) }

// Exclusive asks for the whole limit; it is granted only when nothing is held.
func Exclusive() AcquireOption { return Count(wire.CoordExclusive) }

// Ephemeral creates the semaphore (limit 2^64-1) if it does not exist; it is
// deleted when its last owner releases and nobody waits.
func Ephemeral() AcquireOption { return func(o *acquireOpts) { o.ephemeral = true } }

// Timeout bounds the time spent in the queue; 0 tries once. By default the
// acquire waits until its context ends. The bound is absolute: an acquire
// sent again after a restore carries only the time left.
func Timeout(d time.Duration) AcquireOption {
	return func(o *acquireOpts) { o.timeout, o.forever = d, false }
}

// Data attaches data to the hold (an owner's endpoint, say).
func Data(b []byte) AcquireOption { return func(o *acquireOpts) { o.data = b } }

// OnQueued calls fn when the acquire is queued, with its order id (again
// after a restore re-sent it), before AcquireSemaphore returns. fn runs on
// a goroutine of the session's, one callback at a time, never on the
// connection's reader: a slow fn delays its session's other callbacks and
// the return of its acquire, never the answers of other sessions.
func OnQueued(fn func(orderID uint64)) AcquireOption { return func(o *acquireOpts) { o.onQueued = fn } }

// Lease is a hold on a semaphore.
type Lease struct {
	s      *Session
	name   string
	token  uint64
	count  uint64
	ctx    *holdContext
	cancel context.CancelCauseFunc
}

// Token is the hold's order id: a fencing token, strictly increasing across
// the service (the same counter as ticket tokens).
func (l *Lease) Token() uint64 { return l.token }

// Count is the count held (Exclusive: the semaphore's limit).
func (l *Lease) Count() uint64 { return l.count }

// Context ends when the hold ends: released, lost to a force delete, its
// session ended, or the session's conservative deadline passed (no answer
// from the server for timeout × 0.99 − 100 ms since the send time of the
// last answered request: the server might expire the session soon, so the
// hold is given up on the client first; docs/coordination.md, "The
// client's deadline"). context.Cause says which (ErrReleased, ErrLost,
// ErrSessionExpired, ErrClosed, ErrDeadlinePassed). Its Err is checked
// against the deadline when called, so a process that was paused past the
// deadline sees the hold ended at once, before the deadline's timer runs.
func (l *Lease) Context() context.Context { return l.ctx }

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

// Release ends the hold.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.s.release(ctx, l.name)
	l.s.mu.Lock()
	if l.s.leases[l.name] == l {
		delete(l.s.leases, l.name)
	}
	l.s.mu.Unlock()
	l.cancel(fmt.Errorf("%w: %s", ErrReleased, l.name))
	return err
}

func (s *Session) release(ctx context.Context, name string) (bool, error) {
	ans, err := s.do(ctx, "release "+name, wire.CoordRelease, &wire.Coord{Name: []byte(name)}, true, nil)
	return ans.Flags&wire.CoordFlagReleased != 0, err
}

// withdraw releases name in the background after an acquire's context
// ended: the caller returns at once, and the session's next acquire of
// name waits for the withdrawal first, so it cannot withdraw that one.
func (s *Session) withdraw(name string) {
	done := make(chan struct{})
	s.mu.Lock()
	prev := s.withdrawing[name]
	s.withdrawing[name] = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		// Bounded by the session: a session that ends releases everything.
		_, _ = s.release(s.ctx, name)
		s.mu.Lock()
		if s.withdrawing[name] == done {
			delete(s.withdrawing, name)
		}
		s.mu.Unlock()
	}()
}

// awaitWithdrawal waits until no withdrawal of name is under way.
func (s *Session) awaitWithdrawal(ctx context.Context, name string) error {
	s.mu.Lock()
	ch := s.withdrawing[name]
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AcquireSemaphore acquires count units of the semaphore, waiting in its
// FIFO queue. An acquire whose connection is lost is sent again after the
// session is restored: a repeated acquire replaces the earlier one and keeps
// its queue position, so this is safe (with the time left of its Timeout).
// If ctx ends while queued, AcquireSemaphore returns ctx's error at once and
// the wait is withdrawn (a release) in the background. ErrNotAcquired:
// timeout 0 or the queue timeout passed.
func (s *Session) AcquireSemaphore(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	o := acquireOpts{count: 1, forever: true}
	for _, f := range opts {
		f(&o)
	}
	if err := s.awaitWithdrawal(ctx, name); err != nil {
		return nil, err
	}
	b := &wire.Coord{Name: []byte(name), Count: o.count, Data: o.data}
	if o.forever {
		b.TimeoutMs = wire.CoordWaitForever
	}
	if o.ephemeral {
		b.Flags = wire.CoordFlagEphemeral
	}
	start := time.Now()
	before := func() {
		if !o.forever {
			left := max(o.timeout-time.Since(start), 0)
			b.TimeoutMs = uint64(left / time.Millisecond)
		}
	}
	var note func(wire.Frame)
	var queued atomic.Bool // a callback of this acquire was queued
	if o.onQueued != nil {
		note = func(f wire.Frame) {
			var q wire.Coord
			if wire.DecodeCoord(&f, &q) == nil && f.Op == wire.CoordQueued {
				queued.Store(true)
				s.callbacks.push(func() { o.onQueued(q.OrderID) })
			}
		}
	}
	ans, err := s.doEach(ctx, "acquire "+name, wire.CoordAcquire, b, true, note, before)
	if queued.Load() {
		// OnQueued runs before the acquire returns, as when it ran on
		// the reader; waiting here costs this caller only.
		<-s.callbacks.flushed()
	}
	if err != nil && (ctx.Err() != nil || errors.Is(err, ErrIndeterminate)) {
		// Withdraw the wait (or a grant that raced with the cancel).
		s.withdraw(name)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if ans.Flags&wire.CoordFlagAcquired == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotAcquired, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return nil, s.ended
	}
	if s.holds == nil || s.holds.Err() != nil {
		// The deadline passed while the answer was on its way: the hold
		// exists on the server, but this session cannot vouch for it now.
		return nil, context.Cause(s.holds)
	}
	if old := s.leases[name]; old != nil && old.token == ans.OrderID && old.ctx.Context.Err() == nil {
		old.count = ans.Count // the same hold, count lowered or kept
		return old, nil
	} else if old != nil {
		old.cancel(fmt.Errorf("%w: %s: replaced by a new hold", ErrReleased, name))
	}
	lctx, cancel := context.WithCancelCause(s.holds)
	le := &Lease{s: s, name: name, token: ans.OrderID, count: ans.Count, ctx: &holdContext{Context: lctx, s: s}, cancel: cancel}
	s.leases[name] = le
	return le, nil
}

// Holder is an owner or waiter of a semaphore.
type Holder struct {
	OrderID, Session, Count uint64
	// Timeout is the acquire's queue timeout; Forever reports one that
	// waits without a timeout (Timeout is then the longest duration).
	Timeout time.Duration
	Forever bool
	Data    []byte
}

// TimeoutString is Timeout as text, "forever" for a wait without a timeout.
func (h Holder) TimeoutString() string {
	if h.Forever {
		return "forever"
	}
	return h.Timeout.String()
}

// SemaphoreDescription is a semaphore as DescribeSemaphore saw it.
type SemaphoreDescription struct {
	Name            string
	Limit, Count    uint64
	Data            []byte
	Ephemeral       bool
	Owners, Waiters []Holder
}

// DescribeOptions says what DescribeSemaphore includes and watches.
type DescribeOptions struct {
	Owners, Waiters        bool
	WatchData, WatchOwners bool
}

// Change is what a watch reports, once. Both false: a notification may have
// been lost (the connection dropped, the session ended, or a newer watch on
// the same semaphore replaced this one): describe again.
type Change struct {
	DataChanged, OwnersChanged bool
}

type watch struct {
	ch   chan Change
	once sync.Once
}

func (w *watch) fire(c Change) {
	w.once.Do(func() {
		w.ch <- c
		close(w.ch)
	})
}

func (s *Session) fireWatchesLocked() {
	for w := range s.watches {
		w.fire(Change{})
	}
	s.watches = make(map[*watch]struct{})
}

// DescribeSemaphore describes the semaphore. With a watch option it also
// returns a channel that receives one Change and is closed.
//
// The server answers at most 1 MiB of data, owners and waiters at a time
// (docs/coordination.md, "Describe and watches"); DescribeSemaphore asks for
// every page and returns the complete lists. The pages are separate reads,
// not one snapshot, so every page carries the semaphore's version (which
// changes with every change of its data, owners or waiters); when a page's
// version differs from the first page's, DescribeSemaphore starts again
// from the first page, until the pages agree or ctx ends. The description
// returned is therefore the semaphore as it was at one moment, and the
// watch, set with the first page, fires on any change after that moment.
func (s *Session) DescribeSemaphore(ctx context.Context, name string, opt DescribeOptions) (SemaphoreDescription, <-chan Change, error) {
	var lists, watches uint8
	if opt.Owners {
		lists |= wire.CoordFlagOwners
	}
	if opt.Waiters {
		lists |= wire.CoordFlagWaiters
	}
	if opt.WatchData {
		watches |= wire.CoordFlagWatchData
	}
	if opt.WatchOwners {
		watches |= wire.CoordFlagWatchOwners
	}
	for {
		d, ch, err := s.describePages(ctx, name, lists, watches)
		if !errors.Is(err, errVersionChanged) {
			return d, ch, err
		}
	}
}

// errVersionChanged: a page came from a later state than the first page.
var errVersionChanged = errors.New("the semaphore changed between pages")

// describePages reads every page once.
func (s *Session) describePages(ctx context.Context, name string, lists, watches uint8) (SemaphoreDescription, <-chan Change, error) {
	var w *watch
	var note func(wire.Frame)
	if watches != 0 {
		w = &watch{ch: make(chan Change, 1)}
		note = func(f wire.Frame) {
			var b wire.Coord
			if wire.DecodeCoord(&f, &b) == nil && f.Op == wire.CoordChanged {
				s.mu.Lock()
				delete(s.watches, w)
				s.mu.Unlock()
				w.fire(Change{DataChanged: b.Flags&wire.CoordFlagChangedData != 0, OwnersChanged: b.Flags&wire.CoordFlagChangedOwners != 0})
			}
		}
		s.mu.Lock()
		s.watches[w] = struct{}{}
		s.mu.Unlock()
	}
	fail := func(err error) (SemaphoreDescription, <-chan Change, error) {
		if w != nil {
			// A later describe replaces the server's watch (this one
			// then fires empty, to a channel nobody has).
			s.mu.Lock()
			delete(s.watches, w)
			s.mu.Unlock()
		}
		return SemaphoreDescription{}, nil, err
	}
	what := "describe semaphore " + name
	b, err := s.do(ctx, what, wire.CoordDescribeSemaphore, &wire.Coord{Name: []byte(name), Flags: lists | watches}, true, note)
	if err != nil {
		return fail(err)
	}
	d := SemaphoreDescription{Name: name, Limit: b.Limit, Count: b.Count, Data: b.Data, Ephemeral: b.Flags&wire.CoordFlagEphemeral != 0,
		Owners: toHolders(b.Owners), Waiters: toHolders(b.Queue)}
	var after uint64
	for page := b; page.Flags&wire.CoordFlagMoreHolders != 0; {
		// Owners' order ids are all below the waiters': the last listed
		// is the last waiter's, or the last owner's.
		if n := len(d.Waiters); n > 0 {
			after = d.Waiters[n-1].OrderID
		} else if n := len(d.Owners); n > 0 {
			after = d.Owners[n-1].OrderID
		}
		page, err = s.do(ctx, what, wire.CoordDescribeSemaphore, &wire.Coord{Name: []byte(name), Flags: lists | wire.CoordFlagNoData, After: after}, true, nil)
		if err != nil {
			return fail(err)
		}
		if page.Version != b.Version {
			return fail(errVersionChanged)
		}
		if len(page.Owners)+len(page.Queue) == 0 {
			// A page without data always lists someone: this server does not
			// page as docs/protocol.md says, and asking again would loop.
			return fail(fmt.Errorf("%w: %s: the leader answered a page that lists nobody yet says more follow: upgrade it", ErrUnavailable, what))
		}
		d.Owners = append(d.Owners, toHolders(page.Owners)...)
		d.Waiters = append(d.Waiters, toHolders(page.Queue)...)
	}
	if w == nil {
		return d, nil, nil
	}
	return d, w.ch, nil
}

func toHolders(hs []wire.CoordHolder) []Holder {
	var out []Holder
	for _, h := range hs {
		out = append(out, Holder{OrderID: h.OrderID, Session: h.Session, Count: h.Count,
			Timeout: time.Duration(min(h.TimeoutMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond,
			Forever: h.TimeoutMs == wire.CoordWaitForever, Data: h.Data})
	}
	return out
}
