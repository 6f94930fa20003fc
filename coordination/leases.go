package coordination

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

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
