package ticketing

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of one session: how it ends, pings, request ids and the in-flight
// limits (docs/protocol.md, "How a connection ends", "Pings", "Order, frames
// and request ids").

// Many goroutines share one broker and one connection; the server's grants
// are exclusive and tokens grow per key (the fencing check).
func TestManyGoroutinesOneBroker(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	keys := []string{"k0", "k1", "k2", "k3"}
	var inUse [4]atomic.Int32
	var mu sync.Mutex
	var high [4]uint64
	var grants atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				k := (g + i) % len(keys)
				tk, err := b.Acquire(ctx, keys[k], 10*time.Second, 30*time.Second, time.Second)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if inUse[k].Add(1) != 1 {
					t.Errorf("two holders of %s", keys[k])
				}
				mu.Lock()
				if tk.Token() <= high[k] {
					t.Errorf("token %d for %s not above the high-water mark %d", tk.Token(), keys[k], high[k])
				}
				high[k] = tk.Token()
				mu.Unlock()
				inUse[k].Add(-1)
				grants.Add(1)
				if i%2 == 0 {
					if err := tk.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
				} else {
					tk.Close()
				}
			}
		}()
	}
	wg.Wait()
	if grants.Load() != 32*20 {
		t.Errorf("%d grants", grants.Load())
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d connections, want 1 shared connection", n)
	}
}

// However a session ends — an M without a hint, a bare EOF or a TCP reset —
// the client does the same (docs/protocol.md, "How a connection ends"): a
// pending acquire is indeterminate and is ended by owner (U) on the next
// connection; a pending release is sent again, with the exact token, on the
// next connection. (E 11, a stopping server, is the exception for acquires:
// TestShutdownSendsPendingAcquireAgain.)
func TestConnectionEndsAreHandledAlike(t *testing.T) {
	ends := map[string]func(c *faketicketd.Conn){
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

// A stopping server's E 11 ends the session with an acquire and a release
// pending: the acquire is sent again on the next connection with the same
// owner, and its grant there is the outcome (no release by owner is sent);
// the release is retried with its exact token.
func TestShutdownSendsPendingAcquireAgain(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		pending := 0
		script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
			switch {
			case f.Type == wire.TypeAcquire && string(f.Key) == "held":
				grant(c, f, 41)
			case c.Index == 0 && (f.Type == wire.TypeAcquire || f.Type == wire.TypeRelease):
				if pending++; pending == 2 {
					c.Error(wire.CodeShuttingDown, "the server is shutting down")
					return false
				}
			case f.Type == wire.TypeAcquire:
				grant(c, f, 42)
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
	acq := make(chan *Ticket, 1)
	acqErr := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "a", 5*time.Second, 10*time.Second, 0)
		acq <- tk
		acqErr <- err
	}()
	sentA := r.wait(t, 1, func(f wire.Frame) bool { return f.Type == wire.TypeAcquire && string(f.Key) == "a" })
	relErr := make(chan error, 1)
	go func() { relErr <- tk.Release(ctx) }()
	got := <-acq
	if err := <-acqErr; err != nil || got.Token() != 42 {
		t.Fatalf("acquire pending at E 11: %v, %v; want it sent again and granted token 42", got, err)
	}
	again := r.wait(t, 2, func(f wire.Frame) bool { return f.Type == wire.TypeAcquire && string(f.Key) == "a" })
	if again.conn.Index == 0 || again.f.Owner != sentA.f.Owner || again.f.Wait > sentA.f.Wait {
		t.Errorf("acquire sent again %+v on connection %d, want the same owner, at most the first wait, on a new connection", again.f, again.conn.Index)
	}
	if err := <-relErr; err != nil {
		t.Fatalf("release pending at E 11: %v, want it retried and answered R", err)
	}
	if n := r.count(isType(wire.TypeReleaseOwner)); n != 0 {
		t.Errorf("%d releases by owner after E 11, want none: the acquire sent again has the outcome", n)
	}
}

// docs/protocol.md, "How a connection ends": M, E and malformed, oversized,
// unknown or unexpected frames end the session; every acquire in flight on
// it is ErrIndeterminate; the broker reconnects for later calls.
func TestConnectionEnds_SessionFatalFramesMakeInFlightIndeterminate(t *testing.T) {
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
	c.SetLastID(math.MaxUint32 - 1)
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

func TestPingAnsweredWithPong(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		c.Send(wire.Frame{Type: wire.TypePing, Nonce: 42})
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
		}
	})
	connect(t, srv.Addr())
	o := r.wait(t, 1, isType(wire.TypePong))
	if o.f.Nonce != 42 {
		t.Errorf("pong nonce %d", o.f.Nonce)
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
	b := connect(t, srv.Addr(), withCfg(func(c *config) { c.ClientPing = 20 * time.Millisecond }))
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

// The Y frame's in-flight limit is never exceeded; callers wait for a slot.
func TestInFlightLimitRespected(t *testing.T) {
	const limit = 2
	var mu sync.Mutex
	var outstanding []wire.Frame
	violations := 0
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{MaxInFlight: limit}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type != wire.TypeAcquire {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		outstanding = append(outstanding, f)
		if len(outstanding) > limit {
			violations++
		}
		if len(outstanding) == limit { // answer only when the client is at its limit
			for _, a := range outstanding {
				c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: a.ID})
			}
			outstanding = outstanding[:0]
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Acquire(ctx, "k"+string(rune('a'+i)), time.Second, 10*time.Second, 0); !errors.Is(err, ErrNotAcquired) {
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if violations > 0 {
		t.Errorf("the client exceeded the in-flight limit %d times", violations)
	}
}

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
