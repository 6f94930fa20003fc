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
	if err := s.withdrawals.await(ctx, name); err != nil {
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
	ans, err := s.a.doEach(ctx, "acquire "+name, wire.CoordAcquire, b, true, note, before)
	if queued.Load() {
		// OnQueued runs before the acquire returns, as when it ran on
		// the reader; waiting here costs this caller only.
		<-s.callbacks.flushed()
	}
	if err != nil && (ctx.Err() != nil || errors.Is(err, ErrIndeterminate)) {
		// Withdraw the wait (or a grant that raced with the cancel). The
		// release gives up the whole hold of name, so a lease this session
		// already had for it ends first: it must never look valid for a
		// hold the server may already have given to another session.
		if le := s.leases.take(name); le != nil {
			le.cancel(fmt.Errorf("%w: %s: an acquire of the held semaphore ended before its answer, and its withdrawal releases the hold", ErrReleased, name))
		}
		s.withdrawals.start(s.a, name)
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
	holds, err := s.a.liveHolds()
	if err != nil {
		return nil, err
	}
	return s.leases.grant(s.a, holds, name, ans.OrderID, ans.Count), nil
}
