package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/server"
	"github.com/ticketing-io/ticketing/internal/testcluster"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Clients that acquire and close their connection at once, many together,
// leave no key held for nobody: a grant whose every connection is gone or
// closing is released at once, whatever order the core sees the close and
// the request in (issue 9 item 4; docs/design.md "Duplicates, cancels and
// orphans").
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
// that session closes, like any connection's (issue 9 item 5).
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
