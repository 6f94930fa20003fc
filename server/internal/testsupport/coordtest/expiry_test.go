package coordtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
)

// TestDetachedSessionExpiresAcrossLeaderChanges: a detached session
// expires within its timeout plus the node's grace period of its detach
// although the leadership keeps moving (each new leader used to give it a
// fresh timeout + grace from its takeover, so it never expired while
// leaders changed faster than that).
func TestDetachedSessionExpiresAcrossLeaderChanges(t *testing.T) {
	cl, ps, viaProxy := proxied(t, 3)
	direct, err := newCoordClient(t, cl.AddrList(), ticketing.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := ctxT(t)
	const timeout, grace = time.Second, 2 * time.Second
	if err := direct.CreateNode(ctx, "/exp", coordination.NodeConfig{SessionGracePeriod: grace}); err != nil {
		t.Fatal(err)
	}
	ca := newClient(t, viaProxy)
	a := session(t, ca, "/exp", coordination.WithTimeout(timeout))
	for _, p := range ps {
		p.Set(nemesis.LinkMode{Refuse: true})
		p.Cut()
	}
	present := func() bool {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ss, err := direct.ListSessions(lctx, "/exp")
		if err != nil {
			return true // no answer: not shown gone
		}
		for _, s := range ss {
			if s.ID == a.ID() {
				return true
			}
		}
		return false
	}
	// Move the leadership every 500 ms for 4 × (timeout + grace): far
	// longer than the bound, far shorter than timeout + grace per leader.
	end := time.Now().Add(4 * (timeout + grace))
	gone := false
	for time.Now().Before(end) && !gone {
		leader := cl.LeaderIndex(t)
		if err := cl.Server(leader).Raft().LeadershipTransfer().Error(); err != nil {
			t.Logf("leadership transfer: %v", err)
		}
		wait := time.NewTimer(500 * time.Millisecond)
		<-wait.C
		gone = !present()
	}
	if !gone {
		t.Fatalf("session %d, detached since the cut, still lives after %v of leader changes (bound: timeout %v + grace %v)", a.ID(), 4*(timeout+grace), timeout, grace)
	}
}
