package ticketing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// However a session ends — E 11, an M without a hint, a bare EOF or a TCP
// reset — the client does the same (docs/protocol.md, "How a connection
// ends"): a pending acquire is indeterminate and is ended by owner (U) on
// the next connection; a pending release is sent again, with the exact
// token, on the next connection.
func TestConnectionEndsAreHandledAlike(t *testing.T) {
	ends := map[string]func(c *faketicketd.Conn){
		"E 11":      func(c *faketicketd.Conn) { c.Error(wire.CodeShuttingDown, "the server is shutting down") },
		"empty M":   func(c *faketicketd.Conn) { c.NotLeader("") },
		"EOF":       func(c *faketicketd.Conn) { c.Close() },
		"TCP reset": func(c *faketicketd.Conn) { c.Reset() },
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			r := newRec()
			srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
				pending := 0
				script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
					switch {
					case f.Type == wire.TypeAcquire && string(f.Key) == "held":
						grant(c, f, 41)
					case c.Index == 0 && (f.Type == wire.TypeAcquire || f.Type == wire.TypeRelease):
						// No answer; once both are pending, end the session.
						if pending++; pending == 2 {
							end(c)
							return false
						}
					case f.Type == wire.TypeRelease:
						c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
					case f.Type == wire.TypeReleaseOwner:
						c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
					}
					return true
				})(c)
			})
			b := connect(t, srv.Addr())
			ctx := ctxFor(t)
			tk, err := b.Acquire(ctx, "held", 0, 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			acqErr := make(chan error, 1)
			go func() {
				_, err := b.Acquire(ctx, "a", 5*time.Second, 10*time.Second, 0)
				acqErr <- err
			}()
			sentA := r.wait(t, 1, func(f wire.Frame) bool { return f.Type == wire.TypeAcquire && string(f.Key) == "a" })
			relErr := make(chan error, 1)
			go func() { relErr <- tk.Release(ctx) }()

			err = <-acqErr
			var ie *IndeterminateError
			if !errors.Is(err, ErrIndeterminate) || !errors.As(err, &ie) || ie.Key != "a" || ie.Owner != [16]byte(sentA.f.Owner) {
				t.Fatalf("pending acquire after %s: %v, want ErrIndeterminate with key a and the owner sent", name, err)
			}
			if err := <-relErr; err != nil {
				t.Fatalf("pending release after %s: %v, want it retried and answered R", name, err)
			}
			u := r.wait(t, 1, isType(wire.TypeReleaseOwner))
			if u.conn.Index == 0 || string(u.f.Key) != "a" || u.f.Owner != sentA.f.Owner {
				t.Errorf("after %s: U %+v on connection %d, want key a, the acquire's owner, a new connection", name, u.f, u.conn.Index)
			}
			l2 := r.wait(t, 2, isType(wire.TypeRelease))
			if l2.conn.Index == 0 || l2.f.Token != 41 || string(l2.f.Key) != "held" {
				t.Errorf("after %s: release again %+v on connection %d, want token 41 on a new connection", name, l2.f, l2.conn.Index)
			}
		})
	}
}

// The client never uses request id 0, which B reserves for "connection
// refused": its id counter skips 0 when it wraps.
func TestRequestIDZeroNeverUsed(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeDescribe {
			c.Send(wire.Frame{Type: wire.TypeInfo, ID: f.ID})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := b.getConn(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.nextID = math.MaxUint32 - 1
	c.mu.Unlock()
	for i := 0; i < 3; i++ {
		if _, err := b.Describe(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []uint32{math.MaxUint32, 1, 2} {
		if got := r.wait(t, i+1, isType(wire.TypeDescribe)).f.ID; got != want {
			t.Errorf("describe %d went out with id %d, want %d", i+1, got, want)
		}
	}
}

// The reconnect backoff protocol.md describes: the n-th delay is uniform in
// [d/2, d], d = 25 ms doubled n-1 times, at most DefaultBackoffMax (500 ms).
func TestBackoffIsJitteredExponential(t *testing.T) {
	cfg, err := newConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{cfg: cfg}
	for n := 1; n <= 10; n++ {
		d := min(25*time.Millisecond<<(n-1), DefaultBackoffMax)
		lo, hi := d, time.Duration(0)
		for range 500 {
			got := b.backoff(n)
			lo, hi = min(lo, got), max(hi, got)
		}
		if lo < d/2 || hi > d {
			t.Errorf("backoff(%d) ranged over [%v, %v], want within [%v, %v]", n, lo, hi, d/2, d)
		}
		if hi-lo < d/4 { // 500 uniform draws cover most of the range
			t.Errorf("backoff(%d) ranged over [%v, %v] only: not jittered over [%v, %v]", n, lo, hi, d/2, d)
		}
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
		if c.Index == 5 { // one session that outlives stableSession
			select {
			case <-time.After(stableSession + 200*time.Millisecond):
			case <-c.Done():
			}
			mu.Lock()
			stableAt = len(delays)
			mu.Unlock()
		}
		c.Close() // every other session ends at once
	})
	b, err := Connect(srv.Addr(), quiet, withCfg(func(c *config) {
		c.onBackoff = func(d time.Duration) {
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
		t.Errorf("after a session of more than %v the backoff was %v, want at most 25 ms (reset)", stableSession, after)
	}
}

// The order of one round of connection attempts: the leader named by the
// last M, the last server that accepted a session, then the configured
// addresses in order, each once.
func TestDialOrder(t *testing.T) {
	b := &Broker{addrs: []string{"a:1", "b:1", "c:1"}}
	cases := []struct {
		hint, last, dead string
		want             []string
	}{
		{"", "", "", []string{"a:1", "b:1", "c:1"}},
		{"", "c:1", "", []string{"c:1", "a:1", "b:1"}},
		{"b:1", "c:1", "", []string{"b:1", "c:1", "a:1"}},
		{"x:1", "b:1", "", []string{"x:1", "b:1", "a:1", "c:1"}},
		{"a:1", "a:1", "", []string{"a:1", "b:1", "c:1"}},
		// The server that just went silent is tried last, unless named.
		{"", "a:1", "a:1", []string{"b:1", "c:1", "a:1"}},
		{"", "c:1", "a:1", []string{"c:1", "b:1", "a:1"}},
		{"a:1", "a:1", "a:1", []string{"a:1", "b:1", "c:1"}},
	}
	for _, c := range cases {
		b.lastGood, b.lastDead = c.last, c.dead
		if got := b.dialOrder(c.hint); !slices.Equal(got, c.want) {
			t.Errorf("hint %q, last %q, dead %q: order %v, want %v", c.hint, c.last, c.dead, got, c.want)
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
