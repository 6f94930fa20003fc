package ticketing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the outcomes of a release (docs/protocol.md, "Release" and
// "`R` Released", "`N` NotHeld"; doc.go on Ticket.Release and
// Broker.ReleaseToken). Both calls share one machinery and promise the same
// outcomes, so every case runs against both.

// releaseCall is one of the two ways to release: Ticket.Release of a ticket
// the server granted with the token, or Broker.ReleaseToken of the key and
// token alone.
type releaseCall struct {
	name string
	// prepare does what the call needs before it can release key/token on b
	// (acquire the ticket, which the server grants with token) and returns
	// the release.
	prepare func(t *testing.T, b *Broker, key string, token uint64) func() error
}

var releaseCalls = []releaseCall{
	{"Ticket.Release", func(t *testing.T, b *Broker, key string, token uint64) func() error {
		tk, err := b.Acquire(ctxFor(t), key, time.Second, 10*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Token() != token {
			t.Fatalf("granted token %d, the script grants %d", tk.Token(), token)
		}
		return func() error {
			err := tk.Release(ctxFor(t))
			// A second Release waits for and returns the first outcome,
			// except after a release of which nothing was sent.
			if !wasUnsent(err) {
				if err2 := tk.Release(ctxFor(t)); err2 != err {
					t.Errorf("second Release: %v, want the first result %v", err2, err)
				}
			}
			return err
		}
	}},
	{"Broker.ReleaseToken", func(t *testing.T, b *Broker, key string, token uint64) func() error {
		return func() error { return b.ReleaseToken(ctxFor(t), key, token) }
	}},
}

// TestReleaseOutcomes: R is nil, N is ErrNotHeld (ErrNotHeldAfterRetry when
// an earlier attempt's answer was lost), B is ErrCapacity; a lost answer is
// retried with the exact token on a new connection; no final answer within
// ReleaseBound is ErrIndeterminate (never success), whether the server stays
// silent or keeps dropping the connection. Every release on the wire carries
// the exact key and token.
func TestReleaseOutcomes(t *testing.T) {
	const key, token = "orders/7", 4242
	cases := []struct {
		name string
		// answer handles a release (c.Index is the connection's number);
		// false drops the connection.
		answer func(c *faketicketd.Conn, f wire.Frame) bool
		check  func(t *testing.T, err error)
		// sends is the number of releases the server must have seen, on
		// as many distinct connections; 0: at least one.
		sends int
	}{
		{"R is success", func(c *faketicketd.Conn, f wire.Frame) bool {
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
			return true
		}, func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
		}, 1},
		{"N is ErrNotHeld", func(c *faketicketd.Conn, f wire.Frame) bool {
			c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			return true
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHeldAfterRetry) || errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "does not hold the key") {
				t.Fatalf("got %v, want only ErrNotHeld", err)
			}
		}, 1},
		// F6 (docs/reliability.md): N to a retry whose first attempt's answer
		// was lost is ErrNotHeldAfterRetry (and still ErrNotHeld): the earlier
		// attempt may be what released the ticket.
		{"N after a lost answer is ErrNotHeldAfterRetry", func(c *faketicketd.Conn, f wire.Frame) bool {
			if c.Index < 1 {
				return false // released, but the answer is lost with the connection
			}
			c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			return true
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotHeldAfterRetry) || !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "earlier attempt") {
				t.Fatalf("got %v, want ErrNotHeldAfterRetry and ErrNotHeld", err)
			}
		}, 2},
		{"B is ErrCapacity", func(c *faketicketd.Conn, f wire.Frame) bool {
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityInFlight})
			return true
		}, func(t *testing.T, err error) {
			var ce *CapacityError
			if !errors.Is(err, ErrCapacity) || !errors.As(err, &ce) || ce.Reason != CapacityInFlight || errors.Is(err, ErrIndeterminate) {
				t.Fatalf("got %v, want ErrCapacity with reason %d", err, CapacityInFlight)
			}
		}, 1},
		{"lost answers retried with the exact token across reconnects", func(c *faketicketd.Conn, f wire.Frame) bool {
			if c.Index < 2 {
				return false // lose the answer twice
			}
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
			return true
		}, func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("release across reconnects: %v", err)
			}
		}, 3},
		{"no answer within the bound, silent", func(*faketicketd.Conn, wire.Frame) bool {
			return true
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "outcome unknown") || !strings.Contains(err.Error(), "token 4242") {
				t.Fatalf("got %v, want ErrIndeterminate naming the token", err)
			}
		}, 0},
		{"no answer within the bound, dropping", func(*faketicketd.Conn, wire.Frame) bool {
			return false
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "outcome unknown") {
				t.Fatalf("got %v, want ErrIndeterminate", err)
			}
		}, 0},
	}
	for _, call := range releaseCalls {
		for _, tc := range cases {
			t.Run(call.name+"/"+tc.name, func(t *testing.T) {
				r := newRec()
				srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
					switch f.Type {
					case wire.TypeAcquire:
						grant(c, f, token)
						return true
					case wire.TypeRelease:
						return tc.answer(c, f)
					}
					return true
				}))
				b := connect(t, srv.Addr(), withCfg(func(c *config) { c.releaseBound = 300 * time.Millisecond }))
				// Connected first: the bound is for the release, not for connecting.
				if err := b.WaitReady(ctxFor(t)); err != nil {
					t.Fatal(err)
				}
				release := call.prepare(t, b, key, token)
				tc.check(t, release())
				want := max(tc.sends, 1)
				r.wait(t, want, isType(wire.TypeRelease))
				conns := map[*faketicketd.Conn]bool{}
				for i := 1; i <= want; i++ {
					x := r.wait(t, i, isType(wire.TypeRelease))
					conns[x.conn] = true
				}
				if len(conns) != want {
					t.Errorf("%d releases went over %d connections, want one each", want, len(conns))
				}
				if tc.sends > 0 {
					if n := r.count(isType(wire.TypeRelease)); n != tc.sends {
						t.Errorf("%d releases were sent, want %d", n, tc.sends)
					}
				}
				if n := r.count(func(f wire.Frame) bool {
					return f.Type == wire.TypeRelease && (f.Token != token || string(f.Key) != key)
				}); n != 0 {
					t.Errorf("%d releases of another key or token", n)
				}
			})
		}
	}
}

// TestReleaseOfAStaleTokenNeverEndsAnotherGrant: against the fake server's
// lock table, a release of a token that no longer holds the key is
// ErrNotHeld and the current holder keeps the key.
func TestReleaseOfAStaleTokenNeverEndsAnotherGrant(t *testing.T) {
	for _, call := range []string{"Ticket.Release", "Broker.ReleaseToken"} {
		t.Run(call, func(t *testing.T) {
			l := newLocks(t)
			srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
			b := connect(t, srv.Addr())
			ctx := ctxFor(t)
			tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, held := l.Holder("k"); held {
				t.Fatal("still held after R")
			}
			tk2, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			if call == "Ticket.Release" {
				stale := &Ticket{b: b, key: "k", token: tk.Token()}
				err = stale.Release(ctx)
			} else {
				err = connect(t, srv.Addr()).ReleaseToken(ctx, "k", tk.Token())
			}
			if !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrIndeterminate) {
				t.Fatalf("stale token: got %v, want ErrNotHeld", err)
			}
			if tok, _ := l.Holder("k"); tok != tk2.Token() {
				t.Errorf("a stale release ended another grant")
			}
			if err := tk2.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
}

// TestReleaseWithoutConnectionIsUnavailable: with no connection to be had
// within the bound, the release is ErrUnavailable and says it was not sent.
func TestReleaseWithoutConnectionIsUnavailable(t *testing.T) {
	for _, call := range releaseCalls {
		t.Run(call.name, func(t *testing.T) {
			var first atomic.Pointer[faketicketd.Conn]
			srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
				if c.Index > 0 {
					return // refuse: close at once
				}
				first.Store(c)
				script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
					if f.Type == wire.TypeAcquire {
						grant(c, f, 8)
					}
					return true
				})(c)
			})
			b := connect(t, srv.Addr(), withCfg(func(c *config) { c.releaseBound = 200 * time.Millisecond }))
			if err := b.WaitReady(ctxFor(t)); err != nil {
				t.Fatal(err)
			}
			release := call.prepare(t, b, "k", 8)
			first.Load().Close()
			waitUntil(t, "the broker noticed the drop", func() bool {
				b.mu.Lock()
				defer b.mu.Unlock()
				return b.t.Current() == nil
			})
			err := release()
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "not sent") {
				t.Fatalf("got %v, want ErrUnavailable (not sent)", err)
			}
		})
	}
}

// TestReleaseTokenInvalidArguments: arguments out of range are rejected
// before anything is sent, without waiting for a connection.
func TestReleaseTokenInvalidArguments(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool { return true }))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	for _, tc := range []struct {
		key   string
		token uint64
		want  string
	}{
		{"", 1, "the key is 0 bytes"},
		{strings.Repeat("k", MaxKey+1), 1, "the key is 1025 bytes"},
		{"k", 0, "token 0"},
	} {
		err := b.ReleaseToken(ctx, tc.key, tc.token)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was sent") {
			t.Errorf("ReleaseToken(%d-byte key, %d): %v", len(tc.key), tc.token, err)
		}
	}
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.count(isType(wire.TypeRelease)); n != 0 {
		t.Errorf("%d releases were sent", n)
	}
	// Without any server it still answers at once.
	nobody := connect(t, "127.0.0.1:1")
	if err := nobody.ReleaseToken(ctx, "", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no server: %v", err)
	}
}

// TestReleaseTokenNeverConnectedAndClosed: ReleaseToken on a broker that
// never got a connection is ErrUnavailable (not sent); on a closed broker
// it is ErrClosed.
func TestReleaseTokenNeverConnectedAndClosed(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {}) // closes every connection at once
	b := connect(t, srv.Addr(), withCfg(func(c *config) { c.releaseBound = 200 * time.Millisecond }))
	err := b.ReleaseToken(ctxFor(t), "k", 3)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("no connection: %v, want ErrUnavailable (not sent)", err)
	}
	b.Close()
	if err := b.ReleaseToken(ctxFor(t), "k", 3); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed broker: %v", err)
	}
}

// TestReleaseWaitsThroughRefusedReconnect: a release retries its exact
// token across reconnects for ReleaseBound. A refusal of the reconnect that
// does not go away by itself in the broker's eyes but is transient in fact
// (here the server's connection limit, B reason 5, from the only listed
// server) is one more failed reconnect: the release waits for the
// connection within its bound instead of giving up at once and leaving the
// ticket held for its whole lease.
func TestReleaseWaitsThroughRefusedReconnect(t *testing.T) {
	l := newLocks(t)
	serve := faketicketd.Serve(l, faketicketd.Ready{})
	var refusing atomic.Bool
	var refusedOnce sync.Once
	refused := make(chan struct{})
	var first atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if c.Index == 0 {
			first.Store(c)
			serve(c)
			return
		}
		if refusing.Load() {
			c.Send(wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityConnections})
			c.Close()
			refusedOnce.Do(func() { close(refused) })
			return
		}
		serve(c)
	})
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	refusing.Store(true)
	first.Load().Close() // the session drops; the reconnect meets the limit
	<-refused
	waitUntil(t, "the refusal is the broker's answer to calls", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.t.Current() == nil && b.t.RefusedByAll() != nil
	})
	got := make(chan error, 1)
	go func() { got <- tk.Release(ctx) }()
	waitUntil(t, "the release waits for a connection (or returned)", func() bool {
		return len(got) > 0 || b.t.ConnWaiters() > 0
	})
	if len(got) > 0 {
		err := <-got
		t.Fatalf("release during a refused reconnect: %v; want it to wait for the connection within ReleaseBound", err)
	}
	refusing.Store(false) // the server has room again
	if err := <-got; err != nil {
		t.Fatalf("release after the reconnect: %v, want it released", err)
	}
	if _, held := l.Holder("k"); held {
		t.Error("the key is still held after Release returned nil")
	}
}

// A Release of which nothing was sent (its context had ended) leaves the
// ticket releasable: the deferred Close of the README's pattern still sends
// the release, instead of leaving the key held for its whole lease.
func TestUnsentReleaseLeavesTheTicketToClose(t *testing.T) {
	r := newRec()
	l := newLocks(t)
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, normal(l)))
	obs := newObserved()
	b := connect(t, srv.Addr(), obs.option())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "request-scoped", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel() // the request's context ended before the release
	if err := tk.Release(done); err == nil || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("Release with an ended context: %v, want a not-sent error", err)
	}
	if n := r.count(isType(wire.TypeRelease)); n != 0 {
		t.Fatalf("%d releases reached the server from an ended context", n)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if got := obs.wait(t, tk.Token()); got.err != nil {
		t.Fatalf("the deferred Close did not release the ticket: %v", got.err)
	}
	r.wait(t, 1, isType(wire.TypeRelease))
}

// doc.go, "Releasing": Close releases in the background and reports the
// outcome; Close after Release is a no-op; Release after Close returns the
// background result.
func TestReleasing_CloseReleasesInBackground(t *testing.T) {
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

// doc.go, "Releasing": background releases are bounded in number; beyond the
// bound the release is dropped and reported; Broker.Close waits for the
// outstanding ones, each within its own bound.
func TestReleasing_FullQueueDropsAndReports(t *testing.T) {
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
