package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

func expect(t *testing.T, f wire.Frame, typ wire.Type) wire.Frame {
	t.Helper()
	if f.Type != typ {
		t.Fatalf("got %s %+v (text %q), want %s", f.Type, f, f.Text, typ)
	}
	return f
}

func TestAcquireReleaseExactToken(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
	if g.LeaseMs != 30000 || g.QueuedMs != 0 {
		t.Fatalf("grant lease %d ms queued %d ms, want 30000 and 0", g.LeaseMs, g.QueuedMs)
	}
	// A stale (wrong) token never releases the current grant.
	expect(t, r.Final(r.Release("k", g.Token+1)), wire.TypeNotHeld)
	expect(t, r.Final(r.Release("k", g.Token-1)), wire.TypeNotHeld)
	expect(t, r.Final(r.Release("other", g.Token)), wire.TypeNotHeld)
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	// Released once; the same token again is not held.
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeNotHeld)
	// The next grant has a larger token.
	g2 := expect(t, r.Final(r.Acquire("k", testcluster.Owner(2), 0, 30)), wire.TypeGranted)
	if g2.Token <= g.Token {
		t.Fatalf("second token %d not above first %d", g2.Token, g.Token)
	}
}

func TestReleaseFromAnotherConnection(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
	a.Conn.Close() // the grant is not tied to its connection
	b := testcluster.Hello(t, c.Addr(0), "")
	expect(t, b.Final(b.Release("k", g.Token)), wire.TypeReleased)
}

func TestWaitZeroNeverQueues(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
	// Held: one immediate attempt, answered W without a Q.
	id := r.Acquire("k", testcluster.Owner(2), 0, 30)
	f := r.Recv()
	if f.Type != wire.TypeNotAcquired || f.ID != id {
		t.Fatalf("wait 0 on a held key: got %s for %d, want W for %d", f.Type, f.ID, id)
	}
	// With a waiter queued, wait 0 still does not queue (nor jump the queue).
	wid := r.Acquire("k", testcluster.Owner(3), 10, 30)
	expect(t, r.Recv(), wire.TypeQueued)
	id = r.Acquire("k", testcluster.Owner(4), 0, 30)
	if f := r.Recv(); f.Type != wire.TypeNotAcquired || f.ID != id {
		t.Fatalf("wait 0 behind a waiter: got %s for %d", f.Type, f.ID)
	}
	_ = wid
}

func TestFIFOUnderContention(t *testing.T) {
	c := testcluster.Start(t, 1)
	holder := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, holder.Final(holder.Acquire("k", testcluster.Owner(0), 0, 60)), wire.TypeGranted)
	const n = 8
	waiters := make([]*testcluster.Raw, n)
	ids := make([]uint32, n)
	for i := range waiters {
		// Each waiter on its own connection, enqueued strictly one after another.
		waiters[i] = testcluster.Hello(t, c.Addr(0), "")
		ids[i] = waiters[i].Acquire("k", testcluster.Owner(i+1), 30, 60)
		q := expect(t, waiters[i].Recv(), wire.TypeQueued)
		if q.Count != uint32(i+1) {
			t.Fatalf("waiter %d queued at position %d, want %d", i, q.Count, i+1)
		}
	}
	last := g.Token
	release := func(r *testcluster.Raw, tok uint64) {
		expect(t, r.Final(r.Release("k", tok)), wire.TypeReleased)
	}
	release(holder, g.Token)
	for i := range waiters {
		gi := expect(t, waiters[i].Final(ids[i]), wire.TypeGranted)
		if gi.Token <= last {
			t.Fatalf("waiter %d token %d not above %d", i, gi.Token, last)
		}
		last = gi.Token
		// The key is this waiter's, and everyone behind it still waits:
		// nobody was granted out of order.
		d := describe(t, holder, "k")
		if d.Flags != 1 || d.Token != gi.Token || d.Owner != testcluster.Owner(i+1) || d.Count != uint32(n-1-i) {
			t.Fatalf("after waiter %d's grant: holder token %d owner %x, %d waiting; want token %d owner %x, %d waiting",
				i, d.Token, d.Owner, d.Count, gi.Token, testcluster.Owner(i+1), n-1-i)
		}
		release(waiters[i], gi.Token)
	}
}

func TestLeaseExpiryGrantsNextWaiter(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	start := time.Now()
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 1)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	id := w.Acquire("k", testcluster.Owner(2), 30, 30)
	g2 := expect(t, w.Final(id), wire.TypeGranted)
	if g2.Token <= g.Token {
		t.Fatalf("token after expiry %d not above %d", g2.Token, g.Token)
	}
	// The lease never ends before its full length after the grant.
	if el := time.Since(start); el < time.Second {
		t.Fatalf("next waiter granted %v after the 1 s grant: the lease ended early", el)
	}
	if g2.QueuedMs < 500 {
		t.Fatalf("queued %d ms, want about a second", g2.QueuedMs)
	}
	// The expired token no longer releases anything.
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeNotHeld)
}

func TestWaitRunsOut(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	start := time.Now()
	id := r.Acquire("k", testcluster.Owner(2), 1, 30)
	f := expect(t, r.Final(id), wire.TypeNotAcquired)
	if el := time.Since(start); el < time.Second || f.QueuedMs < 900 {
		t.Fatalf("W after %v (queued %d ms): before the 1 s wait ran out", el, f.QueuedMs)
	}
}

func TestDuplicateOwner(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	o := testcluster.Owner(1)
	g := expect(t, r.Final(r.Acquire("k", o, 0, 30)), wire.TypeGranted)
	// The same owner again: the same grant, not a second one.
	g2 := expect(t, r.Final(r.Acquire("k", o, 5, 30)), wire.TypeGranted)
	if g2.Token != g.Token {
		t.Fatalf("duplicate owner got token %d, first grant %d", g2.Token, g.Token)
	}
	// A waiting owner sent twice: one queue entry, both requests answered together.
	w := testcluster.Hello(t, c.Addr(0), "")
	o2 := testcluster.Owner(2)
	id1 := w.Acquire("k", o2, 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	id2 := w.Acquire("k", o2, 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	var info wire.Frame
	did := w.ID()
	w.Send(&wire.Frame{Type: wire.TypeDescribe, ID: did, Key: []byte("k")})
	info = expect(t, w.Final(did), wire.TypeInfo)
	if info.Count != 1 {
		t.Fatalf("describe: %d waiters, want 1 (one queue entry per owner)", info.Count)
	}
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	a, b := w.Recv(), w.Recv()
	if a.Type != wire.TypeGranted || b.Type != wire.TypeGranted || a.Token != b.Token || a.ID == b.ID || (a.ID != id1 && a.ID != id2) {
		t.Fatalf("duplicate waiter answers: %+v and %+v", a, b)
	}
}

func TestCancel(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	keep := w.Acquire("k", testcluster.Owner(2), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	drop := w.Acquire("k", testcluster.Owner(3), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	other := w.Acquire("other", testcluster.Owner(4), 30, 30)
	expect(t, w.Final(other), wire.TypeGranted)
	// Cancel the second waiter only: it gets X, the first still waits.
	w.Send(&wire.Frame{Type: wire.TypeCancel, ID: drop, Owner: testcluster.Owner(3)})
	if f := w.Recv(); f.Type != wire.TypeCancelled || f.ID != drop {
		t.Fatalf("cancel: got %s for %d, want X for %d", f.Type, f.ID, drop)
	}
	// A cancel naming the wrong owner or an unknown id changes nothing.
	w.Send(&wire.Frame{Type: wire.TypeCancel, ID: keep, Owner: testcluster.Owner(99)})
	w.Send(&wire.Frame{Type: wire.TypeCancel, ID: 12345, Owner: testcluster.Owner(2)})
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	gk := expect(t, w.Final(keep), wire.TypeGranted)
	// Cancel after the grant: ignored, the grant stands.
	w.Send(&wire.Frame{Type: wire.TypeCancel, ID: keep, Owner: testcluster.Owner(2)})
	expect(t, w.Final(w.Release("k", gk.Token)), wire.TypeReleased)
}

func TestConnectionCloseDropsItsWaiters(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	gone := testcluster.Hello(t, c.Addr(0), "")
	gone.Acquire("k", testcluster.Owner(2), 30, 30)
	expect(t, gone.Recv(), wire.TypeQueued)
	stay := testcluster.Hello(t, c.Addr(0), "")
	id := stay.Acquire("k", testcluster.Owner(3), 30, 30)
	expect(t, stay.Recv(), wire.TypeQueued)
	gone.Conn.Close()
	// Wait until the server has dropped the closed connection's waiter.
	testcluster.WaitFor(t, 10*time.Second, "the closed connection's waiter dropped", func() bool {
		return describe(t, r, "k").Count == 1
	})
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	expect(t, stay.Final(id), wire.TypeGranted)
}

func TestDescribe(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	did := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: did, Key: []byte("k")})
	if f := expect(t, r.Final(did), wire.TypeInfo); f.Flags != 0 || f.Token != 0 {
		t.Fatalf("describe of a free key: %+v", f)
	}
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(7), 0, 30)), wire.TypeGranted)
	did = r.ID()
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: did, Key: []byte("k")})
	f := expect(t, r.Final(did), wire.TypeInfo)
	if f.Flags != 1 || f.Token != g.Token || f.Owner != testcluster.Owner(7) || f.LeaseMs != 30000 || f.Remaining == 0 || f.Remaining > 30000 {
		t.Fatalf("describe of a held key: %+v", f)
	}
}

func TestCapacityRejectWhileOthersWork(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxHeld = 2
		cfg.Limits.MaxWaitersPerKey = 2
		cfg.Limits.MaxWaiters = 2
	}))
	r := testcluster.Hello(t, c.Addr(0), "")
	ga := expect(t, r.Final(r.Acquire("a", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
	gb := expect(t, r.Final(r.Acquire("b", testcluster.Owner(2), 0, 30)), wire.TypeGranted)
	reason := func(f wire.Frame, want uint8) {
		t.Helper()
		if expect(t, f, wire.TypeCapacity).Reason != want {
			t.Fatalf("capacity reason %d, want %d", f.Reason, want)
		}
	}
	reason(r.Final(r.Acquire("c", testcluster.Owner(3), 0, 30)), wire.CapacityHeld)
	w := testcluster.Hello(t, c.Addr(0), "")
	w1 := w.Acquire("a", testcluster.Owner(4), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	w2 := w.Acquire("a", testcluster.Owner(5), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	reason(r.Final(r.Acquire("a", testcluster.Owner(6), 30, 30)), wire.CapacityKeyWaiters)
	reason(r.Final(r.Acquire("b", testcluster.Owner(7), 30, 30)), wire.CapacityWaiters)
	// Everyone else keeps working: releases, handoffs, new grants.
	expect(t, r.Final(r.Release("a", ga.Token)), wire.TypeReleased)
	g1 := expect(t, w.Final(w1), wire.TypeGranted)
	expect(t, w.Final(w.Release("a", g1.Token)), wire.TypeReleased)
	g2 := expect(t, w.Final(w2), wire.TypeGranted)
	expect(t, w.Final(w.Release("a", g2.Token)), wire.TypeReleased)
	expect(t, r.Final(r.Release("b", gb.Token)), wire.TypeReleased)
	expect(t, r.Final(r.Acquire("c", testcluster.Owner(8), 0, 30)), wire.TypeGranted)
}

func TestCapacityInFlightPerConnection(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxInFlightPerConn = 2
	}))
	r := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	a := w.Acquire("k", testcluster.Owner(2), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	b := w.Acquire("k", testcluster.Owner(3), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	third := w.Acquire("x", testcluster.Owner(4), 0, 30)
	if f := expect(t, w.Recv(), wire.TypeCapacity); f.ID != third || f.Reason != wire.CapacityInFlight {
		t.Fatalf("third acquire: %+v, want B in-flight for %d", f, third)
	}
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	ga := expect(t, w.Final(a), wire.TypeGranted)
	expect(t, w.Final(w.Release("k", ga.Token)), wire.TypeReleased)
	expect(t, w.Final(b), wire.TypeGranted)
}

// Waiting acquires fill only the acquire class: the same connection can
// still release and describe, and the other class has a
// limit of its own.
func TestInFlightLimitsAreSeparatePerClass(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxInFlightPerConn = 2
	}))
	h := testcluster.Hello(t, c.Addr(0), "")
	held := expect(t, h.Final(h.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	mine := expect(t, h.Final(h.Acquire("mine", testcluster.Owner(2), 0, 60)), wire.TypeGranted)
	// Two acquires of this connection wait: the acquire class is full.
	w1 := h.Acquire("k", testcluster.Owner(3), 60, 30)
	expect(t, h.Recv(), wire.TypeQueued)
	w2 := h.Acquire("k", testcluster.Owner(4), 60, 30)
	expect(t, h.Recv(), wire.TypeQueued)
	over := h.Acquire("z", testcluster.Owner(5), 0, 30)
	if f := expect(t, h.Recv(), wire.TypeCapacity); f.ID != over || f.Reason != wire.CapacityInFlight {
		t.Fatalf("third acquire: %+v, want B in-flight", f)
	}
	// Releases, releases by owner and describes still go through.
	if d := describe(t, h, "k"); d.Count != 2 {
		t.Fatalf("describe while the acquire class is full: %+v", d)
	}
	expect(t, h.Final(h.Release("mine", mine.Token)), wire.TypeReleased)
	expect(t, h.Final(releaseOwner(t, h, "k", testcluster.Owner(1))), wire.TypeReleased)
	g1 := expect(t, h.Final(w1), wire.TypeGranted)
	if g1.Token <= held.Token {
		t.Fatalf("token %d", g1.Token)
	}
	// The other class has its own limit: many describes in one write, and
	// more than two of them cannot have been answered before the last is read.
	var b []byte
	ids := map[uint32]bool{}
	for range 50 {
		id := h.ID()
		ids[id] = true
		b = wire.Append(b, &wire.Frame{Type: wire.TypeDescribe, ID: id, Key: []byte("k")})
	}
	h.SendBytes(b)
	rejected := 0
	for len(ids) > 0 {
		f := h.Recv()
		if !ids[f.ID] {
			t.Fatalf("unexpected %s for %d", f.Type, f.ID)
		}
		delete(ids, f.ID)
		switch {
		case f.Type == wire.TypeCapacity && f.Reason == wire.CapacityInFlight:
			rejected++
		case f.Type != wire.TypeInfo:
			t.Fatalf("describe answered %s", f.Type)
		}
	}
	if rejected == 0 {
		t.Fatal("50 pipelined describes with a limit of 2: none was refused with B in-flight")
	}
	expect(t, h.Final(h.Release("k", g1.Token)), wire.TypeReleased)
	expect(t, h.Final(w2), wire.TypeGranted)
}

func TestConnectionLimit(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxConnections = 2
	}))
	a := testcluster.Hello(t, c.Addr(0), "")
	testcluster.Hello(t, c.Addr(0), "")
	over := testcluster.DialRaw(t, c.Addr(0))
	if f := expect(t, over.Recv(), wire.TypeCapacity); f.Reason != wire.CapacityConnections {
		t.Fatalf("reason %d, want connections", f.Reason)
	}
	expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 30)), wire.TypeGranted)
}

// Released tickets and answered waiters leave no timers behind: the heap
// holds live deadlines only, whatever the churn.
func TestTimersFollowLiveHoldsOnly(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	for i := 0; i < 300; i++ {
		g := expect(t, r.Final(r.Acquire("churn", testcluster.Owner(i), 0, 250)), wire.TypeGranted)
		expect(t, r.Final(r.Release("churn", g.Token)), wire.TypeReleased)
	}
	held := expect(t, r.Final(r.Acquire("held", testcluster.Owner(1000), 0, 250)), wire.TypeGranted)
	w := r.Acquire("held", testcluster.Owner(1001), 200, 30)
	expect(t, r.Recv(), wire.TypeQueued)
	r.Send(&wire.Frame{Type: wire.TypeCancel, ID: w, Owner: testcluster.Owner(1001)})
	expect(t, r.Final(w), wire.TypeCancelled)
	// One hold, no waiter: one timer. (The core publishes its count after
	// each round, so wait for it to settle.)
	waitTimers := func(want int64) {
		t.Helper()
		testcluster.WaitFor(t, 10*time.Second, fmt.Sprintf("%d timers", want), func() bool {
			return server.Timers(c.Server(0)) == want
		})
	}
	waitTimers(1)
	expect(t, r.Final(r.Release("held", held.Token)), wire.TypeReleased)
	waitTimers(0)
}

// An owner names one acquire attempt on one key. A client that reuses an
// owner that is still waiting for key k1 in an acquire of another key k2
// must never be answered G for k2 with k1's grant: it would believe it
// holds k2 (with a token that is not k2's) while k2 is free for anyone.
func TestOwnerWaitingForAnotherKeyIsNotGrantedThatKey(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k1", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	x := testcluster.Hello(t, c.Addr(0), "")
	id1 := x.Acquire("k1", testcluster.Owner(7), 60, 60)
	if f := x.Recv(); f.Type != wire.TypeQueued || f.ID != id1 {
		t.Fatalf("waiter for k1: got %s for %d, want Q for %d", f.Type, f.ID, id1)
	}
	id2 := x.Acquire("k2", testcluster.Owner(7), 0, 60)
	// A wait-0 acquire is never queued: its one answer comes before k1 is
	// freed, and it is G for k2 or W.
	f2 := x.Recv()
	if f2.ID != id2 {
		t.Fatalf("got %s for request %d, want the answer to k2's acquire %d", f2.Type, f2.ID, id2)
	}
	queued := f2.Type == wire.TypeQueued
	expect(t, a.Final(a.Release("k1", g.Token)), wire.TypeReleased)
	g1 := expect(t, x.Final(id1), wire.TypeGranted)
	if queued {
		f2 = x.Final(id2)
	}
	r := testcluster.Hello(t, c.Addr(0), "")
	switch {
	case f2.Type == wire.TypeGranted:
		if d := describe(t, r, "k2"); d.Flags != 1 || d.Token != f2.Token {
			t.Fatalf("k2's acquire was answered G token %d (queued first: %v), but k2 is held=%v token %d; k1's grant is token %d",
				f2.Token, queued, d.Flags == 1, d.Token, g1.Token)
		}
	case f2.Type != wire.TypeNotAcquired || queued:
		t.Fatalf("k2's acquire (wait 0) got %s (queued first: %v), want G for k2 or W", f2.Type, queued)
	}
}

// wait = 0 is one immediate attempt, never queued (protocol.md, Acquire),
// also when the same owner already waits in the key's queue: the request is
// answered W at once, and the queued request keeps waiting.
func TestWaitZeroOfAQueuedOwnerIsNotQueued(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	x := testcluster.Hello(t, c.Addr(0), "")
	id1 := x.Acquire("k", testcluster.Owner(7), 60, 60)
	if f := x.Recv(); f.Type != wire.TypeQueued || f.ID != id1 {
		t.Fatalf("waiter: got %s for %d, want Q for %d", f.Type, f.ID, id1)
	}
	id2 := x.Acquire("k", testcluster.Owner(7), 0, 60)
	if f := x.Recv(); f.Type != wire.TypeNotAcquired || f.ID != id2 {
		t.Fatalf("wait 0 by an owner already queued: got %s for %d, want W for %d", f.Type, f.ID, id2)
	}
	expect(t, a.Final(a.Release("k", g.Token)), wire.TypeReleased)
	expect(t, x.Final(id1), wire.TypeGranted)
}

// The same with the owner's attempt being committed: a release with a wrong
// token hands the key to the head waiter (an attempt that then finds the
// key still held). A wait-0 request of that owner that joined the attempt
// is answered W, not queued with it.
func TestWaitZeroJoiningAFailingAttemptIsNotQueued(t *testing.T) {
	c := testcluster.Start(t, 1)
	s := c.Server(0)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	x := testcluster.Hello(t, c.Addr(0), "")
	id1 := x.Acquire("k", testcluster.Owner(7), 60, 60)
	if f := x.Recv(); f.Type != wire.TypeQueued || f.ID != id1 {
		t.Fatalf("waiter: got %s for %d, want Q for %d", f.Type, f.ID, id1)
	}
	// Both requests reach the core together: the release's handoff starts
	// the waiter's attempt, and the wait-0 acquire joins it.
	resume := server.PauseCore(s)
	rid := x.Release("k", g.Token+100)
	id2 := x.Acquire("k", testcluster.Owner(7), 0, 60)
	testcluster.WaitFor(t, 10*time.Second, "both requests queued for the core", func() bool { return server.QueuedRequests(s) == 2 })
	resume()
	got := map[uint32]wire.Type{}
	for len(got) < 2 {
		f := x.Recv()
		if f.ID == id1 {
			t.Fatalf("the queued waiter got %s, want it still waiting", f.Type)
		}
		got[f.ID] = f.Type
	}
	if got[rid] != wire.TypeNotHeld || got[id2] != wire.TypeNotAcquired {
		t.Fatalf("release with a wrong token got %s (want N); wait-0 acquire got %s (want W, never Q)", got[rid], got[id2])
	}
	expect(t, a.Final(a.Release("k", g.Token)), wire.TypeReleased)
	expect(t, x.Final(id1), wire.TypeGranted)
}
