package coordination

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Lease is a hold on a semaphore.
type Lease struct {
	a      *attachment
	forget func() // drops the lease from its session's table
	name   string
	token  uint64
	// count is lowered by a re-acquire of the same hold (leaseTable.grant,
	// under the table's lock) while Count may be read from anywhere.
	count  atomic.Uint64
	ctx    *holdContext
	cancel context.CancelCauseFunc
}

// Token is the hold's order id: a fencing token, strictly increasing across
// the service (the same counter as ticket tokens).
func (l *Lease) Token() uint64 { return l.token }

// Count is the count held (Exclusive: the semaphore's limit).
func (l *Lease) Count() uint64 { return l.count.Load() }

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
	_, err := release(ctx, l.a, l.name)
	l.forget()
	l.cancel(fmt.Errorf("%w: %s", ErrReleased, l.name))
	return err
}

// release releases name, or withdraws the session's wait for it; it
// reports whether the session held or awaited it.
func release(ctx context.Context, a *attachment, name string) (bool, error) {
	ans, err := a.do(ctx, "release "+name, wire.CoordRelease, &wire.Coord{Name: []byte(name)}, true, nil)
	return ans.Flags&wire.CoordFlagReleased != 0, err
}

// withdrawals are the releases under way in the background after an
// acquire's context ended, by name: the session's next acquire of a name
// waits for its withdrawal first, so that it cannot withdraw that one.
type withdrawals struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// start releases name on a in the background, after the withdrawal of
// name under way, if any.
func (w *withdrawals) start(a *attachment, name string) {
	done := make(chan struct{})
	w.mu.Lock()
	prev := w.m[name]
	if w.m == nil {
		w.m = make(map[string]chan struct{})
	}
	w.m[name] = done
	w.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		// Bounded by the session: a session that ends releases everything.
		_, _ = release(a.ctx, a, name)
		w.mu.Lock()
		if w.m[name] == done {
			delete(w.m, name)
		}
		w.mu.Unlock()
	}()
}

// await waits until no withdrawal of name is under way.
func (w *withdrawals) await(ctx context.Context, name string) error {
	w.mu.Lock()
	ch := w.m[name]
	w.mu.Unlock()
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

// leaseTable is a session's leases, by semaphore name.
type leaseTable struct {
	mu sync.Mutex
	m  map[string]*Lease
}

// grant returns the lease of an acquire's answer: the lease already held
// when the answer is for the same hold (its count lowered or kept), else a
// new one, derived from holds, that replaces it.
func (t *leaseTable) grant(a *attachment, holds context.Context, name string, token, count uint64) *Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.m[name]; old != nil && old.token == token && old.ctx.Context.Err() == nil {
		old.count.Store(count) // the same hold, count lowered or kept
		return old
	} else if old != nil {
		old.cancel(fmt.Errorf("%w: %s: replaced by a new hold", ErrReleased, name))
	}
	lctx, cancel := context.WithCancelCause(holds)
	le := &Lease{a: a, name: name, token: token, ctx: &holdContext{Context: lctx, a: a}, cancel: cancel}
	le.count.Store(count)
	le.forget = func() { t.forget(le) }
	if t.m == nil {
		t.m = make(map[string]*Lease)
	}
	t.m[name] = le
	return le
}

// forget drops le if it is still name's lease.
func (t *leaseTable) forget(le *Lease) {
	t.mu.Lock()
	if t.m[le.name] == le {
		delete(t.m, le.name)
	}
	t.mu.Unlock()
}

// take removes and returns name's lease (nil: none).
func (t *leaseTable) take(name string) *Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	le := t.m[name]
	delete(t.m, name)
	return le
}

// forgetAll drops every lease: their contexts have ended with the holds'.
// It runs under the attachment's lock, and takes only the table's.
func (t *leaseTable) forgetAll() {
	t.mu.Lock()
	t.m = nil
	t.mu.Unlock()
}

// endAll ends every lease with err (the session ended).
func (t *leaseTable) endAll(err error) {
	t.mu.Lock()
	leases := t.m
	t.m = nil
	t.mu.Unlock()
	for _, le := range leases {
		le.cancel(err)
	}
}

// lost ends name's lease if it is the hold orderID, lost to a force delete.
func (t *leaseTable) lost(name string, orderID uint64) {
	t.mu.Lock()
	le := t.m[name]
	if le != nil && le.token == orderID {
		delete(t.m, name)
	}
	t.mu.Unlock()
	if le != nil && le.token == orderID {
		le.cancel(fmt.Errorf("%w: %s: the semaphore was deleted with force", ErrLost, le.name))
	}
}
