package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

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

func (s *Session) attachBody(id, seq uint64) *wire.Coord {
	return &wire.Coord{Path: []byte(s.path), Session: id, SeqNo: seq, TimeoutMs: uint64(s.timeout / time.Millisecond),
		Key: s.key, Desc: []byte(s.desc)}
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
