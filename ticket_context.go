package ticketing

import (
	"context"
	"strconv"
	"time"
)

// Causes of a ticket context's end (context.Cause).
var (
	// ErrTicketExpired: the ticket's conservative deadline (Ticket.Deadline)
	// has passed; the server may already have granted the key to another
	// holder.
	ErrTicketExpired error = &sentinel{"the ticket's conservative deadline has passed"}
	// ErrTicketReleased: Release or Close was called on the ticket.
	ErrTicketReleased error = &sentinel{"the ticket was released"}
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
