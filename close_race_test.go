package ticketing

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

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
		c.onLateAnswer = func() {
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
