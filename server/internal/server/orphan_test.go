package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Clients that acquire and close their connection at once, many together,
// leave no key held for nobody: a grant whose every connection is gone or
// closing is released at once, whatever order the core sees the close and
// the request in (docs/design.md "Duplicates, cancels and orphans").
func TestGrantsToClosedConnectionsAreReleased(t *testing.T) {
	c := testcluster.Start(t, 1)
	s := c.Server(0)
	const rounds, n = 10, 30
	for round := range rounds {
		raws := make([]*testcluster.Raw, n)
		for i := range raws {
			raws[i] = testcluster.Hello(t, c.Addr(0), "")
		}
		// The core is busy (paused) while the burst arrives: every request
		// and every close is queued before it looks, so it sees them all at
		// once, in whatever order its channels give them.
		resume := server.PauseCore(s)
		var wg sync.WaitGroup
		for i, r := range raws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.Conn.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Owner: testcluster.Owner(round*n + i),
					Lease: 200, Key: []byte(fmt.Sprint("orphan/", round*n+i))}))
				r.Conn.Close()
			}()
		}
		wg.Wait()
		testcluster.WaitFor(t, 10*time.Second, "every burst connection closed", func() bool { return server.Conns(s) == 0 })
		resume()
		// Every acquire was granted (distinct free keys: one token each),
		// and every grant released, since no client can ever learn its token.
		testcluster.WaitFor(t, 30*time.Second, fmt.Sprintf("round %d: every grant to a closed connection released", round), func() bool {
			st := s.Status()
			return st.LastToken >= uint64((round+1)*n) && st.Held == 0
		})
	}
	// The server keeps serving those keys at once.
	r := testcluster.Hello(t, c.Addr(0), "")
	for i := range 5 {
		expect(t, r.Final(r.Acquire(fmt.Sprint("orphan/", i), testcluster.Owner(1000+i), 0, 5)), wire.TypeGranted)
	}
}

// A waiter queued on an admin session (served by the leader) is dropped when
// that session closes, like any connection's.
func TestAdminSessionCloseDropsItsWaiters(t *testing.T) {
	c := testcluster.Start(t, 1)
	h := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, h.Final(h.Acquire("k", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	a := testcluster.DialRaw(t, c.Addr(0))
	a.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin})
	expect(t, a.Recv(), wire.TypeReady)
	a.Acquire("k", testcluster.Owner(2), 200, 200)
	expect(t, a.Recv(), wire.TypeQueued)
	a.Conn.Close()
	testcluster.WaitFor(t, 10*time.Second, "the closed admin session's waiter dropped", func() bool {
		return describe(t, h, "k").Count == 0
	})
	expect(t, h.Final(h.Release("k", g.Token)), wire.TypeReleased)
	if d := describe(t, h, "k"); d.Flags != 0 {
		t.Fatalf("after the release the key went to the closed admin session's waiter: %+v", d)
	}
}

// A grant nobody received is released at once (an orphan release), but
// until that release commits the hold is still in the applied state. An
// acquire by the same owner in that window (a client retrying after its
// connection dropped, as protocol.md allows) must not be told it holds the
// key for the rest of the lease: the release that follows ends the hold and
// the key goes to someone else. Raft refusing applies during a leadership
// transfer (to a dead member, which fails) keeps the window open.
func TestOrphanReleaseInFlightPromisesNoLease(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ElectionTimeout = 4 * time.Second // the length of a failing transfer
		// A leader change would void the scenario (the new leader knows of
		// no orphan): on a loaded machine the test default (heartbeats of
		// 500 ms, a leader lease of 250 ms) can depose the leader.
		cfg.HeartbeatTimeout = 2 * time.Second
	}))
	l := c.LeaderIndex(t)
	s := c.Server(l)
	dead := (l + 1) % 3
	deadID, deadAddr := c.Config(dead).NodeID, c.Server(dead).RaftAddr()
	c.Kill(dead)
	b := testcluster.Hello(t, c.Addr(l), "")
	// New entries: the dead member falls behind, so a transfer to it waits.
	expect(t, b.Final(b.Acquire("other", testcluster.Owner(9), 0, 200)), wire.TypeGranted)
	before := s.Status().LastToken

	gate := server.GateResults(s)
	gated := true
	defer func() {
		if gated {
			close(gate)
		}
	}()
	a := testcluster.Hello(t, c.Addr(l), "")
	a.Acquire("k", testcluster.Owner(1), 0, 200)
	a.Conn.Close()
	testcluster.WaitFor(t, 10*time.Second, "the grant to the closed connection applied", func() bool {
		return server.Conns(s) == 1 && s.Status().LastToken > before
	})
	transfer := make(chan error, 1)
	go func() {
		transfer <- s.Raft().LeadershipTransferToServer(raft.ServerID(deadID), raft.ServerAddress(deadAddr)).Error()
	}()
	testcluster.WaitFor(t, 10*time.Second, "Raft refuses applies (transfer in progress)", func() bool {
		return errors.Is(s.Raft().Barrier(time.Second).Error(), raft.ErrLeadershipTransferInProgress)
	})
	// The core learns of the grant: nobody can receive it, so it proposes
	// its release, which Raft refuses while the transfer lasts.
	gate <- struct{}{}
	close(gate)
	gated = false

	g := expect(t, b.Final(b.Acquire("k", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	if err := <-transfer; err == nil {
		t.Fatal("the transfer to a dead member succeeded")
	}
	// The orphan release commits now; then another owner may take the key.
	testcluster.WaitFor(t, 20*time.Second, "the orphaned grant released", func() bool { return s.Status().Held == 1 })
	o := b.Final(b.Acquire("k", testcluster.Owner(2), 0, 200))
	if o.Type == wire.TypeGranted && g.LeaseMs > 0 {
		t.Fatalf("owner 1 was answered G token %d with lease_ms %d while its orphan release was being committed; the key was then granted to owner 2 (token %d): two holders", g.Token, g.LeaseMs, o.Token)
	}
}
