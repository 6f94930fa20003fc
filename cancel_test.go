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

// Tests of cancellation (doc.go, "Cancellation"; docs/protocol.md, "Cancel").

// doc.go, "Cancellation": a context that ends before sending sends nothing.
func TestCancellation_BeforeSendSendsNothing(t *testing.T) {
	r := newRec()
	hello := make(chan struct{}, 10)
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		for { // record, never answer the hello: the broker never gets ready
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
			hello <- struct{}{}
		}
	})
	b := connect(t, srv.Addr())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(cancelled, "k", time.Second, time.Second, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	<-hello
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err := b.Acquire(short, "k", time.Second, time.Second, 0)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("deadline while not connected: %v", err)
	}
	if !strings.Contains(err.Error(), "not sent") {
		t.Errorf("message does not say the request was not sent: %v", err)
	}
	if n := r.count(isType(wire.TypeAcquire)); n != 0 {
		t.Errorf("%d acquires were sent", n)
	}
}

// doc.go, "Cancellation"; docs/protocol.md, "Cancel": a cancel after sending
// sends C for that acquire (id + owner), returns at once, releases a grant
// that arrives anyway, and leaves the other requests on the connection
// alone.
func TestCancellation_AfterSendSendsCancelAndReleasesLateGrant(t *testing.T) {
	r := newRec()
	l := newLocks(t)
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch {
		case f.Type == wire.TypeAcquire && string(f.Key) == "slow":
			// hold the answer until the cancel comes
		case f.Type == wire.TypeCancel:
			grant(c, wire.Frame{ID: f.ID, Lease: 30}, 777) // the grant races the cancel
		case f.Type == wire.TypeRelease && f.Token == 777:
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		default:
			l.Handle(c, f)
		}
		return true
	}))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option())
	ctx := ctxFor(t)

	// A second acquire, queued behind a holder, shares the connection.
	holder, err := b.Acquire(ctx, "busy", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "busy", 10*time.Second, 30*time.Second, 0)
		if err == nil {
			err = tk.Release(ctx)
		}
		otherDone <- err
	}()
	r.wait(t, 2, isAcquireOf("busy"))

	actx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := b.Acquire(actx, "slow", 10*time.Second, 30*time.Second, 0)
		res <- err
	}()
	a := r.wait(t, 1, isAcquireOf("slow"))
	cancel()
	err = <-res // returns without waiting for X
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "cancel was sent") {
		t.Errorf("message: %v", err)
	}
	cf := r.wait(t, 1, isType(wire.TypeCancel))
	if cf.f.ID != a.f.ID || cf.f.Owner != a.f.Owner {
		t.Errorf("cancel names id %d owner %x, the acquire was id %d owner %x", cf.f.ID, cf.f.Owner, a.f.ID, a.f.Owner)
	}
	rel := r.wait(t, 1, func(f wire.Frame) bool { return f.Type == wire.TypeRelease && f.Token == 777 })
	if string(rel.f.Key) != "slow" {
		t.Errorf("compensating release for key %q", rel.f.Key)
	}
	if got := o.wait(t, 777); got.err != nil || got.key != "slow" {
		t.Errorf("observer: %+v", got)
	}
	// The other request is unaffected: it is granted on the same connection.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err != nil {
		t.Errorf("the other acquire on the connection: %v", err)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d connections, the cancel must not end the session", n)
	}
}

// doc.go, "Cancellation" and and the in-flight limit: a caller waiting for a
// free slot has sent nothing, so cancelling it sends nothing.
func TestCancellation_WhileWaitingForInFlightSlot(t *testing.T) {
	r := newRec()
	held := make(chan wire.Frame, 10)
	var conn atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{MaxInFlight: 1}, func(c *faketicketd.Conn, f wire.Frame) bool {
		conn.Store(c)
		if f.Type == wire.TypeAcquire {
			held <- f
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	first := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "a", time.Second, 10*time.Second, 0)
		if err == nil {
			tk.Close()
		}
		first <- err
	}()
	fa := <-held
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := b.Acquire(cctx, "b", time.Second, 10*time.Second, 0)
		second <- err
	}()
	waitUntil(t, "the second acquire waits for a slot", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.t.Current() != nil && b.t.Current().SlotWaiters() == 1
	})
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("second acquire: %v", err)
	}
	conn.Load().Send(wire.Frame{Type: wire.TypeNotAcquired, ID: fa.ID})
	if err := <-first; !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("first acquire: %v", err)
	}
	// A third acquire takes the freed slot; the cancelled one never went out.
	third := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, "c", time.Second, 10*time.Second, 0)
		third <- err
	}()
	fc := <-held
	conn.Load().Send(wire.Frame{Type: wire.TypeNotAcquired, ID: fc.ID})
	<-third
	if n := r.count(isAcquireOf("b")); n != 0 {
		t.Errorf("the cancelled acquire was sent %d times", n)
	}
}
