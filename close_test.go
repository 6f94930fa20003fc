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
	"go.uber.org/goleak"
)

// Tests of Broker.Close: pending calls, grants arriving during Close,
// background releases, goroutines (doc.go, "Releasing").

// Broker.Close ends every pending call with ErrClosed.
func TestCloseMakesPendingCallsReturnErrClosed(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire && string(f.Key) == "held" {
			grant(c, f, 3)
		}
		return true // nothing else is ever answered
	}))
	// Close waits up to the release bound for what it can still reach.
	b := connect(t, srv.Addr(), withCfg(func(c *config) { c.releaseBound = 300 * time.Millisecond }))
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "held", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { _, err := b.Acquire(ctx, "pending", 10*time.Second, 10*time.Second, 0); errs <- err }()
	go func() { _, err := b.Describe(ctx, "pending"); errs <- err }()
	go func() { errs <- tk.Release(ctx) }()
	r.wait(t, 1, isAcquireOf("pending"))
	r.wait(t, 1, isType(wire.TypeDescribe))
	r.wait(t, 1, isType(wire.TypeRelease))
	b.Close()
	for range 3 {
		err := <-errs
		if strings.Contains(err.Error(), "release") && errors.Is(err, ErrIndeterminate) {
			continue // the release ran out its own bound while Close waited
		}
		if !errors.Is(err, ErrClosed) {
			t.Errorf("pending call: %v, want ErrClosed", err)
		} else if strings.Contains(err.Error(), "acquire") && !errors.Is(err, ErrIndeterminate) {
			t.Errorf("a sent acquire must also be indeterminate: %v", err)
		}
	}
	if _, err := b.Acquire(ctx, "after", time.Second, time.Second, 0); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "nothing was sent") {
		t.Errorf("Acquire after Close: %v", err)
	}
	if err := b.WaitReady(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitReady after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close wakes callers that wait for a connection that never comes.
func TestCloseWakesWaitReady(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) { c.Read() }) // never answers the hello
	b := connect(t, srv.Addr())
	done := make(chan error, 1)
	go func() { done <- b.WaitReady(context.Background()) }()
	waitUntil(t, "a hello was attempted", func() bool { return srv.Accepted() > 0 })
	b.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitReady: %v", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := faketicketd.NewLocks()
	srv, err := faketicketd.New(faketicketd.Serve(l, faketicketd.Ready{}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Connect(srv.Addr(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Close()
	b.Close()
	srv.Close()
	l.Close()
	if _, ok := l.Holder("k"); ok {
		t.Errorf("the queued background release did not run before Close returned")
	}
}

// Close releases what it can still reach: a grant that arrives for an
// acquire while Close drains is released, and the caller gets ErrClosed,
// not a ticket it could no longer release.
func TestCloseReleasesGrantsArrivingDuringClose(t *testing.T) {
	t.Run("pending acquire", func(t *testing.T) {
		r := newRec()
		srv, acq, conn := heldAcquires(t, r)
		b := connect(t, srv.Addr())
		ctx := ctxFor(t)
		got := make(chan error, 1)
		go func() {
			tk, err := b.Acquire(ctx, "k", 30*time.Second, 30*time.Second, 0)
			if err == nil {
				err = errors.New("got a ticket from a closing broker")
				tk.Release(ctx)
			}
			got <- err
		}()
		fa := <-acq
		closed := make(chan struct{})
		go func() { b.Close(); close(closed) }()
		waitUntil(t, "Close started", b.isClosed)
		conn.Load().Send(wire.Frame{Type: wire.TypeGranted, ID: fa.ID, Token: 5, LeaseMs: 30000})
		rel := r.wait(t, 1, isType(wire.TypeRelease))
		if rel.f.Token != 5 {
			t.Errorf("released token %d, want 5", rel.f.Token)
		}
		if err := <-got; !errors.Is(err, ErrClosed) {
			t.Errorf("acquire granted during Close: %v, want ErrClosed", err)
		}
		<-closed
	})
	t.Run("cancelled acquire", func(t *testing.T) {
		r := newRec()
		srv, acq, conn := heldAcquires(t, r)
		o := newObserved()
		b := connect(t, srv.Addr(), o.option())
		cctx, cancel := context.WithCancel(ctxFor(t))
		got := make(chan error, 1)
		go func() {
			_, err := b.Acquire(cctx, "k", 30*time.Second, 30*time.Second, 0)
			got <- err
		}()
		fa := <-acq
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v", err)
		}
		r.wait(t, 1, isType(wire.TypeCancel))
		closed := make(chan struct{})
		go func() { b.Close(); close(closed) }()
		waitUntil(t, "Close started", b.isClosed)
		conn.Load().Send(wire.Frame{Type: wire.TypeGranted, ID: fa.ID, Token: 6, LeaseMs: 30000})
		if rel := r.wait(t, 1, isType(wire.TypeRelease)); rel.f.Token != 6 {
			t.Errorf("released token %d, want 6", rel.f.Token)
		}
		if got := o.wait(t, 6); got.err != nil {
			t.Errorf("the late grant's release: %v", got.err)
		}
		<-closed
	})
}

// A late grant of a cancelled acquire that the reader has already taken off
// the pending table, but not yet handed to the releaser, when Close starts,
// is still released: Close's drain must not see "nothing pending, nothing
// running" in that moment, stop the releaser, and leave the grant held for
// its whole lease.
func TestCloseReleasesLateGrantBeingHandedOver(t *testing.T) {
	r := newRec()
	srv, acq, conn := heldAcquires(t, r)
	var armed atomic.Bool
	inWindow := make(chan struct{})
	proceed := make(chan struct{})
	hook := withCfg(func(c *config) {
		c.OnLateAnswer = func() {
			if armed.CompareAndSwap(true, false) {
				close(inWindow)
				<-proceed
			}
		}
	})
	o := newObserved()
	b := connect(t, srv.Addr(), o.option(), hook)
	cctx, cancel := context.WithCancel(ctxFor(t))
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(cctx, "k", 30*time.Second, 30*time.Second, 0)
		got <- err
	}()
	fa := <-acq
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	r.wait(t, 1, isType(wire.TypeCancel))

	armed.Store(true)
	conn.Load().Send(wire.Frame{Type: wire.TypeGranted, ID: fa.ID, Token: 6, LeaseMs: 30000})
	select {
	case <-inWindow: // the reader has the G, the releaser has not got it yet
	case <-time.After(patience):
		t.Fatal("the late grant never reached the reader")
	}
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	// Let the reader go on once Close has either given up on background
	// releases (the defect) or is waiting for this grant's release.
	waitUntil(t, "Close's drain waits, or the releaser is shut", func() bool {
		b.rel.mu.Lock()
		shut := b.rel.shut
		b.rel.mu.Unlock()
		return shut || b.drainWaits.Load() > 0
	})
	close(proceed)
	if got := o.wait(t, 6); got.err != nil {
		t.Errorf("the late grant's release: %v, want it released", got.err)
	}
	<-closed
	if n := r.count(func(f wire.Frame) bool { return f.Type == wire.TypeRelease && f.Token == 6 }); n != 1 {
		t.Errorf("%d releases of token 6 reached the server, want 1", n)
	}
}

// Broker.Close waits for queued background releases up to their own bound
// (ReleaseBound from Ticket.Close), not a shorter grace period.
func TestCloseWaitsForBackgroundReleasesWithinTheirBound(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeRelease {
			// A slow but healthy server: 1.5 s, within the 5 s bound.
			time.AfterFunc(1500*time.Millisecond, func() { c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID}) })
		}
		return true
	}))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option())
	if err := b.WaitReady(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	tk := &Ticket{b: b, key: "k", token: 9}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	r.wait(t, 1, isType(wire.TypeRelease))
	b.Close()
	if got := o.wait(t, 9); got.err != nil {
		t.Fatalf("background release during Close: %v, want success", got.err)
	}
}
