package ticketing

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Tests of connecting, finding the leader, reconnecting and backing off
// (doc.go, "Connections"; docs/protocol.md, "Finding the leader, reconnecting
// and backing off"): dial order, redirects and hints, refusals, bounded
// reconnect storms, configuration errors.

func TestConnectConfigErrors(t *testing.T) {
	for _, addrs := range []string{"", " , ", "a:b:c", "[a:1"} {
		if b, err := Connect(addrs); err == nil {
			b.Close()
			t.Errorf("Connect(%q) succeeded", addrs)
		} else if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Connect(%q): %v", addrs, err)
		}
	}
	if _, err := Connect("a:1", WithToken(strings.Repeat("t", 1025))); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("long token: %v", err)
	}
	for _, id := range []string{"n1", strings.Repeat("a", 31), strings.Repeat("0", 32), strings.Repeat("g", 32)} {
		if _, err := Connect("a:1", WithClusterID(id)); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "32 hex digits") {
			t.Errorf("cluster ID %q: %v", id, err)
		}
	}
	pinned, err := Connect("a:1", quiet, WithClusterID(strings.Repeat("Ab", 16)))
	if err != nil {
		t.Fatal(err)
	}
	if got := pinned.ClusterID(); got != strings.Repeat("ab", 16) {
		t.Errorf("ClusterID() of a client given one: %q", got)
	}
	pinned.Close()
	b, err := Connect(" 127.0.0.1:1 , 127.0.0.1:2 ", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.t.Addrs()) != 2 || b.t.Addrs()[1] != "127.0.0.1:2" {
		t.Errorf("addresses %q", b.t.Addrs())
	}
	b.Close()
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

// WithDialer: every connection is opened with the given function (the
// fault-testing harness dials from other network namespaces with it).
func TestWithDialerOpensEveryConnection(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	var dials atomic.Int32
	b := connect(t, srv.Addr(), WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		if network != "tcp" || addr != srv.Addr() {
			return nil, fmt.Errorf("dial %s %s", network, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}))
	tk, err := b.Acquire(ctxFor(t), "k", 0, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Release(ctxFor(t))
	if n := dials.Load(); n != 1 {
		t.Errorf("the dialer opened %d connections, want 1", n)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

// A server that goes silent (paused, or cut off without resets) still
// accepts TCP connections, so the reconnect after its session was given up
// tries the other servers first instead of spending a stagger on it
// (failover).
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
	b := connect(t, silent.Addr()+","+good.Addr(), withCfg(func(c *config) { c.DialStagger = time.Hour }))
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	first := b.t.Current()
	b.mu.Unlock()
	if first.Addr() != silent.Addr() {
		t.Fatalf("first session on %s, want the first listed server", first.Addr())
	}
	<-first.Done() // given up after 3 silent ping intervals
	waitUntil(t, "reconnected", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.t.Current() != nil && b.t.Current() != first
	})
	if n := good.Accepted(); n != 1 {
		t.Fatalf("%d sessions on the good server, want 1", n)
	}
	if n := silent.Accepted(); n != 1 {
		t.Errorf("the silent server was dialed again (%d connections) before the other one", n)
	}
}

// A hello answered with M and a hint sends the broker to that server.
func TestReconnectFollowsHelloRedirect(t *testing.T) {
	l := newLocks(t)
	leader := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{NodeID: "n2"}))
	follower := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err == nil {
			c.NotLeader(leader.Addr())
		}
	})
	b := connect(t, follower.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := l.Holder("k"); tok != tk.Token() {
		t.Errorf("not granted by the leader")
	}
	tk.Release(ctx)
}

// docs/protocol.md, "Finding the leader, reconnecting and backing off": an M
// with a hint sends the broker to the named leader.
func TestFindingTheLeader_ReconnectFollowsLeaderHint(t *testing.T) {
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

// A refused token is surfaced promptly by WaitReady and by calls; the broker
// keeps retrying and recovers once the server accepts it.
func TestAuthFailureSurfaced(t *testing.T) {
	var accept atomic.Bool
	l := newLocks(t)
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		if !accept.Load() && string(h.Text) != "good" {
			c.Error(wire.CodeUnauthenticated, "the client token is not accepted")
			return
		}
		c.Send(faketicketd.Ready{}.Frame())
		defer l.Drop(c)
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			l.Handle(c, f)
		}
	})
	b := connect(t, srv.Addr(), WithToken("bad"))
	ctx := ctxFor(t) // long: a prompt answer must not wait for it
	err := b.WaitReady(ctx)
	if !errors.Is(err, ErrUnauthenticated) || ctx.Err() != nil {
		t.Fatalf("WaitReady: %v, want ErrUnauthenticated", err)
	}
	var se *ServerError
	if !errors.As(err, &se) || se.Code != CodeUnauthenticated {
		t.Errorf("no ServerError code 5 in %v", err)
	}
	if !strings.Contains(err.Error(), "unauthenticated") || !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("message: %v", err)
	}
	_, err = b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("Acquire: %v, want ErrUnauthenticated (not sent)", err)
	}
	if c := retry.Classify(err); c.Retryable(true) {
		t.Errorf("an auth failure is classified %v", c)
	}
	accept.Store(true)
	waitUntil(t, "the broker recovers", func() bool { return b.WaitReady(ctx) == nil })
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Release(ctx)
}

// A server that has served a session speaks the protocol: when it later
// closes a connection without answering the hello (it stopped, or crashed,
// between accepting the connection and answering), that is a failed
// reconnect, not the refusal "this is another service". Calls keep waiting
// for the connection while their context allows, also when it is the only
// listed server.
func TestServerStoppingMidHelloIsNotAForeignPort(t *testing.T) {
	l := newLocks(t)
	serve := faketicketd.Serve(l, faketicketd.Ready{})
	var stopping atomic.Bool
	var closedOnce sync.Once
	closedSilently := make(chan struct{})
	var first atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if c.Index == 0 {
			first.Store(c)
			serve(c)
			return
		}
		if stopping.Load() {
			f, err := c.Read()
			if err == nil && f.Type == wire.TypeHello {
				c.Close() // the hello is never answered
				closedOnce.Do(func() { close(closedSilently) })
			}
			c.Close()
			return
		}
		serve(c)
	})
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	stopping.Store(true)
	first.Load().Close()
	<-closedSilently
	waitUntil(t, "the silent close is the broker's last connection error", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.t.Current() == nil && b.t.LastErr() != nil && strings.Contains(b.t.LastErr().Error(), "without answering the hello")
	})
	got := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "k", 0, 10*time.Second, 0)
		if err == nil {
			err = tk.Release(ctx)
		}
		got <- err
	}()
	waitUntil(t, "the acquire waits for a connection (or failed)", func() bool {
		return len(got) > 0 || b.t.ConnWaiters() > 0
	})
	if len(got) > 0 {
		t.Fatalf("acquire while the server restarts: %v; want it to wait for the connection", <-got)
	}
	stopping.Store(false) // the server is back
	if err := <-got; err != nil {
		t.Fatalf("acquire after the restart: %v", err)
	}
}

// A session that lasted more than a second resets the backoff: after it
// ends, the broker waits about the base delay again, not the grown one.
func TestBackoffResetsAfterAStableSession(t *testing.T) {
	var mu sync.Mutex
	var delays []time.Duration
	stableAt := -1 // index in delays of the first backoff after the stable session
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		if c.Index == 5 { // one session that outlives transport.StableSession
			select {
			case <-time.After(transport.StableSession + 200*time.Millisecond):
			case <-c.Done():
			}
			mu.Lock()
			stableAt = len(delays)
			mu.Unlock()
		}
		c.Close() // every other session ends at once
	})
	b, err := Connect(srv.Addr(), quiet, withCfg(func(c *config) {
		c.OnBackoff = func(d time.Duration) {
			mu.Lock()
			delays = append(delays, d)
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitUntil(t, "a backoff after the stable session", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return stableAt >= 0 && len(delays) > stableAt
	})
	mu.Lock()
	defer mu.Unlock()
	if before := delays[stableAt-1]; before < 200*time.Millisecond {
		t.Errorf("the 5th backoff in a row was %v, want at least 200 ms (25 ms doubled 4 times, jittered)", before)
	}
	if after := delays[stableAt]; after > 25*time.Millisecond {
		t.Errorf("after a session of more than %v the backoff was %v, want at most 25 ms (reset)", transport.StableSession, after)
	}
}

// countingHandler counts log records at Info and above.
type countingHandler struct{ n *atomic.Int32 }

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }

func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h countingHandler) WithGroup(string) slog.Handler { return h }

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
			c.BackoffBase, c.BackoffMax = time.Millisecond, 4*time.Millisecond
			c.OnBackoff = func(time.Duration) {
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
	bound := b.t.MaxFollows() + 1
	if !afterReady {
		bound = b.t.MaxFollows() + len(b.t.Addrs()) + 1
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
				return b.t.ConnWaiters() > 0
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
	first := b.t.Current()
	b.mu.Unlock()
	c, _ := sessions.Load(0)
	c.(*faketicketd.Conn).Close() // drop the session
	<-first.Done()
	within("reconnect after a drop")
	if n := good.Accepted(); n != 2 {
		t.Errorf("%d sessions on the good server, want 2", n)
	}
}
