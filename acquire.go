package ticketing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// The conservative deadline's allowance for clocks and truncation (see
// conservativeDeadline and the package documentation).
const (
	// ClockDriftPercent is the assumed worst-case relative rate difference
	// between the client's and the server's clocks, in percent of the
	// measured span (lease plus queued time).
	ClockDriftPercent = 1
	// ClockDriftMargin is a fixed margin subtracted on top. The server's
	// figures already err on the early side (truncated to whole ms, queued
	// time measured to the start of the lease clock or earlier); the margin
	// is for the client: a timer or check acting on the deadline can run
	// late, and some platforms' clocks tick coarsely.
	ClockDriftMargin = 100 * time.Millisecond
)

// Limits of Acquire's arguments, in whole seconds after rounding up.
const (
	MaxWait  = wire.MaxWait * time.Second // 0 is one immediate attempt
	MinLease = wire.MinLease * time.Second
	MaxLease = wire.MaxLease * time.Second // also the longest work budget
	MaxKey   = wire.MaxKey                 // bytes
)

// conservativeDeadline is the latest moment, on this machine's monotonic
// clock, at which the client may still believe it holds the ticket:
//
//	deadline = sent + (lease + queued) × (1 − ClockDriftPercent/100) − ClockDriftMargin
//
// sent is taken just before the request's bytes were handed to the writer,
// so it precedes the server's receipt. The leader starts its lease clock no
// earlier than receipt + queued and enforces at least lease from then
// (docs/protocol.md, "What G reports"): its lease ends no earlier than
// receipt + queued + lease ≥ sent + queued + lease, measured on the server's
// clock. The drift allowance converts the server's milliseconds into the
// client's under a rate difference of up to 1 %, and the fixed margin is the
// client's own reaction time. A leader change only ever extends leases,
// never shortens them.
func conservativeDeadline(sent time.Time, leaseMs, queuedMs uint32) time.Time {
	span := time.Duration(uint64(leaseMs)+uint64(queuedMs)) * time.Millisecond
	span -= span * ClockDriftPercent / 100
	span -= ClockDriftMargin
	return sent.Add(span)
}

// ceilSeconds rounds a non-negative duration up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

type acquireArgs struct {
	wait, lease uint8
	budget      time.Duration
}

// maxBudget is the longest work budget a lease of l whole seconds can ever
// satisfy: the conservative deadline of a grant made at once, with no time
// queued (see conservativeDeadline), measured from the send.
func maxBudget(l int64) time.Duration {
	return conservativeDeadline(time.Time{}, uint32(l*1000), 0).Sub(time.Time{})
}

func checkAcquire(key string, wait, lease, budget time.Duration) (acquireArgs, error) {
	bad := func(format string, args ...any) (acquireArgs, error) {
		return acquireArgs{}, invalidArg("acquire", key, true, format, args...)
	}
	if len(key) == 0 || len(key) > MaxKey {
		return bad("the key is %d bytes, it must be 1..%d bytes", len(key), MaxKey)
	}
	if wait < 0 {
		return bad("wait %s is negative; it must be 0..%d s (0 is one immediate attempt)", secs(wait), wire.MaxWait)
	}
	if w := ceilSeconds(wait); w > wire.MaxWait {
		return bad("wait %s is %d s rounded up, longer than the maximum %d s", secs(wait), w, wire.MaxWait)
	}
	if lease <= 0 {
		return bad("lease %s must be %d..%d s", secs(lease), wire.MinLease, wire.MaxLease)
	}
	l := ceilSeconds(lease)
	if l > wire.MaxLease {
		return bad("lease %s is %d s rounded up, longer than the maximum %d s", secs(lease), l, wire.MaxLease)
	}
	if budget < 0 {
		return bad("work budget %s is negative; it must be 0 or more", secs(budget))
	}
	// The budget is rounded up like wait and lease: a fraction of a second
	// of work is planned as the whole second.
	bs := ceilSeconds(budget)
	if bs > wire.MaxLease {
		return bad("work budget %s is %d s rounded up, longer than %d s: work longer than the longest lease is not supported", secs(budget), bs, wire.MaxLease)
	}
	// A budget that not even an immediate grant could leave is refused here
	// rather than after a token was spent on a ticket that must be given
	// back (ErrBudgetExceeded).
	if mb := maxBudget(l); time.Duration(bs)*time.Second > mb {
		return bad("work budget %s (%d s rounded up) cannot fit in a %d s lease: even a ticket granted at once has at most %s of conservative time left (1%% clock allowance, %s margin); use a budget of at most %d s or a longer lease",
			secs(budget), bs, l, secs(mb), secs(ClockDriftMargin), int64(mb/time.Second))
	}
	return acquireArgs{wait: uint8(ceilSeconds(wait)), lease: uint8(l), budget: time.Duration(bs) * time.Second}, nil
}

// secs writes a duration in seconds, the unit of the protocol and the docs.
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// Acquire asks for the ticket of key and waits for the answer.
//
//   - wait (0..255 s) is how long the server keeps the request in the key's
//     FIFO queue; 0 is one immediate attempt, never queued.
//   - lease (1..250 s) is how long the ticket is held unless released.
//   - budget is the minimum time the caller needs for its work: a ticket is
//     handed over only if its conservative remaining time (Ticket.Deadline)
//     is positive and at least budget; otherwise it is released and
//     ErrBudgetExceeded returned. A budget that even an immediate grant of
//     that lease could not leave (more than lease × 0.99 − 0.1 s) is
//     rejected before sending.
//
// Fractions of a second are rounded up to whole seconds (the budget's too);
// values out of range are rejected with ErrInvalidArgument before anything
// is sent (never clamped). Keys are 1..1024 bytes.
//
// Acquire waits for a connection to the leader as long as ctx allows (wait
// bounds the queue, not the connection): give ctx a deadline.
//
// Outcomes: a *Ticket; ErrNotAcquired (not granted within wait);
// ErrCapacity (a server limit, returned at once, not retried);
// ErrIndeterminate (the request may have been sent but its final answer was
// lost: do not enter the critical section; *IndeterminateError has the key
// and owner, and when the connection ended the broker releases by owner
// whatever the acquire may have obtained once it reconnects); ErrBudgetExceeded; ErrUnauthenticated;
// ErrClosed (also when the grant arrived while the broker was closing: it is
// released).
//
// A session a stopping server ends (E 11) while the acquire is pending does
// not make it indeterminate: it is sent again, with the same owner and what
// remains of its wait, on the next connection (docs/protocol.md, How a
// connection ends).
//
// If ctx ends before the request was sent, nothing is sent and the error
// wraps ctx.Err() (and ErrUnavailable if there was no connection). If it
// ends after the request may have been sent, Acquire sends a cancel for it
// and returns ctx.Err() at once; should the server grant it anyway, the
// client releases that exact token in the background. While the connection's
// in-flight limit (from the server's hello) is reached, Acquire waits for a
// free slot as long as ctx allows.
func (b *Broker) Acquire(ctx context.Context, key string, wait, lease, budget time.Duration) (*Ticket, error) {
	args, err := checkAcquire(key, wait, lease, budget)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, newOpError("acquire", key, true, nil, "not sent: "+err.Error(), err)
	}
	var owner wire.Owner
	rand.Read(owner[:])
	b.acquireStarted()
	defer b.acquireDone()
	// interrupted is the first send's call once a stopping server ended its
	// session (E 11): the acquire is sent again, with the same owner, on the
	// next connection; if it cannot be, its owner is released like that of
	// any acquire whose answer was lost.
	var interrupted *transport.Request
	firstSent := time.Time{}
	lost := func(what string, cause error, kinds ...error) (*Ticket, error) {
		b.orphaned(key, owner, interrupted.Sent.Add(interrupted.Span))
		kinds = append(kinds, &IndeterminateError{Key: key, Owner: owner})
		return nil, newOpError("acquire", key, true, cause,
			"outcome unknown: the server that had it stopped, and it could not be sent again ("+what+"); once reconnected, the client releases by owner whatever it may have obtained; do not enter the critical section",
			kinds...)
	}
	for {
		c, err := b.getConn(ctx, false)
		if err != nil {
			if interrupted != nil {
				return lost(err.Error(), err, ctxKinds(err)...)
			}
			return nil, connectError("acquire", key, true, err)
		}
		cl := transport.NewRequest(wire.TypeAcquire, key)
		cl.Owner = owner
		// How long a grant of it can matter: a U after a lost answer is
		// pointless once the lease would have run out (leader changes
		// restart leases, hence the second lease).
		cl.Span = time.Duration(int(args.wait)+2*int(args.lease)) * time.Second
		wait := args.wait
		if interrupted != nil {
			// Sent again: the wait is what remains of the first one.
			wait = uint8(max(0, ceilSeconds(time.Duration(args.wait)*time.Second-time.Since(firstSent))))
		}
		f := wire.Frame{Type: wire.TypeAcquire, Owner: owner, Wait: wait, Lease: args.lease, Key: []byte(key)}
		if err := c.Start(ctx, cl, &f); err != nil {
			if err == transport.ErrConnGone {
				continue // nothing was sent: try the next connection
			}
			if err == transport.ErrClosing {
				if interrupted != nil {
					return lost("the broker was closed", nil, ErrClosed)
				}
				return nil, newOpError("acquire", key, true, nil, "the broker was closed while the acquire waited for an in-flight slot; nothing was sent", ErrClosed)
			}
			if interrupted != nil {
				return lost(err.Error(), err, ctxKinds(err)...)
			}
			return nil, newOpError("acquire", key, true, nil,
				"not sent: the connection's in-flight limit was reached and no slot freed before "+err.Error(), err)
		}
		if interrupted == nil {
			firstSent = cl.Sent
		}
		t, err := b.awaitAcquire(ctx, c, cl, args)
		if errors.Is(err, errSendAgain) {
			interrupted = cl
			continue
		}
		return t, err
	}
}

// errSendAgain: a stopping server ended the acquire's session before its
// final answer; Acquire sends it again with the same owner.
var errSendAgain = errors.New("the server stopped before answering; send again")

// ctxKinds is the context error err wraps, if any, for errors.Is.
func ctxKinds(err error) []error {
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return []error{e}
		}
	}
	return nil
}

// timers recycles the acquire's answer timers: a timer per acquire was a
// tenth of the client's allocations per acquire+release.
var timers sync.Pool

// getTimer returns a running timer that fires after d.
func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for reuse. The drain matters only under
// GODEBUG asynctimerchan=1 (a main module older than Go 1.23), where a
// fired timer's value stays in its channel after Stop; without it the next
// acquire would see that stale value at once.
func putTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	timers.Put(t)
}

func (b *Broker) awaitAcquire(ctx context.Context, c *transport.Conn, cl *transport.Request, args acquireArgs) (*Ticket, error) {
	timer := getTimer(time.Duration(args.wait)*time.Second + c.AnswerGrace())
	defer putTimer(timer)
	select {
	case a := <-cl.Res:
		return b.finishAcquire(c, cl, &a, args)
	case <-ctx.Done():
		a := c.Abandon(cl)
		if a != nil && a.Fail == nil && a.F.Type != wire.TypeGranted {
			return b.finishAcquire(c, cl, a, args) // W, X or B arrived first
		}
		if a != nil && a.F.Type == wire.TypeGranted {
			b.lateGrant(cl.Key, a.F.Token)
		}
		if a != nil && a.Fail != nil && a.Fail.ShuttingDown() {
			b.orphaned(cl.Key, cl.Owner, cl.Sent.Add(cl.Span)) // the connection left it to this caller
		}
		return nil, newOpError("acquire", cl.Key, true, nil,
			fmt.Sprintf("%v after the request was sent; a cancel was sent for it and a grant that arrives anyway is released in the background; do not enter the critical section", ctx.Err()),
			ctx.Err())
	case <-b.t.Closing():
		// Close cancels what it can still reach; a grant that arrives
		// anyway is released while Close drains.
		a := c.Abandon(cl)
		if a != nil {
			return b.finishAcquire(c, cl, a, args)
		}
		return nil, newOpError("acquire", cl.Key, true, nil,
			"outcome unknown: the broker was closed after the request was sent; a cancel was sent and a grant that arrives before the connection closes is released; do not enter the critical section",
			ErrClosed, &IndeterminateError{Key: cl.Key, Owner: cl.Owner})
	case <-timer.C:
		a := c.Abandon(cl)
		if a != nil {
			return b.finishAcquire(c, cl, a, args)
		}
		return nil, newOpError("acquire", cl.Key, true, nil,
			fmt.Sprintf("outcome unknown, the server %s sent no final answer within the wait plus %v although the connection is alive; a cancel was sent and a late grant is released in the background; do not enter the critical section",
				c.Addr(), c.AnswerGrace()),
			&IndeterminateError{Key: cl.Key, Owner: cl.Owner})
	}
}

func (b *Broker) finishAcquire(c *transport.Conn, cl *transport.Request, a *transport.Answer, args acquireArgs) (*Ticket, error) {
	key := cl.Key
	if a.Fail != nil && a.Fail.ShuttingDown() {
		if !b.isClosed() {
			return nil, errSendAgain
		}
		b.orphaned(key, cl.Owner, cl.Sent.Add(cl.Span)) // the connection left it to this caller
	}
	if a.Fail != nil {
		kinds := []error{&IndeterminateError{Key: key, Owner: cl.Owner}}
		msg := "outcome unknown, " + a.Fail.What() + " after the request was sent; do not enter the critical section"
		if a.Fail.Closed() {
			kinds = append(kinds, ErrClosed)
		} else {
			msg += "; once reconnected, the client asks the leader to end whatever this acquire's owner holds or waits for on the key (release by owner)"
		}
		e := newOpError("acquire", key, true, a.Fail.Cause, msg, kinds...)
		e.Hide = a.Fail.Explained()
		return nil, e
	}
	f := &a.F
	switch f.Type {
	case wire.TypeGranted:
		if b.isClosed() {
			// The caller could not release it once Close tears down.
			b.lateGrant(key, f.Token)
			return nil, newOpError("acquire", key, true, nil,
				fmt.Sprintf("granted token %d while the broker was closing; the ticket is being released; do not enter the critical section", f.Token),
				ErrClosed)
		}
		deadline := conservativeDeadline(cl.Sent, f.LeaseMs, f.QueuedMs)
		rem := time.Until(deadline)
		if rem <= 0 || rem < args.budget {
			b.lateGrant(key, f.Token)
			return nil, newOpError("acquire", key, true, nil,
				fmt.Sprintf("granted token %d with a %v lease after %v in the queue, but only %v of it conservatively remain, less than the work budget %v; the ticket is being released; do not enter the critical section",
					f.Token, time.Duration(f.LeaseMs)*time.Millisecond, time.Duration(f.QueuedMs)*time.Millisecond, max(rem, 0).Round(time.Millisecond), args.budget),
				ErrBudgetExceeded)
		}
		return &Ticket{b: b, key: key, token: f.Token, deadline: deadline,
			lease: time.Duration(f.LeaseMs) * time.Millisecond, queued: time.Duration(f.QueuedMs) * time.Millisecond}, nil
	case wire.TypeNotAcquired:
		if args.wait == 0 {
			return nil, newOpError("acquire", key, true, nil, "not acquired: the key is held or has waiters (one immediate attempt, wait 0)", ErrNotAcquired)
		}
		return nil, newOpError("acquire", key, true, nil,
			fmt.Sprintf("not acquired within the wait of %d s", args.wait), ErrNotAcquired)
	case wire.TypeCancelled:
		return nil, newOpError("acquire", key, true, nil, "not acquired: the server cancelled the request", ErrNotAcquired)
	case wire.TypeForbidden:
		return nil, permissionError(c, f, "acquire", key, "; not acquired")
	default: // B
		ce := &CapacityError{Addr: c.Addr(), Reason: CapacityReason(f.Reason)}
		e := newOpError("acquire", key, true, ce, fmt.Sprintf("not acquired: the server %s rejected it for capacity: %s", c.Addr(), ce.Reason), ErrCapacity)
		e.Hide = true
		return nil, e
	}
}
