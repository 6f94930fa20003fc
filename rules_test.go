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

// Rule 1: argument ranges, rounding up, rejection before sending.
func TestRule1_InvalidArgumentsRejectedBeforeSending(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, normal(newLocks(t))))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	s := time.Second
	cases := []struct {
		name                string
		key                 string
		wait, lease, budget time.Duration
	}{
		{"empty key", "", s, s, 0},
		{"key over 1024 bytes", strings.Repeat("k", 1025), s, s, 0},
		{"negative wait", "k", -1, s, 0},
		{"wait over 255 s after rounding up", "k", 255*s + 1, s, 0},
		{"zero lease", "k", 0, 0, 0},
		{"negative lease", "k", 0, -s, 0},
		{"lease over 250 s after rounding up", "k", 0, 250*s + time.Millisecond, 0},
		{"negative budget", "k", 0, s, -1},
		{"budget over the rounded lease", "k", 0, s / 2, 1500 * time.Millisecond},
		{"work over 250 s", "k", 0, 250 * s, 251 * s},
		// Issue 19 item 5: a budget no grant of that lease could ever
		// leave is refused before a token is spent on it.
		{"budget equal to the rounded lease", "k", 0, 2500 * time.Millisecond, 3 * s},
		{"budget above what the lease can leave", "k", 0, 30 * s, 29700 * time.Millisecond},
		// Issue 9 item 11: the budget rounds up like wait and lease.
		{"budget that rounds up past what the lease leaves", "k", 0, 10 * s, 9500 * time.Millisecond},
	}
	for _, c := range cases {
		tk, err := b.Acquire(ctx, c.key, c.wait, c.lease, c.budget)
		if !errors.Is(err, ErrInvalidArgument) || tk != nil {
			t.Errorf("%s: got %v, want ErrInvalidArgument", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), "nothing was sent") {
			t.Errorf("%s: the error does not say that nothing was sent: %v", c.name, err)
		}
		if errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotAcquired) {
			t.Errorf("%s: %v also matches another kind", c.name, err)
		}
	}
	if _, err := b.Describe(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Describe with an empty key: %v", err)
	}

	// Fractions round up; the boundaries are accepted; zero wait stays zero.
	tk, err := b.Acquire(ctx, "round", 1200*time.Millisecond, 2500*time.Millisecond, 1500*time.Millisecond)
	if err != nil {
		t.Fatalf("wait 1.2 s, lease 2.5 s, budget 1.5 s (2 s of a 3 s lease): %v", err)
	}
	tk.Release(ctx)
	first := r.wait(t, 1, isType(wire.TypeAcquire))
	if got := string(first.f.Key); got != "round" {
		t.Fatalf("an invalid acquire was sent: first acquire on the wire is for %q", got)
	}
	if first.f.Wait != 2 || first.f.Lease != 3 {
		t.Errorf("wait 1.2 s and lease 2.5 s went out as %d s and %d s, want 2 and 3", first.f.Wait, first.f.Lease)
	}
	tk, err = b.Acquire(ctx, strings.Repeat("x", 1024), 255*s, 250*s, 0)
	if err != nil {
		t.Fatalf("boundary values: %v", err)
	}
	tk.Release(ctx)
	tk, err = b.Acquire(ctx, "zero", 0, time.Nanosecond, 0)
	if err != nil {
		t.Fatalf("wait 0, lease 1 ns: %v", err)
	}
	tk.Release(ctx)
	z := r.wait(t, 1, isAcquireOf("zero"))
	if z.f.Wait != 0 || z.f.Lease != 1 {
		t.Errorf("wait 0 / lease 1 ns went out as %d s / %d s, want 0 / 1", z.f.Wait, z.f.Lease)
	}
	if n := r.count(isType(wire.TypeAcquire)); n != 3 {
		t.Errorf("%d acquires reached the server, want 3", n)
	}
}

// Rule 2: a lost final answer after a possible send is ErrIndeterminate, and
// the acquire is never re-sent.
func TestRule2_IndeterminateOnDrop(t *testing.T) {
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

// Rule 2: a server silent for 3 ping intervals is a dead connection.
func TestRule2_IndeterminateOnSilence(t *testing.T) {
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

// Rule 3: a context that ends before sending sends nothing.
func TestRule3_CancelBeforeSendSendsNothing(t *testing.T) {
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

// Rule 3: a cancel after sending sends C for that acquire (id + owner),
// returns at once, releases a grant that arrives anyway, and leaves the other
// requests on the connection alone.
func TestRule3_CancelAfterSendSendsCancelAndReleasesLateGrant(t *testing.T) {
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

// Rule 3 (and the in-flight limit): a caller waiting for a free slot has sent
// nothing, so cancelling it sends nothing.
func TestRule3_CancelWhileWaitingForInFlightSlot(t *testing.T) {
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
		return b.cur != nil && b.cur.slotWaiters.Load() == 1
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

// Rule 4: M, E and malformed, oversized, unknown or unexpected frames end the
// session; every acquire in flight on it is ErrIndeterminate; the broker
// reconnects for later calls.
func TestRule4_SessionFatalFramesMakeInFlightIndeterminate(t *testing.T) {
	cases := []struct {
		name  string
		fatal func(c *faketicketd.Conn)
		check func(t *testing.T, err error)
	}{
		{"M without hint", func(c *faketicketd.Conn) { c.NotLeader("") }, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "stopped being the leader") {
				t.Errorf("message: %v", err)
			}
		}},
		{"E internal", func(c *faketicketd.Conn) { c.Error(wire.CodeInternal, "disk on fire") }, func(t *testing.T, err error) {
			var se *ServerError
			if !errors.As(err, &se) || se.Code != CodeInternal || se.Message != "disk on fire" {
				t.Errorf("no ServerError with code 12 in %v", err)
			}
		}},
		{"E ping timeout", func(c *faketicketd.Conn) { c.Error(wire.CodePingTimeout, "no pong") }, func(t *testing.T, err error) {
			var se *ServerError
			if !errors.As(err, &se) || se.Code != CodePingTimeout {
				t.Errorf("no ServerError with code 9 in %v", err)
			}
		}},
		{"malformed frame", func(c *faketicketd.Conn) { c.SendRaw(faketicketd.Malformed) }, nil},
		{"oversized frame", func(c *faketicketd.Conn) { c.SendRaw(faketicketd.Oversized) }, nil},
		{"unknown frame", func(c *faketicketd.Conn) { c.SendRaw(faketicketd.Unknown) }, nil},
		{"answer for an unknown id", func(c *faketicketd.Conn) {
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: 999999})
		}, nil},
		{"server-only frame type from the server", func(c *faketicketd.Conn) {
			c.Send(wire.Frame{Type: wire.TypeHello, Version: 1})
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRec()
			l := newLocks(t)
			srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
				if c.Index > 0 {
					faketicketd.Serve(l, faketicketd.Ready{})(c)
					return
				}
				script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
					if r.count(isType(wire.TypeAcquire)) == 2 {
						tc.fatal(c)
					}
					return true
				})(c)
			})
			b := connect(t, srv.Addr())
			ctx := ctxFor(t)
			errs := make(chan error, 2)
			for _, k := range []string{"a", "b"} {
				go func() {
					_, err := b.Acquire(ctx, k, 5*time.Second, 10*time.Second, 0)
					errs <- err
				}()
			}
			for range 2 {
				err := <-errs
				if !errors.Is(err, ErrIndeterminate) {
					t.Fatalf("got %v, want ErrIndeterminate", err)
				}
				if !strings.Contains(err.Error(), "do not enter the critical section") {
					t.Errorf("message: %v", err)
				}
				if tc.check != nil {
					tc.check(t, err)
				}
			}
			tk, err := b.Acquire(ctx, "later", time.Second, 10*time.Second, 0)
			if err != nil {
				t.Fatalf("a later call after reconnecting: %v", err)
			}
			tk.Release(ctx)
		})
	}
}

// Rule 4: an M with a hint sends the broker to the named leader.
func TestRule4_ReconnectFollowsLeaderHint(t *testing.T) {
	l := newLocks(t)
	second := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{NodeID: "n2"}))
	first := faketicketd.Start(t, script(nil, faketicketd.Ready{NodeID: "n1"}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire {
			c.NotLeader(second.Addr())
			return false
		}
		return true
	}))
	b := connect(t, first.Addr())
	ctx := ctxFor(t)
	_, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), second.Addr()) {
		t.Fatalf("got %v, want ErrIndeterminate naming the new leader", err)
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr != second.Addr() {
		t.Errorf("no NotLeaderError with the hint in %v", err)
	}
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatalf("after the hint: %v", err)
	}
	if tok, ok := l.Holder("k"); !ok || tok != tk.Token() {
		t.Errorf("the ticket was not granted by the second server")
	}
	tk.Release(ctx)
}

// Rule 5: B is final, returned at once, never retried.
func TestRule5_CapacityRejectIsFinalAndNotRetried(t *testing.T) {
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

// Rule 7: the conservative deadline formula.
func TestRule7_ConservativeDeadlineFormula(t *testing.T) {
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

// Rule 7: the deadline is measured from the send, not from the G's arrival,
// and credits the server-reported queue time.
func TestRule7_DeadlineMeasuredFromSend(t *testing.T) {
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

// Rule 7: a grant whose conservative remainder is below the budget is
// released and reported as ErrBudgetExceeded.
func TestRule7_GrantTooLateForBudgetIsReleased(t *testing.T) {
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

// Rule 8: Close releases in the background and reports the outcome; Close
// after Release is a no-op; Release after Close returns the background result.
func TestRule8_CloseReleasesInBackground(t *testing.T) {
	r := newRec()
	l := newLocks(t)
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, normal(l)))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := o.wait(t, tk.Token()); got.err != nil || got.key != "k" {
		t.Errorf("observer: %+v", got)
	}
	if err := tk.Release(ctx); err != nil {
		t.Errorf("Release after Close: %v, want the background result (nil)", err)
	}
	if err := tk.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	tk2, err := b.Acquire(ctx, "k2", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tk2.Close(); err != nil {
		t.Errorf("Close after Release: %v", err)
	}
	b.Describe(ctx, "k2") // orders after anything Close might have sent
	if n := r.count(func(f wire.Frame) bool { return f.Type == wire.TypeRelease && string(f.Key) == "k2" }); n != 1 {
		t.Errorf("%d releases of k2 were sent, want 1", n)
	}
	if n := o.len(); n != 1 {
		t.Errorf("the observer saw %d reports, want 1 (Close after Release is a no-op)", n)
	}
}

// Rule 8: background releases are bounded in number; beyond the bound the
// release is dropped and reported; Broker.Close waits for the outstanding
// ones, each within its own bound.
func TestRule8_FullQueueDropsAndReports(t *testing.T) {
	r := newRec()
	var token atomic.Uint64
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire {
			grant(c, f, token.Add(1))
		}
		return true // never answer a release
	}))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option(), WithReleaseQueue(3), withCfg(func(c *config) {
		c.releaseBound = 200 * time.Millisecond
	}))
	ctx := ctxFor(t)
	var tks []*Ticket
	for _, k := range []string{"a", "b", "c", "d"} {
		tk, err := b.Acquire(ctx, k, time.Second, 30*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		tks = append(tks, tk)
	}
	for _, tk := range tks[:3] {
		if err := tk.Close(); err != nil {
			t.Fatalf("Close within the bound: %v", err)
		}
	}
	r.wait(t, 3, isType(wire.TypeRelease)) // all three were sent at once
	err := tks[3].Close()
	if !errors.Is(err, ErrReleaseDropped) {
		t.Fatalf("fourth Close: %v, want ErrReleaseDropped", err)
	}
	if got := o.wait(t, tks[3].Token()); !errors.Is(got.err, ErrReleaseDropped) {
		t.Errorf("observer for the dropped release: %v", got.err)
	}
	if err := tks[3].Release(ctx); !errors.Is(err, ErrReleaseDropped) {
		t.Errorf("Release after a dropped Close: %v", err)
	}
	b.Close()
	for _, tk := range tks[:3] {
		if got := o.wait(t, tk.Token()); !errors.Is(got.err, ErrIndeterminate) {
			t.Errorf("token %d: %v, want ErrIndeterminate (sent, never answered)", tk.Token(), got.err)
		}
	}
}

// Rule 9: W is ErrNotAcquired, distinct from every other outcome.
func TestRule9_NotAcquiredIsDistinct(t *testing.T) {
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
