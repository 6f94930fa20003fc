package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// deadline is what a client computes from a G, as protocol.md says: the
// send time of its request plus queued_ms plus lease_ms (margins left out).
func deadline(sent time.Time, g wire.Frame) time.Time {
	return sent.Add(time.Duration(g.QueuedMs+g.LeaseMs) * time.Millisecond)
}

// An owner that already holds the key and acquires again is told only what
// remains of its lease, measured from that request: its deadline never
// passes the leader's expiry, and nobody else is granted the key before it.
func TestGrantForAnExistingHoldNeverOverstatesTheLease(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	o := testcluster.Owner(1)
	g1 := expect(t, a.Final(a.Acquire("k", o, 0, 2)), wire.TypeGranted)
	// The leader started its 2 s expiry clock before it sent g1.
	gotG1 := time.Now()
	leaderExpiry := gotG1.Add(2 * time.Second)
	// Part of the lease has gone by (waiting for the condition "1 s passed").
	testcluster.WaitFor(t, 10*time.Second, "1 s of the lease gone", func() bool { return time.Since(gotG1) > time.Second })
	sent := time.Now()
	g2 := expect(t, a.Final(a.Acquire("k", o, 5, 2)), wire.TypeGranted)
	if g2.Token != g1.Token {
		t.Fatalf("the same owner got token %d, first grant %d", g2.Token, g1.Token)
	}
	if g2.QueuedMs != 0 {
		t.Fatalf("queued_ms %d for an existing hold, want 0", g2.QueuedMs)
	}
	believed := deadline(sent, g2)
	if believed.After(leaderExpiry) {
		t.Fatalf("G for the existing hold: lease_ms %d queued_ms %d puts the client's deadline %v after the leader's expiry",
			g2.LeaseMs, g2.QueuedMs, believed.Sub(leaderExpiry))
	}
	// Another owner gets the key only after the first one's deadline.
	b := testcluster.Hello(t, c.Addr(0), "")
	gb := expect(t, b.Final(b.Acquire("k", testcluster.Owner(2), 30, 5)), wire.TypeGranted)
	if at := time.Now(); at.Before(believed) {
		t.Fatalf("another owner was granted %v before the first owner's deadline", believed.Sub(at))
	}
	if gb.Token <= g1.Token {
		t.Fatalf("token %d after %d", gb.Token, g1.Token)
	}
}

// A second request of an owner that is already waiting gets a G measured
// from its own receipt, not from the first request's.
func TestGrantToASecondWaitingRequestMeasuredFromItsReceipt(t *testing.T) {
	c := testcluster.Start(t, 1)
	h := testcluster.Hello(t, c.Addr(0), "")
	held := expect(t, h.Final(h.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	o := testcluster.Owner(2)
	sent1 := time.Now()
	id1 := w.Acquire("k", o, 30, 5)
	expect(t, w.Recv(), wire.TypeQueued)
	testcluster.WaitFor(t, 10*time.Second, "1.5 s in the queue", func() bool { return time.Since(sent1) > 1500*time.Millisecond })
	sent2 := time.Now()
	id2 := w.Acquire("k", o, 30, 5)
	expect(t, w.Recv(), wire.TypeQueued)
	expect(t, h.Final(h.Release("k", held.Token)), wire.TypeReleased)
	got := map[uint32]wire.Frame{}
	for len(got) < 2 {
		f := expect(t, w.Recv(), wire.TypeGranted)
		got[f.ID] = f
	}
	// The leader started the lease clock before it sent the G.
	recv := time.Now()
	for id, sent := range map[uint32]time.Time{id1: sent1, id2: sent2} {
		g := got[id]
		if g.LeaseMs != 5000 {
			t.Fatalf("request %d: lease_ms %d, want 5000", id, g.LeaseMs)
		}
		if start := sent.Add(time.Duration(g.QueuedMs) * time.Millisecond); start.After(recv) {
			t.Fatalf("request %d: queued_ms %d puts the start of the lease %v after the G arrived", id, g.QueuedMs, start.Sub(recv))
		}
	}
	if got[id1].Token != got[id2].Token {
		t.Fatal("one owner, two tokens")
	}
}

// A new grant, at once (wait 0) or after queueing: the deadline a client
// computes as protocol.md says, t_sent + queued_ms + lease_ms, is never
// after the leader's expiry, which the next waiter's grant follows.
func TestNewGrantDeadlineNeverAfterTheLeadersExpiry(t *testing.T) {
	c := testcluster.Start(t, 1)
	h := testcluster.Hello(t, c.Addr(0), "")
	a := testcluster.Hello(t, c.Addr(0), "")
	b := testcluster.Hello(t, c.Addr(0), "")
	for i := 0; i < 4; i++ {
		key := fmt.Sprintf("k%d", i)
		var sent time.Time
		var g wire.Frame
		if i%2 == 0 { // granted at once
			sent = time.Now()
			g = expect(t, a.Final(a.Acquire(key, testcluster.Owner(10+i), 0, 1)), wire.TypeGranted)
			if g.QueuedMs != 0 {
				t.Fatalf("wait 0: queued_ms %d, want 0", g.QueuedMs)
			}
		} else { // queued behind a holder, granted at its release
			held := expect(t, h.Final(h.Acquire(key, testcluster.Owner(20+i), 0, 60)), wire.TypeGranted)
			sent = time.Now()
			id := a.Acquire(key, testcluster.Owner(10+i), 30, 1)
			expect(t, a.Recv(), wire.TypeQueued)
			expect(t, h.Final(h.Release(key, held.Token)), wire.TypeReleased)
			g = expect(t, a.Final(id), wire.TypeGranted)
		}
		if g.LeaseMs != 1000 {
			t.Fatalf("lease_ms %d, want 1000", g.LeaseMs)
		}
		believed := deadline(sent, g)
		// The next owner is granted when the leader's expiry commits.
		gb := expect(t, b.Final(b.Acquire(key, testcluster.Owner(30+i), 30, 5)), wire.TypeGranted)
		if at := time.Now(); at.Before(believed) {
			t.Fatalf("sample %d: the next owner was granted %v before the first one's deadline (queued_ms %d, lease_ms %d)",
				i, believed.Sub(at), g.QueuedMs, g.LeaseMs)
		}
		expect(t, b.Final(b.Release(key, gb.Token)), wire.TypeReleased)
	}
}
