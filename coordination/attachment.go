package coordination

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

// Bounds of a session's timeout. Below MinSessionTimeout the allowances of
// the client's deadline (DeadlineDriftPercent, DeadlineMargin) leave too
// little time between two keep-alives for a hold to be kept.
const (
	MinSessionTimeout = 500 * time.Millisecond
	MaxSessionTimeout = 30 * time.Minute
)

// attachment is one session's attachment to the cluster, and everything
// that keeps it: the attach (on the broker's connection when the server
// carries several sessions on one connection, else on a connection of its
// own), the restore after a lost connection, the conservative deadline and
// its keep-alives (deadline.go), and the sending of the session's requests
// with their resends (retry.go). It knows nothing of semaphores, leases or
// watches: those are requests built over it (semaphores.go, leases.go,
// describe.go), which hear of what it does through its hooks.
type attachment struct {
	t       connLayer
	log     *slog.Logger
	life    *clientLife
	path    string
	timeout time.Duration
	desc    string
	onState func(State)
	key     []byte
	hooks   attachmentHooks

	ctx    context.Context
	cancel context.CancelCauseFunc
	states callbackQueue // the state callback's calls, in order
	done   chan struct{} // the run loop ended
	// over is closed once end has run to its last step: a second end
	// (or close) that finds the session ended waits for it, so that it
	// never returns while the contexts and leases are still being ended.
	over chan struct{}

	mu       sync.Mutex
	id       uint64
	seq      uint64
	l        *link
	attached chan struct{} // closed while attached
	state    State
	ended    error

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
	grace       time.Duration // the node's session grace period, as last described

	unsubscribe func() // ends the session's subscription to the broker's notifications
	lastShared  *link  // the last link on the broker's connection the session was attached on (nil: its own)
	stopped     bool   // the server confirmed the session's end (stopped or ended)
}

// attachmentHooks are how the requests built over an attachment hear of
// what happens to it. detached and holdsEnded run with the attachment's
// lock held and must not block or call back into it.
type attachmentHooks struct {
	detached   func()                            // the connection was lost: a watch set on it can no longer fire
	holdsEnded func()                            // the deadline passed: every hold is given up
	ended      func(err error)                   // the session ended (after its Context)
	lost       func(name string, orderID uint64) // a hold was lost to a force delete
}

func newAttachment(t connLayer, log *slog.Logger, life *clientLife, path string) *attachment {
	return &attachment{t: t, log: log, life: life, path: path, timeout: 30 * time.Second, key: make([]byte, 16), done: make(chan struct{}), over: make(chan struct{})}
}

// open checks the session's settings and attaches a new session; the
// attachment then keeps itself (run, keepAlive) until it ends.
func (a *attachment) open(ctx context.Context) error {
	if a.timeout < MinSessionTimeout || a.timeout > MaxSessionTimeout {
		return &StatusError{Op: "start session on " + a.path, Status: wire.CoordBadRequest,
			Message: fmt.Sprintf("timeout: %v, want %v to %v (nothing was sent)", a.timeout, MinSessionTimeout, MaxSessionTimeout)}
	}
	if err := checkSizes(wire.CoordAttach, a.attachBody(0, 1)); err != nil {
		return err
	}
	rand.Read(a.key)
	if err := a.life.sessionStarted(); err != nil {
		return fmt.Errorf("%w: start session on %s: the client is closed", err, a.path)
	}
	a.ctx, a.cancel = context.WithCancelCause(context.Background())
	a.grace = defaultGrace
	l, st, ans, sent, err := a.start(ctx)
	if err == nil {
		err = statusError("start session on "+a.path, st, ans.Message)
	} else if errors.Is(err, errLinkLost) {
		err = fmt.Errorf("%w: start session on %s: the connection was lost", ErrUnavailable, a.path)
	}
	if err != nil {
		if l != nil {
			l.close()
		}
		a.cancel(err)
		a.life.sessionEnded()
		return err
	}
	a.id, a.seq, a.l, a.state = ans.Session, ans.SeqNo, l, Attached
	l.id = a.id
	if l.shared {
		a.lastShared = l
	}
	// After the id is known: the broker's connection carries the
	// notifications of every session on it, each takes its own.
	a.unsubscribe = a.t.subscribe(a.event)
	a.attached = make(chan struct{})
	close(a.attached)
	a.mu.Lock()
	a.confirmLocked(l, sent)
	a.mu.Unlock()
	a.setState(Attached)
	go a.run()
	go a.keepAlive()
	return nil
}

// connect returns a link for the session.
func (a *attachment) connect(ctx context.Context) (*link, error) {
	l, err := a.t.connect(ctx, a.event)
	if err != nil {
		return nil, fmt.Errorf("coordination: session on %s: %w", a.path, err)
	}
	return l, nil
}

// start connects and attaches a new session. If ctx ends before the
// attach is answered on the broker's connection, the answer is still
// awaited in the background and a session it created is stopped: on a
// connection that lives on, it would otherwise never be detached, so never
// expire.
func (a *attachment) start(ctx context.Context) (*link, uint16, wire.Coord, time.Time, error) {
	l, err := a.connect(ctx)
	if err != nil {
		return nil, 0, wire.Coord{}, time.Time{}, err
	}
	if !l.shared {
		st, ans, sent, err := l.callSent(ctx, wire.CoordAttach, a.attachBody(0, 1), nil)
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
		st, ans, sent, err := l.callSent(context.Background(), wire.CoordAttach, a.attachBody(0, 1), nil)
		select {
		case res <- result{st, ans, sent, err}:
		case <-left:
			if err == nil && st == wire.CoordSuccess {
				l.stopSession(ans.Session)
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
				l.stopSession(r.ans.Session)
			}
		default:
		}
		return l, 0, wire.Coord{}, time.Time{}, ctx.Err()
	}
}

func (a *attachment) attachBody(id, seq uint64) *wire.Coord {
	return &wire.Coord{Path: []byte(a.path), Session: id, SeqNo: seq, TimeoutMs: uint64(a.timeout / time.Millisecond),
		Key: a.key, Desc: []byte(a.desc)}
}

// setState queues the state callback's call; it never blocks (a.mu may be
// held, and the connection's reader may be the caller).
func (a *attachment) setState(st State) {
	if fn := a.onState; fn != nil {
		a.states.push(func() { fn(st) })
	}
}

// run restores the session whenever its connection is lost, until it ends.
func (a *attachment) run() {
	defer close(a.done)
	for {
		a.mu.Lock()
		l := a.l
		a.mu.Unlock()
		if l == nil {
			return
		}
		select {
		case <-a.ctx.Done():
			return
		case <-l.done:
		}
		a.mu.Lock()
		if a.ended != nil {
			a.mu.Unlock()
			return
		}
		a.l, a.state = nil, Detached
		a.attached = make(chan struct{})
		a.hooks.detached()
		a.setState(Detached)
		close(l.detached)
		a.mu.Unlock()
		a.log.Info("coordination session detached: restoring", "session", a.id, "path", a.path, "err", l.lostErr())
		if err := a.restore(); err != nil {
			a.end(err)
			return
		}
	}
}

// restore reconnects and attaches again with a higher seq_no. It tries for
// the session's timeout plus the node's grace period (a new leader keeps a
// detached session that long): the holds have ended at the deadline
// already, so trying on risks nothing and can save the session's queue
// positions; the server's SESSION_EXPIRED ends it sooner.
func (a *attachment) restore() error {
	a.mu.Lock()
	window := a.timeout + a.grace
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, window)
	defer cancel()
	for {
		l, err := a.connect(ctx)
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: session %d: the Ticketing client it uses was closed", ErrClosed, a.id)
		}
		if err != nil {
			return fmt.Errorf("%w: session %d could not be restored within its timeout and the node's grace period (%v): %v", ErrSessionExpired, a.id, window, err)
		}
		l.id = a.id
		a.mu.Lock()
		a.seq++
		seq := a.seq
		a.mu.Unlock()
		st, ans, sent, err := l.callSent(ctx, wire.CoordAttach, a.attachBody(a.id, seq), nil)
		if errors.Is(err, errLinkLost) {
			continue
		}
		if err != nil {
			l.close()
			return fmt.Errorf("%w: session %d: %v", ErrSessionExpired, a.id, err)
		}
		if err := statusError(fmt.Sprintf("restore session %d", a.id), st, ans.Message); err != nil {
			l.close()
			return err
		}
		a.mu.Lock()
		if a.ended != nil {
			a.mu.Unlock()
			l.close()
			return a.ended
		}
		a.l, a.state = l, Attached
		if l.shared {
			a.lastShared = l
		}
		a.confirmLocked(l, sent)
		a.log.Info("coordination session restored", "session", a.id, "path", a.path, "seq_no", seq)
		close(a.attached)
		a.setState(Attached)
		a.mu.Unlock()
		return nil
	}
}

// event handles notifications with id 0.
func (a *attachment) event(f wire.Frame) {
	var b wire.Coord
	if wire.DecodeCoord(&f, &b) != nil {
		return
	}
	switch f.Op {
	case wire.CoordLost:
		a.hooks.lost(string(b.Name), b.OrderID)
	case wire.CoordSessionEnded:
		if b.Session == a.id {
			a.mu.Lock()
			a.stopped = true
			a.mu.Unlock()
			if b.Reason == wire.CoordEndStopped {
				go a.end(fmt.Errorf("%w: session %d stopped", ErrClosed, a.id)) // by Close, or another attach of it
			} else {
				go a.end(fmt.Errorf("%w: session %d ended on the server (reason %d: 1 expired, 3 node dropped)", ErrSessionExpired, a.id, b.Reason))
			}
		}
	}
}

// end ends the session once: its Context and holds end, then the hooks
// hear of it.
func (a *attachment) end(err error) {
	a.mu.Lock()
	if a.ended != nil {
		a.mu.Unlock()
		<-a.over
		return
	}
	a.ended = err
	a.state = Expired
	if !errors.Is(err, ErrClosed) {
		a.log.Warn("coordination session ended", "session", a.id, "path", a.path, "err", err)
	}
	l := a.l
	a.l = nil
	a.setState(Expired)
	if a.timer != nil {
		a.timer.Stop()
	}
	shared, stopped := a.lastShared, a.stopped
	a.mu.Unlock()
	a.cancel(err)
	a.hooks.ended(err)
	if l != nil {
		l.close()
	}
	if shared != nil && !stopped {
		// Given up by the client without the server's word: on the
		// broker's connection, which lives on, it would stay attached.
		shared.stopSession(a.id)
	}
	if a.unsubscribe != nil {
		a.unsubscribe()
	}
	a.life.sessionEnded()
	close(a.over)
}

// close stops the session: its holds are released at once.
func (a *attachment) close(ctx context.Context) error {
	a.mu.Lock()
	l, ended := a.l, a.ended
	a.mu.Unlock()
	if ended != nil {
		<-a.over
		return nil
	}
	var err error
	if l != nil {
		var st uint16
		var ans wire.Coord
		st, ans, err = l.call(ctx, wire.CoordStop, &wire.Coord{}, nil)
		if err == nil && (st == wire.CoordSuccess || st == wire.CoordSessionExpired) {
			a.mu.Lock()
			a.stopped = true
			a.mu.Unlock()
		}
		if err == nil && st != wire.CoordSessionExpired {
			err = statusError("stop session", st, ans.Message)
		} else if errors.Is(err, errLinkLost) {
			err = nil // the session times out on the server instead
		}
	}
	a.end(fmt.Errorf("%w: session closed", ErrClosed))
	<-a.done
	return err
}

// current waits until the session is attached and returns its connection.
func (a *attachment) current(ctx context.Context) (*link, error) {
	for {
		a.mu.Lock()
		l, ch, ended := a.l, a.attached, a.ended
		a.mu.Unlock()
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
		case <-a.ctx.Done():
		}
	}
}

// stateNow is the session's state, checked against the deadline: a
// session whose deadline has passed is never reported ATTACHED, even
// before the deadline's timer has run (a process resumed after a pause).
func (a *attachment) stateNow() State {
	a.mu.Lock()
	l := a.checkDeadlineLocked()
	st := a.state
	if st == Attached && a.holds != nil && a.holds.Err() != nil {
		st = Detached // the restore that follows is under way
	}
	a.mu.Unlock()
	if l != nil {
		l.fail(errDeadlinePassed)
	}
	return st
}
