package coordtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testcluster"
)

func TestMutexAcrossLeaderChange(t *testing.T) { forSizes(t, testMutexAcrossLeaderChange) }

func testMutexAcrossLeaderChange(t *testing.T, cl *testcluster.Cluster) {
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/locks", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	a := session(t, c, "/locks", coordination.WithTimeout(5*time.Second))
	b := session(t, c, "/locks", coordination.WithTimeout(5*time.Second))
	ma, mb := a.Mutex("job"), b.Mutex("job")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tokenA := ma.Token()
	if ok, err := mb.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of a held mutex: %v %v", ok, err)
	}
	failover(t, cl)
	// Across the failover a keeps the lock and b cannot take it.
	testcluster.WaitFor(t, 30*time.Second, "a attached again", func() bool { return a.State() == coordination.Attached })
	if ok, err := mb.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock after the failover: %v %v", ok, err)
	}
	if ma.Context().Err() != nil || ma.Token() != tokenA {
		t.Fatal("a lost its lock across the leader change")
	}
	locked := make(chan error, 1)
	go func() { locked <- mb.Lock(ctx) }()
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, ctx, locked); err != nil {
		t.Fatal(err)
	}
	if mb.Token() <= tokenA {
		t.Fatalf("b's token %d is not above a's %d", mb.Token(), tokenA)
	}
}

func TestElectionAcrossLeaderChange(t *testing.T) { forSizes(t, testElectionAcrossLeaderChange) }

func testElectionAcrossLeaderChange(t *testing.T, cl *testcluster.Cluster) {
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/svc", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	a := session(t, c, "/svc", coordination.WithTimeout(5*time.Second))
	b := session(t, c, "/svc", coordination.WithTimeout(5*time.Second))
	o := session(t, c, "/svc", coordination.WithTimeout(5*time.Second))
	ea, eb := a.Election("primary"), b.Election("primary")
	if _, err := ea.Campaign(ctx, []byte("a:80")); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := o.Election("primary").Observe(octx)
	if li := recv(t, ctx, seen); li.Session != a.ID() || string(li.Data) != "a:80" {
		t.Fatalf("observed %+v, want a", li)
	}
	won := make(chan error, 1)
	go func() {
		_, err := eb.Campaign(ctx, []byte("b:80"))
		won <- err
	}()
	failover(t, cl)
	testcluster.WaitFor(t, 30*time.Second, "a attached again", func() bool { return a.State() == coordination.Attached })
	if li, err := eb.Leader(ctx); err != nil || li.Session != a.ID() {
		t.Fatalf("leader after the failover: %+v %v", li, err)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, ctx, won); err != nil {
		t.Fatal(err)
	}
	for {
		li := recv(t, ctx, seen)
		if li.Session == b.ID() {
			if string(li.Data) != "b:80" {
				t.Fatalf("new leader's data %q", li.Data)
			}
			break
		}
	}
}
