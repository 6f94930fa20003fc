package server_test

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// conservativeDeadline is what the Go client computes from a G
// (protocol.md, "The client's deadline"): 1 % drift, 100 ms margin.
func conservativeDeadline(sent time.Time, g wire.Frame) time.Time {
	span := time.Duration(g.QueuedMs+g.LeaseMs) * time.Millisecond
	return sent.Add(span - span/100 - 100*time.Millisecond)
}

// The leader commits an acquire with wait > 0 and stalls before its core
// handles the result (the outcome is held back, and so is the leadership
// watcher); leadership moves to another server, which restarts the lease at
// its takeover, expires it and grants the key to B. When the first leader's
// core resumes, A must not get a G whose conservative deadline ends after
// B was granted the key: an end of its session (M, the acquire
// indeterminate) or a G that ends in time are both safe.
func TestDeposedLeaderAnswerNeverOutlivesTheNextGrant(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	s := c.Server(l)
	a := testcluster.Hello(t, c.Addr(l), "")

	gate := server.GateResults(s)
	gateOpen := false
	defer func() {
		if !gateOpen {
			close(gate)
		}
	}()
	sent := time.Now()
	id := a.Acquire("k", testcluster.Owner(1), 10, 2) // wait 10 s, lease 2 s
	testcluster.WaitFor(t, 10*time.Second, "A's grant applied on every server", func() bool {
		for i := range c.Len() {
			if server.HeldApplied(c.Server(i)) != 1 {
				return false
			}
		}
		return true
	})

	release := server.HoldLeadershipWatch(s)
	defer release()
	if err := s.Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("transfer away: %v", err)
	}
	other := -1
	testcluster.WaitFor(t, 20*time.Second, "another server leads", func() bool {
		other = raftLeader(c)
		return other >= 0 && other != l
	})
	testcluster.WaitFor(t, 20*time.Second, "the other leader serves", func() bool { return c.Server(other).IsServing() })
	b := testcluster.Hello(t, c.Addr(other), "")
	gb := expect(t, b.Final(b.Acquire("k", testcluster.Owner(2), 30, 5)), wire.TypeGranted)
	grantedB := time.Now() // the new leader granted B before this

	// The first leader's core resumes, its watcher still silent.
	close(gate)
	gateOpen = true
	f, err := a.RecvErr(15 * time.Second)
	if err != nil {
		return // the session ended without a frame: indeterminate, safe
	}
	switch f.Type {
	case wire.TypeGranted:
		if f.ID != id {
			t.Fatalf("G for request %d, want %d", f.ID, id)
		}
		if d := conservativeDeadline(sent, f); d.After(grantedB) {
			t.Fatalf("B granted (token %d) at +%v, A's G (token %d, queued_ms %d, lease_ms %d) received at +%v: A's deadline +%v",
				gb.Token, grantedB.Sub(sent), f.Token, f.QueuedMs, f.LeaseMs, time.Since(sent), d.Sub(sent))
		}
	case wire.TypeNotLeader:
	default:
		t.Fatalf("A got %s (code %d %q), want G with a deadline before B's grant, or M", f.Type, f.Code, f.Text)
	}
}
