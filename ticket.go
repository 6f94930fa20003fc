package ticketing

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
)

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
// answered "released", ErrNotHeld when it answered "not held" (the ticket had
// already expired or been released), and another error when no final answer
// came within ReleaseBound (5 s from this call; retried with the exact token
// across reconnects) or ctx. A failed release is never presumed successful.
//
// Release is called once; a second call (or a call after Close) waits for
// the first release's outcome and returns it. The exception is a release of
// which nothing was sent (ctx ended first, or no connection could be had):
// the ticket then stays releasable, so a later Release or the deferred
// Close still sends it.
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
	// Allowed while Broker.Close drains (draining): a ticket handed out
	// before Close can still be released until the connection is torn down.
	err := t.b.release(ctx, t.key, t.token, time.Now(), true)
	t.mu.Lock()
	t.err = err
	close(t.done)
	if wasUnsent(err) {
		t.started = false // nothing reached the server: let Close try
	}
	t.mu.Unlock()
	return err
}

// Close releases the ticket in the background, best effort, and returns at
// once: it is meant for defer. The release is sent at once on its own
// goroutine (pipelined with every other request on the connection) and
// retried with the exact token for ReleaseBound from this call. Its outcome
// goes to the release observer and the logger (WithReleaseObserver,
// WithLogger); callers who need it use Release. If WithReleaseQueue
// background releases are already outstanding, the release is dropped and
// Close returns ErrReleaseDropped (the ticket expires with its lease). Close
// after Release (or a second Close) does nothing and returns nil.
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

// Causes of a ticket context's end (context.Cause).
var (
	// ErrTicketExpired: the ticket's conservative deadline (Ticket.Deadline)
	// has passed; the server may already have granted the key to another
	// holder.
	ErrTicketExpired = transport.ErrTicketExpired
	// ErrTicketReleased: Release or Close was called on the ticket.
	ErrTicketReleased = transport.ErrTicketReleased
)

// Context returns a copy of parent that is done when the ticket ends: at its
// conservative deadline (ctx.Err() is context.DeadlineExceeded and
// context.Cause is ErrTicketExpired) or when Release or Close is called
// (context.Canceled, cause ErrTicketReleased), whichever comes first, or
// when parent is done. Run the protected work, the database transaction
// above all, under it: a transaction still open when the lease runs out is
// then cancelled by the driver instead of committing late. Call the returned
// cancel function when the work is done, as with context.WithCancel.
//
// The context bounds the work on this client's clock; it cannot stop a
// process that is paused (see the package documentation on fencing).
func (t *Ticket) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancelDeadline := context.WithDeadlineCause(parent, t.deadline, expiredCause(t))
	ctx, cancel := context.WithCancelCause(ctx)
	t.mu.Lock()
	if t.started {
		t.mu.Unlock()
		cancel(releasedCause(t))
		return ctx, func() { cancel(context.Canceled); cancelDeadline() }
	}
	if t.watchers == nil {
		t.watchers = make(map[*context.CancelCauseFunc]struct{})
	}
	key := &cancel
	t.watchers[key] = struct{}{}
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		delete(t.watchers, key)
		t.mu.Unlock()
		cancel(context.Canceled)
		cancelDeadline()
	}
}

// endContextsLocked ends every context of the ticket: Release or Close was
// called. t.mu is held.
func (t *Ticket) endContextsLocked() {
	for c := range t.watchers {
		(*c)(releasedCause(t))
	}
	t.watchers = nil
}

func expiredCause(t *Ticket) error {
	return &tokenError{key: t.key, token: t.token, at: t.deadline, err: ErrTicketExpired}
}

func releasedCause(t *Ticket) error {
	return &tokenError{key: t.key, token: t.token, err: ErrTicketReleased}
}

// tokenError names the ticket a context cause belongs to.
type tokenError struct {
	key   string
	token uint64
	at    time.Time
	err   error
}

func (e *tokenError) Error() string { return prefix + e.detail() }
func (e *tokenError) detail() string {
	if e.err == ErrTicketExpired {
		return "ticket " + quoteKey(e.key) + " token " + strconv.FormatUint(e.token, 10) + ": its conservative deadline passed (" + e.at.Format(time.RFC3339Nano) + "); stop the protected work"
	}
	return "ticket " + quoteKey(e.key) + " token " + strconv.FormatUint(e.token, 10) + ": released; stop the protected work"
}

func (e *tokenError) Unwrap() error { return e.err }
