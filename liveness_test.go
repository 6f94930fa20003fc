package ticketing

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Liveness of the client (issue 17): releases are never starved by waiting
// acquires, reconnects are bounded, one node cannot poison the broker, a
// stuck address costs little, every answer is bounded.

// Acquires waiting in a key's queue fill the acquire slots of the
// connection; the holder's release and a describe still go out at once,
// because they count against their own pool (docs/protocol.md).
func TestInFlight_WaitingAcquiresDoNotStarveRelease(t *testing.T) {
	const limit = 2
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{MaxInFlight: limit}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	waiters := make(chan error, limit)
	for range limit {
		go func() {
			w, err := b.Acquire(ctx, "k", 30*time.Second, 30*time.Second, 0)
			if err == nil {
				w.Release(ctx)
			}
			waiters <- err
		}()
	}
	waitUntil(t, "both waiters are queued at the server", func() bool {
		d, err := b.Describe(ctx, "k")
		return err == nil && d.Waiters == limit
	})
	// Every acquire slot is taken; neither call may wait for one.
	short, cancel := context.WithTimeout(ctx, patience/2)
	defer cancel()
	if _, err := b.Describe(short, "k"); err != nil {
		t.Fatalf("describe with every acquire slot taken: %v", err)
	}
	if err := tk.Release(short); err != nil {
		t.Fatalf("the holder's release with every acquire slot taken: %v", err)
	}
	for range limit {
		if err := <-waiters; err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
}

// A capacity reject (B) is a valid answer to a describe: it fails the
// describe with ErrCapacity and leaves the session and the acquire on it
// alone.
func TestDescribeCapacityRejectKeepsSession(t *testing.T) {
	r := newRec()
	acq := make(chan wire.Frame, 1)
	var conn atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		conn.Store(c)
		switch f.Type {
		case wire.TypeAcquire:
			c.Send(wire.Frame{Type: wire.TypeQueued, ID: f.ID, Count: 1})
			acq <- f
		case wire.TypeDescribe:
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityInFlight})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	got := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "k", 30*time.Second, 30*time.Second, 0)
		if err == nil && tk.Token() != 7 {
			err = errors.New("wrong token")
		}
		got <- err
	}()
	fa := <-acq
	_, err := b.Describe(ctx, "k")
	var ce *CapacityError
	if !errors.Is(err, ErrCapacity) || !errors.As(err, &ce) || ce.Reason != CapacityInFlight {
		t.Fatalf("describe answered B: %v, want ErrCapacity reason 4", err)
	}
	conn.Load().Send(wire.Frame{Type: wire.TypeGranted, ID: fa.ID, Token: 7, LeaseMs: 30000})
	if err := <-got; err != nil {
		t.Fatalf("the acquire on the same session: %v", err)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d sessions, want 1: the B ended the session", n)
	}
}

// A server that announces ping interval 0 sends no pings: the client pings
// it, and a server that then goes silent is given up (the call fails, the
// broker reconnects) instead of holding Describe(context.Background())
// forever.
func TestNoServerPings_ClientPingsAndGivesUpOnSilence(t *testing.T) {
	r := newRec()
	var frozen atomic.Bool
	frozen.Store(true)
	l := newLocks(t)
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NoPings: true}); err != nil {
			return
		}
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
			if !frozen.Load() {
				l.Handle(c, f)
			}
		}
	})
	b := connect(t, srv.Addr(), withCfg(func(c *config) { c.clientPing = 20 * time.Millisecond }))
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Describe(context.Background(), "k")
		done <- err
	}()
	r.wait(t, 1, isType(wire.TypePing)) // the client's own ping
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "sent nothing") {
			t.Fatalf("describe on a frozen server: %v, want ErrUnavailable saying the server went silent", err)
		}
	case <-time.After(patience):
		t.Fatal("a frozen server that sends no pings held Describe(context.Background()) without bound")
	}
	frozen.Store(false)
	waitUntil(t, "the broker reconnects", func() bool { return srv.Accepted() >= 2 })
	if _, err := b.Describe(ctx, "k"); err != nil {
		t.Fatalf("describe after the reconnect: %v", err)
	}
}

// A server that keeps the connection alive (pings) but never answers a
// describe or an admin status cannot hold the caller beyond the answer
// bound, whatever its context.
func TestDescribeAndAdminAnswersAreBounded(t *testing.T) {
	pinger := func(c *faketicketd.Conn) {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				c.Send(wire.Frame{Type: wire.TypePing, Nonce: 1})
			case <-c.Done():
				return
			}
		}
	}
	mute := func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		c.Send(faketicketd.Ready{Interval: 30 * time.Millisecond, Follower: h.Flags&wire.HelloAdmin != 0}.Frame())
		go pinger(c)
		for {
			if _, err := c.Read(); err != nil {
				return
			}
		}
	}
	srv := faketicketd.Start(t, mute)
	grace := withCfg(func(c *config) { c.answerGrace = 50 * time.Millisecond })
	b := connect(t, srv.Addr(), grace)
	bounded := func(what string, call func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-time.After(patience):
			t.Fatalf("%s: a server that never answers held the call without bound", what)
			return nil
		}
	}
	err := bounded("describe", func() error { _, err := b.Describe(context.Background(), "k"); return err })
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("describe never answered: %v, want ErrUnavailable", err)
	}
	a, err := DialAdmin(ctxFor(t), srv.Addr(), quiet, grace)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = bounded("status", func() error { _, err := a.Status(context.Background()); return err })
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("status never answered: %v, want ErrUnavailable", err)
	}
	err = bounded("members.remove", func() error { return a.RemoveMember(context.Background(), "n2") })
	if !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("members.remove never answered: %v, want ErrIndeterminate", err)
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("%d sessions, want 2 (the broker's and the admin's, both kept)", n)
	}
}

// A cluster-changing admin operation whose answer is lost may have been
// applied: it is ErrIndeterminate, not ErrUnavailable (which a tool would
// retry on another node). A lost status answer is ErrUnavailable.
func TestAdminLostAnswerIsIndeterminate(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{Follower: true}); err != nil {
			return
		}
		c.ReadType(wire.TypeAdmin) // then drop the connection, unanswered
	})
	ctx := ctxFor(t)
	ops := map[string]func(a *Admin) error{
		"members.add":     func(a *Admin) error { return a.AddMember(ctx, "n4", "127.0.0.1:7004") },
		"members.remove":  func(a *Admin) error { return a.RemoveMember(ctx, "n4") },
		"leader.transfer": func(a *Admin) error { _, err := a.TransferLeader(ctx, ""); return err },
		"status":          func(a *Admin) error { _, err := a.Status(ctx); return err },
	}
	for op, call := range ops {
		a, err := DialAdmin(ctx, srv.Addr(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		err = call(a)
		a.Close()
		if op == "status" {
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) {
				t.Errorf("%s, answer lost: %v, want ErrUnavailable", op, err)
			}
			continue
		}
		if !errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s, answer lost: %v, want ErrIndeterminate and not ErrUnavailable", op, err)
		}
		if !strings.Contains(err.Error(), "may or may not have been applied") {
			t.Errorf("%s: the message does not say the outcome is unknown: %v", op, err)
		}
	}
}

// countingHandler counts log records at Info and above.
type countingHandler struct{ n *atomic.Int32 }

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h countingHandler) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h countingHandler) WithGroup(string) slog.Handler                { return h }

// Two servers that each end the session with M naming the other (after
// the hello's Y, or instead of it): the broker follows at most maxFollows
// hints in a row, then backs off (so sessions per second are bounded by the
// backoff), and logs at most one line per second.
func TestReconnectStormBounded(t *testing.T) {
	for _, afterReady := range []bool{true, false} {
		name := "M after Y"
		if !afterReady {
			name = "M answering the hello"
		}
		t.Run(name, func(t *testing.T) { testReconnectStorm(t, afterReady) })
	}
}

func testReconnectStorm(t *testing.T, afterReady bool) {
	var addrA, addrB atomic.Value
	pingPong := func(other *atomic.Value) faketicketd.Handler {
		return func(c *faketicketd.Conn) {
			if afterReady {
				if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
					return
				}
			} else if _, err := c.Read(); err != nil {
				return
			}
			c.NotLeader(other.Load().(string))
		}
	}
	a := faketicketd.Start(t, pingPong(&addrB))
	bsrv := faketicketd.Start(t, pingPong(&addrA))
	addrA.Store(a.Addr())
	addrB.Store(bsrv.Addr())

	var mu sync.Mutex
	var atBackoff []int // sessions so far, at each backoff
	backedOff := make(chan struct{}, 100)
	var lines atomic.Int32
	start := time.Now()
	b, err := Connect(a.Addr(), WithLogger(slog.New(countingHandler{&lines})),
		withCfg(func(c *config) {
			c.backoffBase, c.backoffMax = time.Millisecond, 4*time.Millisecond
			c.onBackoff = func(time.Duration) {
				mu.Lock()
				atBackoff = append(atBackoff, a.Accepted()+bsrv.Accepted())
				mu.Unlock()
				select {
				case backedOff <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	deadline := time.After(patience)
	for range 5 {
		select {
		case <-backedOff:
		case <-deadline:
			t.Fatalf("the broker never backed off while two servers redirect to each other (%d sessions)", a.Accepted()+bsrv.Accepted())
		}
	}
	b.Close()
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	// Per backoff period: maxFollows hints plus the connection that named
	// the first one (after Y), or plus a round's own addresses (the listed
	// one and the last server that accepted a session).
	bound := b.maxFollows() + 1
	if !afterReady {
		bound = b.maxFollows() + len(b.addrs) + 1
	}
	prev := 0
	for i, n := range atBackoff[:5] {
		if n-prev > bound {
			t.Errorf("backoff %d: %d connections since the previous one, want at most %d", i+1, n-prev, bound)
		}
		prev = n
	}
	if max := 1 + int(elapsed/time.Second) + 1; int(lines.Load()) > max {
		t.Errorf("%d log lines at Info in %v, want at most one per second", lines.Load(), elapsed)
	}
}

// A node that refuses the hello (here: a different token set, then the
// connection limit) only moves the broker to the next address: calls wait
// for the connection to the leader instead of failing with that node's
// refusal.
func TestOneRefusingNodeDoesNotPoisonCalls(t *testing.T) {
	for name, refuse := range map[string]func(c *faketicketd.Conn){
		"token": func(c *faketicketd.Conn) { c.Error(wire.CodeUnauthenticated, "the client token is not accepted") },
		"connection limit": func(c *faketicketd.Conn) {
			c.Send(wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityConnections})
			c.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			refused := make(chan struct{}, 100)
			bad := faketicketd.Start(t, func(c *faketicketd.Conn) {
				if _, err := c.Read(); err == nil {
					refuse(c)
					refused <- struct{}{}
				}
			})
			gate := make(chan struct{})
			l := newLocks(t)
			serve := faketicketd.Serve(l, faketicketd.Ready{})
			good := faketicketd.Start(t, func(c *faketicketd.Conn) {
				select {
				case <-gate:
				case <-c.Done():
					return
				}
				serve(c)
			})
			b := connect(t, bad.Addr()+","+good.Addr())
			ctx := ctxFor(t)
			<-refused
			got := make(chan error, 1)
			go func() {
				tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
				if err == nil {
					err = tk.Release(ctx)
				}
				got <- err
			}()
			waitUntil(t, "the acquire waits for a connection (or failed)", func() bool {
				if len(got) > 0 {
					return true
				}
				return b.connWaiters.Load() > 0
			})
			if len(got) > 0 {
				t.Fatalf("acquire failed at once with one node's refusal: %v", <-got)
			}
			close(gate)
			if err := <-got; err != nil {
				t.Fatalf("acquire through the good node: %v", err)
			}
		})
	}
}

// When every listed node refuses for the same reason, that reason is
// returned promptly; when they refuse for different reasons, callers wait
// (until their context ends) for a node that accepts.
func TestRefusalReturnedOnlyWhenAllRefuseAlike(t *testing.T) {
	auth := func(c *faketicketd.Conn) {
		if _, err := c.Read(); err == nil {
			c.Error(wire.CodeUnauthenticated, "the client token is not accepted")
		}
	}
	limit := func(c *faketicketd.Conn) {
		c.Send(wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityConnections})
	}
	s1 := faketicketd.Start(t, auth)
	s2 := faketicketd.Start(t, auth)
	s3 := faketicketd.Start(t, limit)

	b := connect(t, s1.Addr()+","+s2.Addr())
	if err := b.WaitReady(ctxFor(t)); !errors.Is(err, ErrUnauthenticated) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("both nodes refuse the token: %v, want ErrUnauthenticated at once", err)
	}

	// The same TLS mismatch from two servers is the same reason, although
	// the messages name different addresses.
	_, cert := makeCA(t)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	t1 := faketicketd.Start(t, func(c *faketicketd.Conn) { c.Read() }, faketicketd.WithTLS(tlsCfg))
	t2 := faketicketd.Start(t, func(c *faketicketd.Conn) { c.Read() }, faketicketd.WithTLS(tlsCfg))
	b = connect(t, t1.Addr()+","+t2.Addr())
	if err := b.WaitReady(ctxFor(t)); err == nil || !strings.Contains(err.Error(), "uses TLS") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("both nodes use TLS, the client does not: %v, want that refusal at once", err)
	}

	b = connect(t, s1.Addr()+","+s3.Addr())
	waitUntil(t, "both nodes refused", func() bool { return s1.Accepted() > 2 && s3.Accepted() > 2 })
	ctx, cancel := context.WithTimeout(ctxFor(t), 100*time.Millisecond)
	defer cancel()
	err := b.WaitReady(ctx)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("nodes refusing for different reasons: %v, want to wait until the context ends", err)
	}
}

// An address that accepts TCP but never answers the hello costs a dial
// stagger, not the dial timeout: the broker reaches the good server within
// 1 s at the start and again after a drop.
func TestStuckAddressDoesNotDelayReconnect(t *testing.T) {
	stuck := faketicketd.Start(t, func(c *faketicketd.Conn) {
		c.Read()
		<-c.Done()
	})
	l := newLocks(t)
	var sessions sync.Map
	serve := faketicketd.Serve(l, faketicketd.Ready{})
	good := faketicketd.Start(t, func(c *faketicketd.Conn) {
		sessions.Store(c.Index, c)
		serve(c)
	})
	b := connect(t, stuck.Addr()+","+good.Addr())
	within := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.WaitReady(ctx); err != nil {
			t.Fatalf("%s: not connected to the good server within 1 s: %v", what, err)
		}
	}
	within("first connect")
	b.mu.Lock()
	first := b.cur
	b.mu.Unlock()
	c, _ := sessions.Load(0)
	c.(*faketicketd.Conn).Close() // drop the session
	<-first.done
	within("reconnect after a drop")
	if n := good.Accepted(); n != 2 {
		t.Errorf("%d sessions on the good server, want 2", n)
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

// Background releases are pipelined over the connection, not queued behind
// a fixed pool: 3,000 Ticket.Close calls against a server that answers each
// release after 10 ms all succeed.
func TestBackgroundReleasesPipelinedUnderBurst(t *testing.T) {
	const n = 3000
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeRelease {
			time.AfterFunc(10*time.Millisecond, func() { c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID}) })
		}
		return true
	}))
	o := newObserved()
	b := connect(t, srv.Addr(), o.option())
	if err := b.WaitReady(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		tk := &Ticket{b: b, key: "k", token: uint64(i + 1)}
		if err := tk.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	for i := range n {
		if got := o.wait(t, uint64(i+1)); got.err != nil {
			t.Fatalf("release of token %d: %v", i+1, got.err)
		}
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

// The work budget is rounded up to whole seconds like wait and lease: a
// grant with about 9.8 s of conservative time does not satisfy a 9.5 s
// budget (10 s rounded up).
func TestBudgetRoundedUp(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch f.Type {
		case wire.TypeAcquire:
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 3, LeaseMs: 10000})
		case wire.TypeRelease:
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 20*time.Second, 9500*time.Millisecond)
	if err == nil {
		tk.Release(ctx)
		t.Fatalf("a 9.5 s budget was met by %v of conservative time: it must count as 10 s", tk.Remaining())
	}
	if !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("acquire: %v, want ErrBudgetExceeded", err)
	}
}

// An address without a port means port 5225.
func TestAddressWithoutPortMeansDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":        "10.0.0.1:5225",
		"ticketd.example": "ticketd.example:5225",
		"[::1]":           "[::1]:5225",
		"::1":             "[::1]:5225",
		"10.0.0.1:7000":   "10.0.0.1:7000",
	} {
		got, err := parseAddrs(in)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("parseAddrs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// An empty, zero or out-of-range port, or a port without a host, is a
	// configuration error, not an address that fails at every dial.
	for _, in := range []string{"10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000", ":5225", "10.0.0.1:port"} {
		if got, err := parseAddrs(in); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("parseAddrs(%q) = %q, %v; want ErrInvalidArgument", in, got, err)
		}
	}
}

// fakeNet is a net.Conn for writer tests: it records every Write and the
// write deadline in force, and can fail writes.
type fakeNet struct {
	net.Conn
	mu        sync.Mutex
	writes    []int
	failWrite error
	wrote     chan struct{} // signalled after each Write
	reads     chan []byte   // what Read returns, in order
	readDL    chan struct{} // closed on the first SetReadDeadline after a failed write
	failed    bool
	dlOnce    sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newFakeNet() *fakeNet {
	return &fakeNet{wrote: make(chan struct{}, 1000), reads: make(chan []byte, 10),
		readDL: make(chan struct{}), closed: make(chan struct{})}
}

func (n *fakeNet) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer func() {
		n.mu.Unlock()
		n.wrote <- struct{}{}
	}()
	if n.failWrite != nil {
		n.failed = true
		return 0, n.failWrite
	}
	n.writes = append(n.writes, len(b))
	return len(b), nil
}

// Read returns the queued bytes, but only once the writer has failed and
// the client has set a read deadline afterwards (the drain), or the
// connection was closed.
func (n *fakeNet) Read(p []byte) (int, error) {
	select {
	case <-n.readDL:
	case <-n.closed:
		select {
		case b := <-n.reads:
			return copy(p, b), nil
		default:
		}
		return 0, net.ErrClosed
	}
	select {
	case b := <-n.reads:
		return copy(p, b), nil
	default:
		return 0, os.ErrDeadlineExceeded
	}
}

func (n *fakeNet) SetReadDeadline(time.Time) error {
	n.mu.Lock()
	failed := n.failed
	n.mu.Unlock()
	if failed {
		n.dlOnce.Do(func() { close(n.readDL) })
	}
	return nil
}
func (n *fakeNet) SetWriteDeadline(time.Time) error { return nil }
func (n *fakeNet) Close() error                     { n.closeOnce.Do(func() { close(n.closed) }); return nil }

func testConn(nc net.Conn) *conn {
	return &conn{nc: nc, addr: "fake", r: wire.NewReader(nc), interval: time.Hour, pending: make(map[uint32]*call),
		wsig: make(chan struct{}, 1), done: make(chan struct{})}
}

// A large coalesced batch is written in pieces of at most maxWrite bytes,
// each under its own write deadline.
func TestWriteSizeBoundedPerDeadline(t *testing.T) {
	n := newFakeNet()
	c := testConn(n)
	key := strings.Repeat("k", MaxKey)
	total := 0
	c.mu.Lock() // queue everything before the writer runs: one coalesced batch
	for total < 4<<20 {
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)}
		c.wbuf = wire.Append(c.wbuf, &f)
		total = len(c.wbuf)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go c.writeLoop(&wg)
	c.signal()
	waitUntil(t, "everything was written", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		sum := 0
		for _, w := range n.writes {
			sum += w
		}
		return sum == total
	})
	const bound = 256 << 10 // maxWrite
	n.mu.Lock()
	for i, w := range n.writes {
		if w > bound {
			t.Errorf("write %d: %d bytes under one deadline, want at most %d", i, w, bound)
		}
	}
	n.mu.Unlock()
	c.fail(&connFailure{kind: failClosed, addr: "fake"})
	wg.Wait()
}

// A final answer the server sent before the connection broke is not lost
// because the write side failed first: the reader drains what arrived.
func TestWriteErrorKeepsAnswersAlreadyReceived(t *testing.T) {
	n := newFakeNet()
	n.failWrite = errors.New("broken pipe")
	c := testConn(n)
	var wg sync.WaitGroup
	wg.Add(2)
	go c.readLoop(&wg)
	go c.writeLoop(&wg)
	// The server's answer to request id 1 has arrived, unread, when the
	// write fails.
	n.reads <- wire.Append(nil, &wire.Frame{Type: wire.TypeReleased, ID: 1})
	cl := newCall(wire.TypeRelease, "k")
	f := wire.Frame{Type: wire.TypeRelease, Token: 4, Key: []byte("k")}
	if err := c.start(context.Background(), cl, &f); err != nil || cl.id != 1 {
		t.Fatalf("start: id %d, %v", cl.id, err)
	}
	a := <-cl.res
	if a.fail != nil || a.f.Type != wire.TypeReleased {
		t.Fatalf("answer: %+v, want the R the server had sent", a)
	}
	<-c.done
	if fl := c.failureCause(); fl.kind != failDrop || !strings.Contains(fl.cause.Error(), "broken pipe") {
		t.Errorf("failure %+v, want the write error", fl)
	}
	wg.Wait()
}

// A server that goes silent (paused, or cut off without resets) still
// accepts TCP connections, so the reconnect after its session was given up
// tries the other servers first instead of spending a stagger on it
// (failover, issue 13).
func TestSilentServerIsDialedLast(t *testing.T) {
	silent := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if c.Index == 0 {
			c.AcceptHello(faketicketd.Ready{Interval: 20 * time.Millisecond})
		}
		<-c.Done() // then nothing: no pings, no answers
	})
	l := newLocks(t)
	good := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	// No parallel attempt: the order alone decides which server is dialed.
	b := connect(t, silent.Addr()+","+good.Addr(), withCfg(func(c *config) { c.dialStagger = time.Hour }))
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	first := b.cur
	b.mu.Unlock()
	if first.addr != silent.Addr() {
		t.Fatalf("first session on %s, want the first listed server", first.addr)
	}
	<-first.done // given up after 3 silent ping intervals
	waitUntil(t, "reconnected", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.cur != nil && b.cur != first
	})
	if n := good.Accepted(); n != 1 {
		t.Fatalf("%d sessions on the good server, want 1", n)
	}
	if n := silent.Accepted(); n != 1 {
		t.Errorf("the silent server was dialed again (%d connections) before the other one", n)
	}
}
