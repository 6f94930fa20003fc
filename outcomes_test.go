package ticketing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Tests of an acquire's outcomes and of the errors' kinds, texts and retry
// classes (doc.go, "Outcomes").

// doc.go, "Outcomes" (ErrIndeterminate): a lost final answer after a
// possible send is ErrIndeterminate, and the acquire is never re-sent.
func TestOutcomes_IndeterminateOnDrop(t *testing.T) {
	r := newRec()
	l := newLocks(t)
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire && string(f.Key) == "orders/42" {
			return false // read the request, then drop the connection
		}
		return normal(l)(c, f)
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "orders/42", time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrIndeterminate) || tk != nil {
		t.Fatalf("got %v, want ErrIndeterminate", err)
	}
	for _, kind := range []error{ErrNotAcquired, ErrCapacity, ErrClosed, ErrInvalidArgument} {
		if errors.Is(err, kind) {
			t.Errorf("%v also matches %v", err, kind)
		}
	}
	msg := err.Error()
	for _, want := range []string{`acquire "orders/42"`, "outcome unknown", srv.Addr(), "was lost", "do not enter the critical section"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// The broker reconnects for later calls, and the lost acquire was not re-sent.
	tk, err = b.Acquire(ctx, "other", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatalf("acquire after reconnecting: %v", err)
	}
	tk.Release(ctx)
	if n := r.count(isAcquireOf("orders/42")); n != 1 {
		t.Errorf("the indeterminate acquire reached the server %d times, want 1", n)
	}
	if srv.Accepted() < 2 {
		t.Errorf("no reconnect")
	}
}

// doc.go, "Outcomes" (ErrIndeterminate); docs/protocol.md, "Pings": a server
// silent for 3 ping intervals is a dead connection.
func TestOutcomes_IndeterminateOnSilence(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{Interval: 20 * time.Millisecond}); err != nil {
			return
		}
		for { // read everything, answer nothing, never ping
			if _, err := c.Read(); err != nil {
				return
			}
		}
	})
	b := connect(t, srv.Addr())
	_, err := b.Acquire(ctxFor(t), "k", 5*time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("got %v, want ErrIndeterminate", err)
	}
	if !strings.Contains(err.Error(), "sent nothing for") {
		t.Errorf("message does not explain the silence: %v", err)
	}
}

// doc.go, "Outcomes" (ErrCapacity): B is final, returned at once, never
// retried.
func TestOutcomes_CapacityRejectIsFinalAndNotRetried(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch f.Type {
		case wire.TypeAcquire:
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityKeyWaiters})
		case wire.TypeDescribe:
			c.Send(wire.Frame{Type: wire.TypeInfo, ID: f.ID})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	_, err := b.Acquire(ctx, "k", 5*time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrCapacity) || errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotAcquired) {
		t.Fatalf("got %v, want only ErrCapacity", err)
	}
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Reason != CapacityKeyWaiters {
		t.Errorf("no CapacityError with reason 2 in %v", err)
	}
	if !strings.Contains(err.Error(), "waiters") {
		t.Errorf("message: %v", err)
	}
	// A describe round trip on the same connection orders after any retry.
	if _, err := b.Describe(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if n := r.count(isType(wire.TypeAcquire)); n != 1 {
		t.Errorf("the acquire was sent %d times", n)
	}
}

// doc.go, "Outcomes" (ErrNotAcquired): W is ErrNotAcquired, distinct from
// every other outcome.
func TestOutcomes_NotAcquiredIsDistinct(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release(ctx)
	for _, wait := range []time.Duration{0, time.Second} {
		_, err = b.Acquire(ctx, "k", wait, 30*time.Second, 0)
		if !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("wait %v: got %v, want ErrNotAcquired", wait, err)
		}
		for _, other := range []error{ErrIndeterminate, ErrCapacity, ErrBudgetExceeded, ErrInvalidArgument, ErrClosed, ErrNotHeld, ErrUnavailable} {
			if errors.Is(err, other) {
				t.Errorf("ErrNotAcquired also matches %v", other)
			}
		}
	}
	if !strings.Contains(err.Error(), "not acquired within the wait of 1 s") {
		t.Errorf("message: %v", err)
	}
}

// Error texts stay readable: a 1,025-byte key is not printed whole, and
// durations are given in seconds, the unit of the protocol and the docs.
func TestErrorTextsShortKeysAndSeconds(t *testing.T) {
	b := connect(t, "127.0.0.1:1") // nothing is sent for invalid arguments
	ctx := ctxFor(t)
	_, err := b.Acquire(ctx, strings.Repeat("k", 1025), 0, time.Second, 0)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long key: %v", err)
	}
	if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "(1025 bytes)") {
		t.Errorf("long key: the message is %d bytes or does not give the key's length: %s", len(msg), msg)
	}
	_, err = b.Acquire(ctx, "k", 0, 5*time.Minute, 0)
	if msg := err.Error(); !strings.Contains(msg, "lease 300 s is 300 s rounded up, longer than the maximum 250 s") {
		t.Errorf("long lease: %s", msg)
	}
}

func TestRetryClasses(t *testing.T) {
	cases := []struct {
		err  error
		want retry.Class
	}{
		{newOpError("acquire", "k", true, &CapacityError{Reason: CapacityHeld}, "x", ErrCapacity), retry.Overloaded},
		{&CapacityError{Reason: CapacityHeld}, retry.Overloaded},
		{newOpError("acquire", "k", true, nil, "x", ErrIndeterminate), retry.Undetermined},
		{newOpError("describe", "k", true, nil, "x", ErrUnavailable), retry.TransportUnavailable},
		{transport.WaitFailed(context.DeadlineExceeded, nil), retry.Timeout},
		{connectError("acquire", "k", true, transport.WaitFailed(context.DeadlineExceeded, nil)), retry.TransportUnavailable},
		{newOpError("acquire", "k", true, nil, "x", ErrNotAcquired), retry.NonRetryable},
		{invalidArg("acquire", "k", true, "x"), retry.InvalidArgument},
		{newOpError("release", "k", true, nil, "x", ErrNotHeld), retry.NonRetryable},
		{newOpError("acquire", "k", true, nil, "x", ErrIndeterminate, ErrClosed), retry.NonRetryable},
		{newOpError("acquire", "k", true, nil, "x", context.Canceled), retry.Canceled},
	}
	for _, c := range cases {
		if got := retry.Classify(c.err); got != c.want {
			t.Errorf("%v: class %v, want %v", c.err, got, c.want)
		}
	}
	if !retry.Undetermined.Retryable(true) || retry.Undetermined.Retryable(false) {
		t.Errorf("indeterminate errors must be retried only when idempotent")
	}
}
