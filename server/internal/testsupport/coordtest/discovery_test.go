package coordtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// failover ends the current leader and waits for a serving leader: with
// three servers another one takes over; a single server is restarted on its
// data, which is a leader change too (a new term and a takeover entry).
func failover(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	i := cl.LeaderIndex(t)
	cl.Kill(i)
	if cl.Len() == 1 {
		cl.Restart(i)
	}
	cl.LeaderIndex(t)
}

// until receives from ch until ok holds for a value, failing the test when
// ctx ends or ch closes first.
func until[T any](t *testing.T, ctx context.Context, ch <-chan T, what string, ok func(T) bool) T {
	t.Helper()
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("%s: the channel closed", what)
			}
			if ok(v) {
				return v
			}
		case <-ctx.Done():
			t.Fatalf("%s: not seen: %v", what, ctx.Err())
		}
	}
}

func endpoints(eps []coordination.Endpoint) string {
	s := ""
	for _, e := range eps {
		s += string(e.Data) + ";"
	}
	return s
}

func forSizes(t *testing.T, fn func(t *testing.T, cl *testcluster.Cluster)) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%dservers", n), func(t *testing.T) { fn(t, testcluster.Start(t, n)) })
	}
}

// Service discovery: members register endpoints as owner data of an
// ephemeral semaphore; List and Watch follow them across a leader change,
// a re-registration, a release and a session's end.
func TestDiscoveryAcrossLeaderChange(t *testing.T) {
	forSizes(t, func(t *testing.T, cl *testcluster.Cluster) {
		c := newClient(t, cl.AddrList())
		ctx := ctxT(t)
		if err := c.CreateNode(ctx, "/svc", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
			t.Fatal(err)
		}
		a := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
		b := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
		w := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
		if eps, err := w.Discovery("api").List(ctx); err != nil || len(eps) != 0 {
			t.Fatalf("list of an unregistered service: %v %v", eps, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		seen := w.Discovery("api").Watch(wctx)
		until(t, ctx, seen, "empty service", func(eps []coordination.Endpoint) bool { return len(eps) == 0 })

		la, err := a.Discovery("api").Register(ctx, []byte("a:80"))
		if err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "a registered", func(eps []coordination.Endpoint) bool { return endpoints(eps) == "a:80;" })
		lb, err := b.Discovery("api").Register(ctx, []byte("b:80"))
		if err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "a and b registered", func(eps []coordination.Endpoint) bool { return endpoints(eps) == "a:80;b:80;" })

		failover(t, cl)
		testcluster.WaitFor(t, 30*time.Second, "a and b attached again", func() bool {
			return a.State() == coordination.Attached && b.State() == coordination.Attached
		})
		eps, err := w.Discovery("api").List(ctx)
		if err != nil || endpoints(eps) != "a:80;b:80;" || eps[0].Session != a.ID() || eps[0].Token != la.Token() || eps[1].Token != lb.Token() {
			t.Fatalf("registrations after the leader change: %+v %v", eps, err)
		}
		// The watch, re-set after the lost connection, still follows.
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "b gone", func(eps []coordination.Endpoint) bool { return endpoints(eps) == "a:80;" })
		la2, err := a.Discovery("api").Register(ctx, []byte("a:81"))
		if err != nil || la2.Token() != la.Token() {
			t.Fatalf("re-registration: token %v (was %d), %v", la2, la.Token(), err)
		}
		until(t, ctx, seen, "a moved", func(eps []coordination.Endpoint) bool { return endpoints(eps) == "a:81;" })
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "a's session ended", func(eps []coordination.Endpoint) bool { return len(eps) == 0 })
	})
}

// Configuration publication: a value as semaphore data, followed by data
// watches across a leader change.
func TestPublicationAcrossLeaderChange(t *testing.T) {
	forSizes(t, func(t *testing.T, cl *testcluster.Cluster) {
		c := newClient(t, cl.AddrList())
		ctx := ctxT(t)
		if err := c.CreateNode(ctx, "/cfg", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
			t.Fatal(err)
		}
		pub := session(t, c, "/cfg", coordination.WithTimeout(leaderChangeTimeout))
		sub := session(t, c, "/cfg", coordination.WithTimeout(leaderChangeTimeout))
		if _, err := sub.Publication("limits").Get(ctx); !errors.Is(err, coordination.ErrNotFound) {
			t.Fatalf("get of an unpublished value: %v", err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		seen := sub.Publication("limits").Watch(wctx)
		until(t, ctx, seen, "empty value", func(v []byte) bool { return len(v) == 0 })
		if err := pub.Publication("limits").Publish(ctx, []byte("rps=10")); err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "v1", func(v []byte) bool { return string(v) == "rps=10" })

		failover(t, cl)
		if err := pub.Publication("limits").Publish(ctx, []byte("rps=20")); err != nil {
			t.Fatal(err)
		}
		until(t, ctx, seen, "v2 after the leader change", func(v []byte) bool { return string(v) == "rps=20" })
		if v, err := sub.Publication("limits").Get(ctx); err != nil || string(v) != "rps=20" {
			t.Fatalf("get: %q %v", v, err)
		}
	})
}
