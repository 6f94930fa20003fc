package ticketing

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the conservative deadline and the ticket's context (doc.go, "The
// conservative deadline"; docs/protocol.md, "The client's deadline").

// doc.go, "The conservative deadline": the conservative deadline formula.
func TestConservativeDeadline_Formula(t *testing.T) {
	sent := time.Now()
	cases := []struct {
		lease, queued uint32
		want          time.Duration
	}{
		{30000, 0, 29700*time.Millisecond - ClockDriftMargin},
		{30000, 10000, 39600*time.Millisecond - ClockDriftMargin},
		{1000, 0, 990*time.Millisecond - ClockDriftMargin},
		{0, 0, -ClockDriftMargin},
	}
	for _, c := range cases {
		got := conservativeDeadline(sent, c.lease, c.queued).Sub(sent)
		if got != c.want {
			t.Errorf("lease %d ms queued %d ms: %v, want %v", c.lease, c.queued, got, c.want)
		}
		// Never later than the earliest possible server end: the lease
		// starts no earlier than sent + queued, and runs for lease ms.
		if server := time.Duration(c.lease+c.queued) * time.Millisecond; got > server {
			t.Errorf("deadline %v after the server's %v", got, server)
		}
	}
}

// doc.go, "The conservative deadline": the deadline is measured from the
// send, not from the G's arrival, and credits the server-reported queue
// time.
func TestConservativeDeadline_MeasuredFromSend(t *testing.T) {
	var recv, granted atomic.Int64
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire {
			recv.Store(time.Now().UnixNano())
			time.AfterFunc(150*time.Millisecond, func() { // the scripted queueing delay
				now := time.Now()
				granted.Store(now.UnixNano())
				q := uint32(now.Sub(time.Unix(0, recv.Load())) / time.Millisecond)
				c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 1, LeaseMs: 10000, QueuedMs: q})
			})
		}
		if f.Type == wire.TypeRelease {
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	tk, err := b.Acquire(ctx, "k", 5*time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	serverEnd := time.Unix(0, granted.Load()).Add(10 * time.Second)
	if !tk.Deadline().Before(serverEnd) {
		t.Errorf("deadline %v is not before the server's end of lease %v", tk.Deadline(), serverEnd)
	}
	// deadline = sent + (lease + queued)·0.99 − margin with before ≤ sent ≤ recv.
	span := time.Duration(float64(10*time.Second+tk.Queued())*0.99) - ClockDriftMargin
	if lo, hi := before.Add(span), time.Unix(0, recv.Load()).Add(span); tk.Deadline().Before(lo) || tk.Deadline().After(hi.Add(time.Millisecond)) {
		t.Errorf("deadline %v outside [%v, %v]: not measured from the send", tk.Deadline(), lo, hi)
	}
	if tk.Queued() == 0 || tk.Remaining() <= 0 {
		t.Errorf("queued %v remaining %v", tk.Queued(), tk.Remaining())
	}
}

// doc.go, "The conservative deadline": a grant whose conservative remainder
// is below the budget is released and reported as ErrBudgetExceeded.
func TestConservativeDeadline_GrantTooLateForBudgetIsReleased(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch f.Type {
		case wire.TypeAcquire: // the server grants far less than asked
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 99, LeaseMs: 1000})
		case wire.TypeRelease:
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}
		return true
	}))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 2*time.Second)
	if !errors.Is(err, ErrBudgetExceeded) || tk != nil || errors.Is(err, ErrNotAcquired) {
		t.Fatalf("got %v, want ErrBudgetExceeded", err)
	}
	if !strings.Contains(err.Error(), "work budget") || !strings.Contains(err.Error(), "do not enter") {
		t.Errorf("message: %v", err)
	}
	rel := r.wait(t, 1, isType(wire.TypeRelease))
	if rel.f.Token != 99 || string(rel.f.Key) != "k" {
		t.Errorf("released %d/%q, want the exact token 99", rel.f.Token, rel.f.Key)
	}
	if got := o.wait(t, 99); got.err != nil {
		t.Errorf("observer: %v", got.err)
	}
}

// A ticket's context ends at the conservative deadline, with a cause that
// names the ticket.
func TestTicketContextEndsAtTheConservativeDeadline(t *testing.T) {
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire {
			// A 400 ms lease: the conservative deadline is about 300 ms
			// after the send.
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 7, LeaseMs: 400})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "job", 0, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	work, cancel := tk.Context(ctx)
	defer cancel()
	// Not later than the conservative deadline: the lease may end at the
	// server soon after it (waiting for Done alone would not tell).
	if dl, ok := work.Deadline(); !ok || !dl.Equal(tk.Deadline()) {
		t.Errorf("the ticket's context has deadline %v (set %v), want the ticket's deadline %v", dl, ok, tk.Deadline())
	}
	select {
	case <-work.Done():
	case <-time.After(patience):
		t.Fatal("the ticket's context was not done after its deadline")
	}
	if !errors.Is(work.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, want context.DeadlineExceeded", work.Err())
	}
	if c := context.Cause(work); !errors.Is(c, ErrTicketExpired) || !strings.Contains(c.Error(), "token 7") {
		t.Errorf("Cause = %v, want ErrTicketExpired naming token 7", c)
	}
	if time.Now().Before(tk.Deadline()) {
		t.Errorf("the context ended before the ticket's deadline")
	}
}

// Release (and Close) end every context of the ticket at once, including
// one taken after the release started; the parent is not affected.
func TestTicketContextEndsAtRelease(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, normal(l)))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	for _, how := range []string{"Release", "Close"} {
		tk, err := b.Acquire(ctx, "job-"+how, 0, 30*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		work, cancel := tk.Context(ctx)
		defer cancel()
		if work.Err() != nil {
			t.Fatalf("%s: the context is done before the release: %v", how, work.Err())
		}
		if how == "Release" {
			if err := tk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			tk.Close()
		}
		select {
		case <-work.Done():
		default:
			t.Fatalf("%s: the ticket's context is not done once the release started", how)
		}
		if c := context.Cause(work); !errors.Is(c, ErrTicketReleased) {
			t.Errorf("%s: Cause = %v, want ErrTicketReleased", how, c)
		}
		late, cancelLate := tk.Context(ctx)
		if !errors.Is(context.Cause(late), ErrTicketReleased) {
			t.Errorf("%s: a context taken after the release is not done with ErrTicketReleased: %v", how, context.Cause(late))
		}
		cancelLate()
		if ctx.Err() != nil {
			t.Fatalf("%s: the parent context ended", how)
		}
	}
}
