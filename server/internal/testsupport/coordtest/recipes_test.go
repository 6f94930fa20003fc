package coordtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

func TestMutexAcrossLeaderChange(t *testing.T) { forSizes(t, testMutexAcrossLeaderChange) }

func testMutexAcrossLeaderChange(t *testing.T, cl *testcluster.Cluster) {
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/locks", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	a := session(t, c, "/locks", coordination.WithTimeout(leaderChangeTimeout))
	b := session(t, c, "/locks", coordination.WithTimeout(leaderChangeTimeout))
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
	a := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
	b := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
	o := session(t, c, "/svc", coordination.WithTimeout(leaderChangeTimeout))
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

// TestRecipesOwnTheirSemaphores: a semaphore created by hand with a
// recipe's plain name is not the recipe's (two sessions cannot both lock
// a Mutex over a limit-3 semaphore of the same name); one created by hand
// in a recipe's name space with another limit is refused with
// ErrWrongKind; and recipes of different kinds with one name never read
// each other.
func TestRecipesOwnTheirSemaphores(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/own", coordination.NodeConfig{})
	a, b := session(t, c, "/own"), session(t, c, "/own")
	if err := a.CreateSemaphore(ctx, "pool", 3, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Mutex("pool").TryLock(ctx); !ok || err != nil {
		t.Fatalf("a's TryLock: %v %v", ok, err)
	}
	if ok, err := b.Mutex("pool").TryLock(ctx); ok || err != nil {
		t.Fatalf("b's TryLock of the mutex a holds: %v %v", ok, err)
	}
	if _, err := a.Election("pool").Campaign(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Election("pool").Campaign(bctx, []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b's campaign while a leads: %v", err)
	}
	// Limit-3 semaphores made by hand where the recipes keep theirs.
	for _, name := range []string{"recipe/mutex/forged", "recipe/election/forged", "recipe/publication/forged", "recipe/discovery/forged"} {
		if err := a.CreateSemaphore(ctx, name, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Mutex("forged").Lock(ctx); !errors.Is(err, coordination.ErrWrongKind) {
		t.Fatalf("Mutex on a limit-3 semaphore: %v", err)
	}
	if _, err := b.Election("forged").Campaign(ctx, nil); !errors.Is(err, coordination.ErrWrongKind) {
		t.Fatalf("Election on a limit-3 semaphore: %v", err)
	}
	if err := b.Publication("forged").Publish(ctx, []byte("v")); !errors.Is(err, coordination.ErrWrongKind) {
		t.Fatalf("Publication on a limit-3 semaphore: %v", err)
	}
	if _, err := b.Discovery("forged").Register(ctx, []byte("ep")); !errors.Is(err, coordination.ErrWrongKind) {
		t.Fatalf("Discovery on a limit-3 semaphore: %v", err)
	}
	// One name, four kinds: none sees another.
	if err := a.Publication("x").Publish(ctx, []byte("config")); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Mutex("x").TryLock(ctx); !ok || err != nil {
		t.Fatalf("Mutex x: %v %v", ok, err)
	}
	if eps, err := b.Discovery("x").List(ctx); err != nil || len(eps) != 0 {
		t.Fatalf("Discovery x lists %+v %v, want nobody", eps, err)
	}
	if li, err := b.Election("x").Leader(ctx); err != nil || li.Session != 0 {
		t.Fatalf("Election x leader %+v %v, want nobody", li, err)
	}
	if _, err := a.Discovery("x").Register(ctx, []byte("ep")); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Publication("x").Get(ctx); err != nil || string(v) != "config" {
		t.Fatalf("Publication x after a registration: %q %v", v, err)
	}
}

// TestPublicationUnsetOrEmpty: a value Watch created is unset (Get:
// ErrNotFound, Watch: nil); an empty published value is empty, not unset.
func TestPublicationUnsetOrEmpty(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/pub", coordination.NodeConfig{})
	s := session(t, c, "/pub")
	p := s.Publication("limits")
	w := p.Watch(ctx)
	if v := recv(t, ctx, w); v != nil {
		t.Fatalf("watch of an unpublished value: %q, want nil", v)
	}
	if _, err := p.Get(ctx); !errors.Is(err, coordination.ErrNotFound) {
		t.Fatalf("Get of a value Watch created: %v, want ErrNotFound", err)
	}
	if err := p.Publish(ctx, []byte{}); err != nil {
		t.Fatal(err)
	}
	if v := recv(t, ctx, w); v == nil || len(v) != 0 {
		t.Fatalf("watch after an empty publish: %#v, want empty and non-nil", v)
	}
	if v, err := p.Get(ctx); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get of an empty value: %#v %v", v, err)
	}
}

// TestResignFromAnyHandle: Resign gives up the session's leadership from
// any handle of the session; with nothing to give up it is ErrNotLeading.
func TestResignFromAnyHandle(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/res", coordination.NodeConfig{})
	s := session(t, c, "/res")
	lead, err := s.Election("e").Campaign(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := s.Election("e") // a handle that never campaigned
	if err := other.Resign(ctx); err != nil {
		t.Fatalf("Resign from another handle of the leading session: %v", err)
	}
	if li, err := other.Leader(ctx); err != nil || li.Session != 0 {
		t.Fatalf("leader after the resign: %+v %v", li, err)
	}
	if lead.Context.Err() == nil {
		t.Fatal("the leadership context is live after the session resigned")
	}
	if err := other.Resign(ctx); !errors.Is(err, coordination.ErrNotLeading) {
		t.Fatalf("Resign with nothing to resign: %v", err)
	}
}

// leaderChangeTimeout is the session timeout of the tests that hold
// something across a leader change: long enough that a restart of a lone
// server on a loaded machine ends well inside the client's conservative
// deadline, so the test checks what survives a leader change, not how fast
// one is.
const leaderChangeTimeout = 20 * time.Second
