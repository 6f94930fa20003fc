package core

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// conservativeDeadline is the deadline a client computes from a G
// (protocol.md, "The client's deadline"), with the Go client's margins: 1 %
// drift and 100 ms.
func conservativeDeadline(sent time.Time, g wire.Frame) time.Time {
	span := time.Duration(g.QueuedMs+g.LeaseMs) * time.Millisecond
	return sent.Add(span - span/100 - 100*time.Millisecond)
}

// setLeadership is what Raft tells this view of the log when asked now.
func (l *fakeLog) setLeadership(ld Leadership) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lead = ld
}

// A leader stalls (a VM pause, SIGSTOP) after an acquire with wait > 0
// committed and before its core handled the result. A second leader takes
// over, restarts the lease in full, expires it and grants the key to
// another owner. When the first leader resumes, whatever it answers the
// first acquire must not let that client believe it holds the key after the
// second owner was granted it: either no G at all, or a G whose
// conservative deadline ends before the second grant.
func TestDeposedLeaderNeverPromisesBeyondTheNextLeadersExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lost: when the first leader resumes, Raft already reports the
		// new term (else it has not heard of it yet, and only the measure
		// of queued_ms keeps the promise).
		lost bool
	}{
		{name: "raft has not noticed yet", lost: false},
		{name: "raft reports the new term", lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l1 := newCoreHarness(t, testLimits())
			start := l1.clk.Now()
			a := l1.conn()
			l1.acquire(a, 1, 1, "k", 10, 2) // wait 10 s, lease 2 s
			// The entry commits and is applied; its outcome waits in the
			// core's channel while the first leader is stalled.
			waitApplied(t, l1, "k")

			l1.clk.advance(time.Second)
			l2 := newCoreHarnessOn(t, testLimits(), l1.log.peer(), l1.clk, l1.term)
			if tc.lost {
				l1.log.setLeadership(Leadership{Leader: false})
			}
			b := l2.conn()
			l2.acquire(b, 1, 2, "k", 10, 5)
			l2.expect(b, fr(wire.TypeQueued, 1))
			// The second leader's expiry of A's restarted lease grants B.
			l2.advance(2 * time.Second)
			l2.settleAll()
			l2.expect(b, fr(wire.TypeGranted, 1))
			grantedB := l2.clk.Now()

			// The first leader resumes 4 s after A's request.
			l1.clk.advance(time.Second)
			l1.settle()
			got := l1.frames(a)
			for _, f := range got {
				if f.Type != wire.TypeGranted {
					continue
				}
				if d := conservativeDeadline(start, f); d.After(grantedB) {
					t.Fatalf("A got G (queued_ms %d, lease_ms %d): its deadline +%v is after the second leader granted the key to B at +%v",
						f.QueuedMs, f.LeaseMs, d.Sub(start), grantedB.Sub(start))
				}
			}
			if tc.lost {
				// The core answers nothing and the server ends every
				// connection with M (setServing(false)): A's acquire is
				// indeterminate, which is always safe.
				if len(got) > 0 {
					t.Fatalf("a leader whose term ended answered %v; want no answer (its connections end with M)", types(got))
				}
				if calls := l1.srv.calls; len(calls) == 0 || calls[len(calls)-1] {
					t.Fatalf("a leader whose term ended still serves (setServing calls %v)", calls)
				}
			}
		})
	}
}

// waitApplied waits until the fake log has applied a hold of key (the
// awaiter goroutine applies each batch when it awaits its outcome).
func waitApplied(t *testing.T, h *coreHarness, key string) {
	t.Helper()
	for deadline := time.Now().Add(waitFor); ; {
		if _, ok := h.log.hold(key); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold of %q was never applied", key)
		}
		time.Sleep(time.Millisecond) // the awaiter goroutine catches up
	}
}

// The same stall with wait 0: the G itself is safe (queued_ms 0), but the
// first leader starts its expiry clock when it resumes, so a repeated
// acquire by the same owner (the existing hold) must not be told the lease
// left on that late clock: the second leader's expiry comes first.
func TestDeposedLeaderNeverOverstatesAnExistingHold(t *testing.T) {
	l1 := newCoreHarness(t, testLimits())
	start := l1.clk.Now()
	a := l1.conn()
	l1.acquire(a, 1, 1, "k", 0, 2)
	waitApplied(t, l1, "k")

	l1.clk.advance(time.Second)
	l2 := newCoreHarnessOn(t, testLimits(), l1.log.peer(), l1.clk, l1.term)
	l1.clk.advance(time.Second)
	l1.settle() // resumed 2 s after the request, Raft has not noticed yet
	sent := map[uint32]time.Time{1: start, 2: l1.clk.Now()}
	l1.acquire(a, 2, 1, "k", 0, 2) // the same owner: the existing hold
	grants := l1.expect(a, fr(wire.TypeGranted, 1), fr(wire.TypeGranted, 2))

	b := l2.conn()
	l2.acquire(b, 1, 2, "k", 10, 5)
	l2.expect(b, fr(wire.TypeQueued, 1))
	l2.advance(time.Second) // the lease restarted at the second leader's takeover ends
	l2.settleAll()
	l2.expect(b, fr(wire.TypeGranted, 1))
	grantedB := l2.clk.Now()
	for _, g := range grants {
		if d := conservativeDeadline(sent[g.ID], g); d.After(grantedB) {
			t.Fatalf("A's G %d (queued_ms %d, lease_ms %d): deadline +%v after B's grant at +%v",
				g.ID, g.QueuedMs, g.LeaseMs, d.Sub(start), grantedB.Sub(start))
		}
	}
}

// A new leader that stalls after its takeover entry committed and before it
// handled it: a third leader takes over meanwhile. When the stalled one
// resumes and serves (Raft has not noticed yet), a repeated acquire of an
// existing hold must not be promised the lease restarted at its late
// takeover: the third leader's expiry comes first.
func TestStalledTakeoverNeverOverstatesAnExistingHold(t *testing.T) {
	l1 := newCoreHarness(t, testLimits())
	start := l1.clk.Now()
	a := l1.conn()
	l1.acquire(a, 1, 1, "k", 0, 2)
	l1.settle()
	l1.expect(a, fr(wire.TypeGranted, 1))

	// The second leader's takeover commits at +1 s; its outcome waits.
	l1.clk.advance(time.Second)
	l2 := newFollowerHarness(t, testLimits(), l1.log.peer(), l1.clk, l1.term)
	takeover := l2.stalledTakeover()

	l1.clk.advance(time.Second)
	l3 := newCoreHarnessOn(t, testLimits(), l1.log.peer(), l1.clk, l2.term)
	b := l3.conn()
	l3.acquire(b, 1, 2, "k", 10, 5)
	l3.expect(b, fr(wire.TypeQueued, 1))

	// The second leader resumes at +3 s and serves.
	l1.clk.advance(time.Second)
	l2.c.onResult(takeover)
	l2.afterStep()
	if !l2.c.serving {
		t.Fatal("the resumed leader does not serve")
	}
	a2 := l2.conn()
	sent := l2.clk.Now()
	l2.acquire(a2, 1, 1, "k", 0, 2)
	g := l2.expect(a2, fr(wire.TypeGranted, 1))[0]

	l3.advance(time.Second) // +4 s: the lease restarted at the third takeover ends
	l3.settleAll()
	l3.expect(b, fr(wire.TypeGranted, 1))
	grantedB := l3.clk.Now()
	if d := conservativeDeadline(sent, g); d.After(grantedB) {
		t.Fatalf("existing hold at the resumed leader: lease_ms %d, deadline +%v after B's grant at +%v",
			g.LeaseMs, d.Sub(start), grantedB.Sub(start))
	}
}

// protocol.md: a D pipelined right behind an L sees the key free. Raft
// refuses the L's batch while this server stays leader (a leadership
// transfer that then fails), and the L is proposed again later. Neither a D
// already proposed in a later batch that commits meanwhile nor a D that
// arrives after the refusal may be answered before the L is applied.
func TestDescribeBehindARefusedReleaseSeesTheKeyFree(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a := h.conn()
	h.acquire(a, 1, 1, "k", 0, 30)
	h.settle()
	g := h.expect(a, fr(wire.TypeGranted, 1))[0]

	h.log.then(fakeStep{o: Refused}, fakeStep{o: Applied})
	h.release(a, 2, "k", g.Token)
	h.do(Request{Kind: wire.TypeDescribe, Conn: a, ID: 3, Key: "k"}) // its own batch, in flight
	if h.c.inflight != 2 {
		t.Fatalf("%d batches in flight, want the L's and the D's", h.c.inflight)
	}
	h.settle() // the L's batch: refused, retried later
	h.do(Request{Kind: wire.TypeDescribe, Conn: a, ID: 4, Key: "k"})
	h.settle() // the first D's batch commits
	h.advance(retryDelay)
	h.settleAll()
	got := map[uint32]wire.Frame{}
	for _, f := range h.frames(a) {
		got[f.ID] = f
	}
	if got[2].Type != wire.TypeReleased {
		t.Fatalf("the release got %v, want R", got[2].Type)
	}
	for _, id := range []uint32{3, 4} {
		f, ok := got[id]
		if !ok || f.Type != wire.TypeInfo {
			t.Fatalf("describe %d got %v, want I (answers %v)", id, f.Type, got)
		}
		if f.Flags&wire.InfoHeld != 0 {
			t.Fatalf("describe %d pipelined behind the release sees the key held under token %d (released %d)", id, f.Token, g.Token)
		}
	}
}

// A second request of the same owner that arrives after the grant's batch
// was sealed (it joins the waiter while the attempt commits) is promised no
// more than the first: its lease ends at the sealing + the lease, like the
// first request's, not a full lease after its own receipt.
func TestGrantToARequestThatJoinedAfterTheSealing(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a := h.conn()
	step, open := h.gate(fakeStep{o: Applied})
	h.log.then(step)
	sealed := h.clk.Now()
	h.acquire(a, 1, 1, "k", 5, 2)
	h.clk.advance(time.Second)
	sent2 := h.clk.Now()
	h.acquire(a, 2, 1, "k", 5, 2) // the same owner: joins the waiter
	open()
	h.settle()
	end := sealed.Add(2 * time.Second) // no later leader ends the lease earlier
	sent := map[uint32]time.Time{1: sealed, 2: sent2}
	for _, g := range h.expect(a, fr(wire.TypeGranted, 1), fr(wire.TypeGranted, 2)) {
		promised := sent[g.ID].Add(time.Duration(g.QueuedMs+g.LeaseMs) * time.Millisecond)
		if promised.After(end) {
			t.Fatalf("request %d (queued_ms %d, lease_ms %d) is promised the key until +%v, past the sealing + lease (+%v)",
				g.ID, g.QueuedMs, g.LeaseMs, promised.Sub(sealed), end.Sub(sealed))
		}
	}
}

// A repeated acquire of an existing hold, handled after Raft reported a new
// term but before the watcher did, is not answered G: the old term ends
// (its connections get M).
func TestExistingHoldNotGrantedFromAnEndedTerm(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a := h.conn()
	h.acquire(a, 1, 1, "k", 0, 30)
	h.settle()
	h.expect(a, fr(wire.TypeGranted, 1))
	h.log.setLeadership(Leadership{Leader: true, Term: h.term + 1}) // lost and regained
	h.acquire(a, 2, 1, "k", 0, 30)
	if got := h.frames(a); len(got) > 0 {
		t.Fatalf("answered %v from an ended term; want no answer (its connections end with M)", types(got))
	}
	if calls := h.srv.calls; calls[len(calls)-1] {
		t.Fatalf("the ended term still serves (setServing calls %v)", calls)
	}
}
