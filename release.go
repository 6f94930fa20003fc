package ticketing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// release releases key's exact token, retrying across reconnects until the
// absolute bound start+ReleaseBound (or ctx) ends. R is nil, N is
// ErrNotHeld, B is ErrCapacity; no final answer in time is an error
// (ErrIndeterminate if a release may have been sent, ErrUnavailable if none
// could be), never success.
func (b *Broker) release(ctx context.Context, key string, token uint64, start time.Time, draining bool) error {
	ctx, cancel := context.WithDeadline(ctx, start.Add(b.cfg.releaseBound))
	defer cancel()
	op := fmt.Sprintf("release of token %d for", token)
	sent := 0                 // attempts that may have reached the server
	var lastFail *connFailure // why the last sent attempt got no answer
	unknown := func(cause error) error {
		why := "no final answer came"
		if lastFail != nil {
			why = lastFail.what() + " and no final answer came"
		}
		if cause == nil {
			cause = ctx.Err()
		}
		kinds := []error{ErrIndeterminate}
		if errors.Is(cause, ErrClosed) || (lastFail != nil && lastFail.closed()) {
			kinds = append(kinds, ErrClosed)
		}
		return newOpError(op, key, true, cause, fmt.Sprintf("outcome unknown: %s within %v of the call; the ticket may still be held until its lease expires", why, b.cfg.releaseBound), kinds...)
	}
	for {
		if err := ctx.Err(); err != nil {
			if sent > 0 {
				return unknown(nil)
			}
			return newOpError(op, key, true, nil, "not sent: "+err.Error(), err)
		}
		c, err := b.getConn(ctx, draining)
		if err != nil {
			if sent > 0 {
				return unknown(err)
			}
			return connectError(op, key, true, err)
		}
		cl := newCall(wire.TypeRelease, key)
		f := wire.Frame{Type: wire.TypeRelease, Token: token, Key: []byte(key)}
		if err := c.start(ctx, cl, &f); err != nil {
			if err == errConnGone {
				continue
			}
			if sent > 0 {
				return unknown(err)
			}
			return newOpError(op, key, true, err, "not sent: no free request slot on the connection before the deadline", err)
		}
		sent++
		var a *answer
		select {
		case got := <-cl.res:
			a = &got
		case <-ctx.Done():
			a = c.abandon(cl)
			if a == nil {
				return unknown(nil)
			}
		}
		if a.fail != nil {
			lastFail = a.fail
			if a.fail.closed() || ctx.Err() != nil {
				return unknown(a.fail.cause)
			}
			continue // the exact token again, on the next connection
		}
		switch a.f.Type {
		case wire.TypeReleased:
			return nil
		case wire.TypeNotHeld:
			msg := "the server answered that this token does not hold the key (it expired or was released before)"
			if sent > 1 {
				msg += "; an earlier attempt whose answer was lost may have released it"
			}
			return newOpError(op, key, true, nil, msg, ErrNotHeld)
		case wire.TypeForbidden:
			return permissionError(c, &a.f, op, key, "; not released")
		default: // B
			ce := &CapacityError{Addr: c.addr, Reason: CapacityReason(a.f.Reason)}
			return newOpError(op, key, true, ce, "not released: rejected by a server capacity limit; the ticket stays held until its lease expires", ErrCapacity)
		}
	}
}

// ReleaseToken releases key's ticket if token still holds it, for a ticket
// known only by its key and token: one acquired by another process or
// Broker, or whose token was persisted (ticketctl release uses it). The
// outcome is that of Ticket.Release: nil when the server answered R (the
// hold ended), ErrNotHeld when it answered N (the ticket had already expired
// or been released, or the key is held under another token, which a release
// never ends), ErrCapacity for a capacity reject, and an error, never
// presumed success, when no final answer came within ReleaseBound (5 s from
// this call) or ctx: ErrIndeterminate if a release may have reached the
// server, ErrUnavailable if none could be sent. Within the bound it retries
// the exact token across reconnects.
//
// A key outside 1..1024 bytes or token 0 (never granted) is rejected with
// ErrInvalidArgument before anything is sent.
func (b *Broker) ReleaseToken(ctx context.Context, key string, token uint64) error {
	op := fmt.Sprintf("release of token %d for", token)
	if len(key) == 0 || len(key) > MaxKey {
		return invalidArg(op, key, true, "the key is %d bytes, it must be 1..%d bytes", len(key), MaxKey)
	}
	if token == 0 {
		return invalidArg(op, key, true, "token 0 is never granted (tokens start at 1)")
	}
	return b.release(ctx, key, token, time.Now(), false)
}

// relJob is one background release.
type relJob struct {
	key    string
	token  uint64
	at     time.Time // when it was queued: the bound counts from here
	ticket *Ticket   // nil for compensating releases
}

// releaser runs background releases: a bounded queue and a fixed number of
// workers, so releases never pile up without bound and never block callers.
type releaser struct {
	b    *Broker
	mu   sync.Mutex
	q    chan relJob
	shut bool
	wg   sync.WaitGroup

	ctx    context.Context // cancelled when the drain grace period is over
	cancel context.CancelFunc
}

func newReleaser(b *Broker) *releaser {
	r := &releaser{b: b, q: make(chan relJob, b.cfg.releaseQueue)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for range b.cfg.releaseWorkers {
		r.wg.Add(1)
		go r.work()
	}
	return r
}

// enqueue queues j without blocking; a full queue drops it (reported).
func (r *releaser) enqueue(j relJob) error {
	r.mu.Lock()
	var err error
	if r.shut {
		err = newOpError(fmt.Sprintf("release of token %d for", j.token), j.key, true, nil,
			"not released: the broker is closed; the ticket stays held until its lease expires", ErrClosed)
	} else {
		select {
		case r.q <- j:
		default:
			err = newOpError(fmt.Sprintf("release of token %d for", j.token), j.key, true, nil,
				fmt.Sprintf("not released: the background release queue (%d) is full; the ticket stays held until its lease expires (use Ticket.Release to release synchronously)", cap(r.q)),
				ErrReleaseDropped)
		}
	}
	r.mu.Unlock()
	if err != nil {
		r.report(j, err)
	}
	return err
}

func (r *releaser) work() {
	defer r.wg.Done()
	for j := range r.q {
		err := r.b.release(r.ctx, j.key, j.token, j.at, true)
		if err != nil && r.ctx.Err() != nil && !errors.Is(err, ErrClosed) {
			kinds := []error{ErrClosed}
			if errors.Is(err, ErrIndeterminate) {
				kinds = append(kinds, ErrIndeterminate)
			}
			err = newOpError(fmt.Sprintf("release of token %d for", j.token), j.key, true, err,
				"abandoned: the broker was closed before the background release finished; the ticket may stay held until its lease expires", kinds...)
		}
		r.report(j, err)
	}
}

func (r *releaser) report(j relJob, err error) {
	if j.ticket != nil {
		j.ticket.finish(err)
	}
	switch {
	case errors.Is(err, ErrNotHeld):
		// Expected when the lease ran out before a deferred Close.
		r.b.cfg.logger.Debug("ticketing: background release: the ticket was no longer held", "key", j.key, "token", j.token)
	case err != nil:
		r.b.cfg.logger.Warn("ticketing: background release failed", "key", j.key, "token", j.token, "err", err)
	}
	if obs := r.b.cfg.observer; obs != nil {
		obs(j.key, j.token, err)
	}
}

// drain stops accepting jobs and lets the workers finish the queue for at
// most grace; then it cancels what is left and waits for the workers.
func (r *releaser) drain(grace time.Duration) {
	r.mu.Lock()
	if !r.shut {
		r.shut = true
		close(r.q)
	}
	r.mu.Unlock()
	t := time.AfterFunc(grace, r.cancel)
	r.wg.Wait()
	t.Stop()
	r.cancel()
}

// Ticket is a granted ticket. Its token fences every write made under it
// (see the package documentation). Release it with Release (to learn the
// outcome) or Close (best effort, in the background).
type Ticket struct {
	b        *Broker
	key      string
	token    uint64
	deadline time.Time
	lease    time.Duration
	queued   time.Duration

	mu       sync.Mutex
	started  bool          // Release or Close was called
	done     chan struct{} // closed when the release has an outcome
	err      error
	watchers map[*context.CancelCauseFunc]struct{} // contexts from Context, ended at Release/Close
}

// Key is the ticket's key.
func (t *Ticket) Key() string { return t.key }

// Token is the fencing token: strictly larger than every token granted
// before it, for any key.
func (t *Ticket) Token() uint64 { return t.token }

// Deadline is the conservative end of the lease on this machine's clock:
// never later than the server's end of the lease (see the package
// documentation for the formula). Finish the protected work before it.
func (t *Ticket) Deadline() time.Time { return t.deadline }

// Remaining is the time left until Deadline (negative once it passed).
func (t *Ticket) Remaining() time.Duration { return time.Until(t.deadline) }

// Lease is the lease the server granted.
func (t *Ticket) Lease() time.Duration { return t.lease }

// Queued is how long the acquire waited in the key's queue, as the server
// reported it.
func (t *Ticket) Queued() time.Duration { return t.queued }

func (t *Ticket) finish(err error) {
	t.mu.Lock()
	t.err = err
	close(t.done)
	t.mu.Unlock()
}

// Release releases the ticket and reports the outcome: nil when the server
// answered R, ErrNotHeld when it answered N (the ticket had already expired
// or been released), and another error when no final answer came within
// ReleaseBound (5 s from this call; retried with the exact token across
// reconnects) or ctx. A failed release is never presumed successful.
//
// Release is called once; a second call (or a call after Close) waits for
// the first release's outcome and returns it.
func (t *Ticket) Release(ctx context.Context) error {
	t.mu.Lock()
	if t.started {
		done := t.done
		t.mu.Unlock()
		select {
		case <-done:
			t.mu.Lock()
			defer t.mu.Unlock()
			return t.err
		case <-ctx.Done():
			return newOpError(fmt.Sprintf("release of token %d for", t.token), t.key, true, ctx.Err(),
				"an earlier Release or Close of this ticket is still running and its outcome is not known yet", ctx.Err())
		}
	}
	t.started = true
	t.done = make(chan struct{})
	t.endContextsLocked()
	t.mu.Unlock()
	err := t.b.release(ctx, t.key, t.token, time.Now(), false)
	t.finish(err)
	return err
}

// Close releases the ticket in the background, best effort, and returns at
// once: it is meant for defer. The release is queued (bounded queue, fixed
// number of workers) and retried with the exact token for ReleaseBound from
// when it was queued. Its outcome goes to the release observer and the
// logger (WithReleaseObserver, WithLogger); callers who need it use Release.
// If the queue is full the release is dropped and Close returns
// ErrReleaseDropped (the ticket expires with its lease). Close after Release
// (or a second Close) does nothing and returns nil.
func (t *Ticket) Close() error {
	t.mu.Lock()
	if t.started {
		t.mu.Unlock()
		return nil
	}
	t.started = true
	t.done = make(chan struct{})
	t.endContextsLocked()
	t.mu.Unlock()
	return t.b.rel.enqueue(relJob{key: t.key, token: t.token, at: time.Now(), ticket: t})
}
