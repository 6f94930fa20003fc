package ticketing

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// ReleaseToken has Ticket.Release's outcomes: R is nil, N is ErrNotHeld
// (and never ends another grant), B is ErrCapacity.
func TestReleaseTokenOutcomes(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	owner := connect(t, srv.Addr())
	other := connect(t, srv.Addr()) // another process, knowing only key and token
	ctx := ctxFor(t)
	tk, err := owner.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.ReleaseToken(ctx, "k", tk.Token()); err != nil {
		t.Fatalf("ReleaseToken: %v", err)
	}
	if _, held := l.Holder("k"); held {
		t.Fatal("still held after R")
	}
	if err := other.ReleaseToken(ctx, "k", tk.Token()); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("released token: %v, want ErrNotHeld", err)
	}
	tk2, err := owner.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = other.ReleaseToken(ctx, "k", tk.Token())
	if !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "does not hold the key") {
		t.Fatalf("stale token: %v, want ErrNotHeld", err)
	}
	if tok, _ := l.Holder("k"); tok != tk2.Token() {
		t.Errorf("a stale release ended another grant")
	}
	// The ticket's own Release then still works: the same machinery.
	if err := tk2.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}

	full := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityInFlight})
		return true
	}))
	err = connect(t, full.Addr()).ReleaseToken(ctx, "k", 9)
	var ce *CapacityError
	if !errors.Is(err, ErrCapacity) || !errors.As(err, &ce) || ce.Reason != CapacityInFlight {
		t.Errorf("capacity reject: %v", err)
	}
}

// Arguments out of range are rejected before anything is sent, without
// waiting for a connection.
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

// The exact token is retried across reconnects within the bound.
func TestReleaseTokenRetriesExactTokenAcrossReconnect(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeRelease && c.Index < 2 {
			return false // lose the answer twice
		}
		c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		return true
	}))
	b := connect(t, srv.Addr())
	if err := b.ReleaseToken(ctxFor(t), "orders/7", 4242); err != nil {
		t.Fatalf("release across reconnects: %v", err)
	}
	var conns []*faketicketd.Conn
	for i := 1; i <= 3; i++ {
		x := r.wait(t, i, isType(wire.TypeRelease))
		if x.f.Token != 4242 || string(x.f.Key) != "orders/7" {
			t.Errorf("attempt %d: %+v", i, x.f)
		}
		conns = append(conns, x.conn)
	}
	if conns[0] == conns[1] || conns[1] == conns[2] {
		t.Errorf("attempts shared a connection")
	}
}

// With no final answer within the bound, ReleaseToken is an error (never
// success), whether the server stays silent or keeps dropping the
// connection; every attempt carried the exact token.
func TestReleaseTokenWithoutAnswerIsAnError(t *testing.T) {
	bound := withCfg(func(c *config) { c.releaseBound = 300 * time.Millisecond })
	// Connected first: the bound is for the release, not for connecting.
	ready := func(t *testing.T, srv *faketicketd.Server) *Broker {
		b := connect(t, srv.Addr(), bound)
		if err := b.WaitReady(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Run("silent", func(t *testing.T) {
		srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(*faketicketd.Conn, wire.Frame) bool { return true }))
		err := ready(t, srv).ReleaseToken(ctxFor(t), "k", 5)
		if !errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "outcome unknown") || !strings.Contains(err.Error(), "token 5") {
			t.Fatalf("got %v, want ErrIndeterminate", err)
		}
	})
	t.Run("dropping", func(t *testing.T) {
		r := newRec()
		srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(*faketicketd.Conn, wire.Frame) bool { return false }))
		err := ready(t, srv).ReleaseToken(ctxFor(t), "k", 6)
		if !errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "outcome unknown") {
			t.Fatalf("got %v, want ErrIndeterminate", err)
		}
		r.wait(t, 1, isType(wire.TypeRelease))
		if n := r.count(func(f wire.Frame) bool { return f.Type == wire.TypeRelease && f.Token != 6 }); n != 0 {
			t.Errorf("%d releases of another token", n)
		}
	})
}

// ReleaseToken without a connection is ErrUnavailable (not sent); on a
// closed broker it is ErrClosed.
func TestReleaseTokenUnavailableAndClosed(t *testing.T) {
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

// F6: N to a retry whose first attempt's answer was lost is
// ErrNotHeldAfterRetry (and still ErrNotHeld): the earlier attempt may be
// what released the ticket. N to a first attempt is a plain ErrNotHeld.
func TestReleaseNotHeldAfterLostAnswerIsDistinct(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type != wire.TypeRelease {
			return true
		}
		if f.Token == 1 && c.Index < 1 {
			return false // released, but the answer is lost with the connection
		}
		c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
		return true
	}))
	b := connect(t, srv.Addr())
	err := b.ReleaseToken(ctxFor(t), "k", 1)
	if !errors.Is(err, ErrNotHeldAfterRetry) || !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "earlier attempt") {
		t.Fatalf("N to a retry after a lost answer: %v, want ErrNotHeldAfterRetry and ErrNotHeld", err)
	}
	if n := r.count(isType(wire.TypeRelease)); n != 2 {
		t.Fatalf("%d releases were sent, want 2", n)
	}
	err = b.ReleaseToken(ctxFor(t), "k", 2)
	if !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHeldAfterRetry) {
		t.Fatalf("N to a first attempt: %v, want ErrNotHeld only", err)
	}
}
