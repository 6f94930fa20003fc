package ticketing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// release releases key's exact token, retrying across reconnects until the
// absolute bound start+ReleaseBound (or ctx) ends. R is nil, N is
// ErrNotHeld, B is ErrCapacity; no final answer in time is an error
// (ErrIndeterminate if a release may have been sent, ErrUnavailable if none
// could be), never success.
func (b *Broker) release(ctx context.Context, key string, token uint64, start time.Time, draining bool) error {
	parent := ctx
	bctx := &boundCtx{Context: ctx, deadline: start.Add(b.cfg.releaseBound)}
	defer bctx.cancel()
	ctx = bctx
	// The operation's name is formatted only for an error: a release that
	// succeeds allocates nothing for it.
	op := func() string { return fmt.Sprintf("release of token %d for", token) }
	sent := 0                     // attempts that may have reached the server
	var lastFail *transport.Ended // why the last sent attempt got no answer
	waited := false               // the release has waited for a connection
	unknown := func(cause error) error {
		why := "no final answer came"
		if lastFail != nil {
			why = lastFail.What() + " and no final answer came"
		}
		if cause == nil {
			cause = ctx.Err()
		}
		kinds := []error{ErrIndeterminate}
		if errors.Is(cause, ErrClosed) || (lastFail != nil && lastFail.Closed()) {
			kinds = append(kinds, ErrClosed)
		}
		return newOpError(op(), key, true, cause, fmt.Sprintf("outcome unknown: %s within %v of the call; the ticket may still be held until its lease expires", why, b.cfg.releaseBound), kinds...)
	}
	for {
		if err := ctx.Err(); err != nil {
			if sent > 0 {
				return unknown(nil)
			}
			if !waited {
				return unsent(newOpError(op(), key, true, nil, "not sent: "+err.Error(), err))
			}
			// The bound ended while the release waited for a connection:
			// the same error as getConn's when its wait ends.
			return unsent(connectError(op(), key, true, b.t.NoConnection(err)))
		}
		c, err := b.getConn(ctx, draining)
		if err != nil {
			var we *transport.WaitError
			if err != ErrClosed && !errors.As(err, &we) && b.t.AwaitChange(ctx) {
				// Every listed server refuses the reconnect for now (a
				// connection limit, a server stopping mid-hello): one more
				// failed reconnect, within the release's own bound.
				waited = true
				continue
			}
			if sent > 0 {
				return unknown(err)
			}
			return unsent(connectError(op(), key, true, err))
		}
		cl := transport.NewRequest(wire.TypeRelease, key)
		f := wire.Frame{Type: wire.TypeRelease, Token: token, Key: []byte(key)}
		if err := c.Start(ctx, cl, &f); err != nil {
			if err == transport.ErrConnGone {
				waited = true
				continue
			}
			if sent > 0 {
				return unknown(err)
			}
			return unsent(newOpError(op(), key, true, err, "not sent: no free request slot on the connection before the deadline", err))
		}
		sent++
		var a *transport.Answer
		// The caller's context and a pooled timer for the bound, not
		// ctx.Done(): that would arm bctx's own deadline context, which is
		// what a release would otherwise allocate and schedule every time.
		timer := getTimer(time.Until(bctx.deadline))
		select {
		case got := <-cl.Res:
			a = &got
		case <-parent.Done():
		case <-timer.C:
		}
		putTimer(timer)
		if a == nil {
			a = c.Abandon(cl)
			if a == nil {
				return unknown(nil)
			}
		}
		if a.Fail != nil {
			lastFail = a.Fail
			if a.Fail.Closed() || ctx.Err() != nil {
				return unknown(a.Fail.Cause)
			}
			continue // the exact token again, on the next connection
		}
		switch a.F.Type {
		case wire.TypeReleased:
			return nil
		case wire.TypeNotHeld:
			if sent > 1 {
				// N may answer our own earlier attempt: a distinct
				// sentinel, so callers can tell (F6, docs/reliability.md).
				return newOpError(op(), key, true, nil, "the server answered that this token does not hold the key; an earlier attempt whose answer was lost may have released it (or it had expired or been released before)", ErrNotHeld, ErrNotHeldAfterRetry)
			}
			return newOpError(op(), key, true, nil, "the server answered that this token does not hold the key (it expired or was released before)", ErrNotHeld)
		case wire.TypeForbidden:
			return permissionError(c, &a.F, op(), key, "; not released")
		default: // B
			ce := &CapacityError{Addr: c.Addr(), Reason: CapacityReason(a.F.Reason)}
			return newOpError(op(), key, true, ce, "not released: rejected by a server capacity limit; the ticket stays held until its lease expires", ErrCapacity)
		}
	}
}

// boundCtx is the caller's context bounded by deadline (ReleaseBound from
// the call). It behaves as context.WithDeadline(parent, deadline) but builds
// that context (a timer and a registration with the parent) only when
// something waits on Done; Err and Deadline need neither.
type boundCtx struct {
	context.Context // the caller's
	deadline        time.Time

	once    sync.Once
	derived context.Context
	stop    context.CancelFunc
}

func (c *boundCtx) arm() context.Context {
	c.once.Do(func() { c.derived, c.stop = context.WithDeadline(c.Context, c.deadline) })
	return c.derived
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.arm().Deadline() }
func (c *boundCtx) Done() <-chan struct{}       { return c.arm().Done() }

func (c *boundCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// cancel releases the derived context, if one was built.
func (c *boundCtx) cancel() {
	c.once.Do(func() {}) // nothing was built; none will be
	if c.stop != nil {
		c.stop()
	}
}

// ReleaseToken releases key's ticket if token still holds it, for a ticket
// known only by its key and token: one acquired by another process or Broker,
// or whose token was persisted (ticketctl release uses it). The outcome is
// that of Ticket.Release: nil when the server answered "released" (the hold
// ended), ErrNotHeld when it answered "not held" (the ticket had already
// expired or been released, or the key is held under another token, which a
// release never ends), ErrCapacity for a capacity reject, and an error, never
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

// releaser runs background releases, each on its own goroutine from the
// moment it is queued: they are small frames, pipelined over the connection
// within its in-flight limit for non-acquire requests, never queued behind a
// fixed pool of workers. limit (WithReleaseQueue) only bounds memory.
type releaser struct {
	b     *Broker
	limit int

	mu      sync.Mutex
	running int
	shut    bool          // the broker is torn down: nothing more is sent
	idle    chan struct{} // closed and replaced whenever running drops
	wg      sync.WaitGroup

	// Releases by owner wait for a reconnect, possibly for long; Close
	// does not wait for them but cancels them (ownerCtx).
	ownerCtx    context.Context
	ownerCancel context.CancelFunc
	owners      sync.WaitGroup
}

func newReleaser(b *Broker) *releaser {
	r := &releaser{b: b, limit: b.cfg.releaseQueue, idle: make(chan struct{})}
	r.ownerCtx, r.ownerCancel = context.WithCancel(context.Background())
	return r
}

// enqueueOwner starts a release by owner (U) of key for an acquire whose
// answer was lost; it retries across reconnects until until.
func (r *releaser) enqueueOwner(key string, owner wire.Owner, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return
	}
	r.owners.Add(1)
	go func() {
		defer r.owners.Done()
		err := r.b.releaseOwner(r.ownerCtx, key, owner, until)
		lg := r.b.cfg.Logger
		switch {
		case err == nil:
			lg.Info("ticketing: ended the hold of an acquire whose answer was lost (release by owner)", "key", key, "owner", fmt.Sprintf("%x", owner[:]))
		case errors.Is(err, ErrNotHeld):
			lg.Debug("ticketing: the acquire whose answer was lost holds nothing (release by owner)", "key", key, "owner", fmt.Sprintf("%x", owner[:]))
		case r.ownerCtx.Err() == nil:
			lg.Warn("ticketing: release by owner after a lost acquire answer failed; the key stays held until the lease expires", "key", key, "owner", fmt.Sprintf("%x", owner[:]), "err", err)
		}
	}()
}

// enqueue starts j without blocking; over the limit it is dropped (reported).
func (r *releaser) enqueue(j relJob) error {
	r.mu.Lock()
	var err error
	switch {
	case r.shut:
		err = newOpError(fmt.Sprintf("release of token %d for", j.token), j.key, true, nil,
			"not released: the broker is closed; the ticket stays held until its lease expires", ErrClosed)
	case r.running >= r.limit:
		err = newOpError(fmt.Sprintf("release of token %d for", j.token), j.key, true, nil,
			fmt.Sprintf("not released: %d background releases are already outstanding (WithReleaseQueue); the ticket stays held until its lease expires (use Ticket.Release to release synchronously)", r.limit),
			ErrReleaseDropped)
	default:
		r.running++
		r.wg.Add(1)
		go r.run(j)
	}
	r.mu.Unlock()
	if err != nil {
		r.report(j, err)
	}
	return err
}

func (r *releaser) run(j relJob) {
	defer r.wg.Done()
	// Bounded by ReleaseBound from j.at, also while the broker closes:
	// Close waits for it (see Broker.Close).
	err := r.b.release(context.Background(), j.key, j.token, j.at, true)
	r.report(j, err)
	r.mu.Lock()
	r.running--
	close(r.idle)
	r.idle = make(chan struct{})
	r.mu.Unlock()
}

// busy reports whether background releases are running, and a channel
// closed when that number next drops.
func (r *releaser) busy() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running > 0, r.idle
}

func (r *releaser) report(j relJob, err error) {
	if j.ticket != nil {
		j.ticket.finish(err)
	}
	switch {
	case errors.Is(err, ErrNotHeld):
		// Expected when the lease ran out before a deferred Close.
		r.b.cfg.Logger.Debug("ticketing: background release: the ticket was no longer held", "key", j.key, "token", j.token)
	case err != nil:
		r.b.cfg.Logger.Warn("ticketing: background release failed", "key", j.key, "token", j.token, "err", err)
	}
	if obs := r.b.cfg.observer; obs != nil {
		obs(j.key, j.token, err)
	}
}

// shutdown refuses new jobs and waits for the running ones, each of which
// ends within its own ReleaseBound.
func (r *releaser) shutdown() {
	r.mu.Lock()
	r.shut = true
	r.mu.Unlock()
	r.wg.Wait()
	r.ownerCancel()
	r.owners.Wait()
}

// releaseOwner ends whatever owner holds or waits for on key (U), retrying
// across reconnects until until (or ctx). nil is R, ErrNotHeld is N.
func (b *Broker) releaseOwner(ctx context.Context, key string, owner wire.Owner, until time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	op := fmt.Sprintf("release by owner %x of", owner[:])
	for {
		c, err := b.getConn(ctx, true)
		if err != nil {
			var we *transport.WaitError
			if err == ErrClosed || errors.As(err, &we) {
				return connectError(op, key, true, err)
			}
			// Every listed server refuses for now: wait for a change.
			select {
			case <-b.t.Changed():
				continue
			case <-ctx.Done():
				return connectError(op, key, true, err)
			}
		}
		cl := transport.NewRequest(wire.TypeReleaseOwner, key)
		f := wire.Frame{Type: wire.TypeReleaseOwner, Owner: owner, Key: []byte(key)}
		if err := c.Start(ctx, cl, &f); err != nil {
			if err == transport.ErrConnGone {
				continue
			}
			return newOpError(op, key, true, nil, "not sent: "+err.Error(), err)
		}
		var a transport.Answer
		select {
		case a = <-cl.Res:
		case <-ctx.Done():
			if got := c.Abandon(cl); got == nil {
				return newOpError(op, key, true, nil, "no answer before "+ctx.Err().Error(), ctx.Err(), ErrIndeterminate)
			} else {
				a = *got
			}
		}
		if a.Fail != nil {
			if a.Fail.Closed() {
				return newOpError(op, key, true, a.Fail.Cause, "outcome unknown: "+a.Fail.What(), ErrClosed, ErrIndeterminate)
			}
			continue // U is idempotent: again on the next connection
		}
		switch a.F.Type {
		case wire.TypeReleased:
			return nil
		case wire.TypeNotHeld:
			return newOpError(op, key, true, nil, "that owner holds nothing on the key", ErrNotHeld)
		case wire.TypeForbidden:
			return permissionError(c, &a.F, op, key, "; not released")
		default: // B
			ce := &CapacityError{Addr: c.Addr(), Reason: CapacityReason(a.F.Reason)}
			return newOpError(op, key, true, ce, "rejected by a server capacity limit", ErrCapacity)
		}
	}
}

// unsent marks a release error as "nothing was sent".
func unsent(err error) error {
	if e, ok := err.(*opError); ok {
		e.Unsent = true
	}
	return err
}

// wasUnsent reports whether a release failed before anything was sent.
func wasUnsent(err error) bool {
	e, ok := err.(*opError)
	return ok && e.Unsent
}
