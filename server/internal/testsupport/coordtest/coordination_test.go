package coordtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch, failing the test when ctx ends first.
func recv[T any](t *testing.T, ctx context.Context, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("nothing arrived: %v", ctx.Err())
		var zero T
		return zero
	}
}

func newClient(t *testing.T, addrs string) *coordination.Client {
	c, err := newCoordClient(t, addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func session(t *testing.T, c *coordination.Client, path string, opts ...coordination.SessionOption) *coordination.Session {
	t.Helper()
	s, err := c.Session(ctxT(t), path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestNodesAndStatuses(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if _, err := c.Session(ctx, "/missing"); !errors.Is(err, coordination.ErrNotFound) {
		t.Fatalf("session on a missing node: %v", err)
	}
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{SessionGracePeriod: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	err := c.CreateNode(ctx, "/n", coordination.NodeConfig{})
	var se *coordination.StatusError
	if !errors.Is(err, coordination.ErrAlreadyExists) || !errors.As(err, &se) || se.Message == "" {
		t.Fatalf("second create: %v", err)
	}
	if err := c.AlterNode(ctx, "/n", coordination.NodeConfig{SelfCheckPeriod: 30 * time.Second}); !errors.Is(err, coordination.ErrBadRequest) {
		t.Fatalf("alter with self-check above the grace period: %v", err)
	}
	d, err := c.DescribeNode(ctx, "/n")
	if err != nil || d.Config.SessionGracePeriod != 20*time.Second || d.Config.SelfCheckPeriod != time.Second {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if err := c.DropNode(ctx, "/n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeNode(ctx, "/n"); !errors.Is(err, coordination.ErrNotFound) {
		t.Fatalf("describe after drop: %v", err)
	}
}

func TestSemaphores(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	a, b := session(t, c, "/n"), session(t, c, "/n")
	if err := a.CreateSemaphore(ctx, "s", 1, []byte("cfg")); err != nil {
		t.Fatal(err)
	}
	la, err := a.AcquireSemaphore(ctx, "s")
	if err != nil || la.Token() == 0 {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := b.AcquireSemaphore(ctx, "s", coordination.Timeout(0)); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("try once on a held semaphore: %v", err)
	}
	queued := make(chan uint64, 1)
	got := make(chan *coordination.Lease, 1)
	go func() {
		lb, err := b.AcquireSemaphore(ctx, "s", coordination.OnQueued(func(o uint64) { queued <- o }))
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	order := recv(t, ctx, queued)
	d, watch, err := b.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true, Waiters: true, WatchOwners: true})
	if err != nil || len(d.Owners) != 1 || d.Owners[0].OrderID != la.Token() || len(d.Waiters) != 1 || d.Waiters[0].OrderID != order {
		t.Fatalf("describe: %+v %v", d, err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if la.Context().Err() == nil {
		t.Fatal("a released lease's context is not done")
	}
	lb := recv(t, ctx, got)
	if lb == nil || lb.Token() != order || lb.Token() <= la.Token() {
		t.Fatalf("b's lease %+v, queued with order %d", lb, order)
	}
	if ch := recv(t, ctx, watch); !ch.OwnersChanged {
		t.Fatalf("watch: %+v", ch)
	}
	if err := a.DeleteSemaphore(ctx, "s", false); !errors.Is(err, coordination.ErrPreconditionFailed) {
		t.Fatalf("delete in use: %v", err)
	}
	if err := a.DeleteSemaphore(ctx, "s", true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Context().Done(): // told: the lease ends
	case <-ctx.Done():
		t.Fatal("force delete did not end the owner's lease")
	}
	// Ephemeral, exclusive.
	le, err := a.AcquireSemaphore(ctx, "e", coordination.Ephemeral(), coordination.Exclusive(), coordination.Data([]byte("10.0.0.1:80")))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := b.DescribeSemaphore(ctx, "e", coordination.DescribeOptions{Owners: true}); err != nil || !d.Ephemeral || string(d.Owners[0].Data) != "10.0.0.1:80" {
		t.Fatalf("ephemeral: %+v %v", d, err)
	}
	le.Release(ctx)
	if _, _, err := b.DescribeSemaphore(ctx, "e", coordination.DescribeOptions{}); !errors.Is(err, coordination.ErrNotFound) {
		t.Fatalf("ephemeral after the last release: %v", err)
	}
	// A cancelled wait is withdrawn.
	a.CreateSemaphore(ctx, "w", 1, nil)
	hold, _ := a.AcquireSemaphore(ctx, "w")
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		select { // not recv: FailNow belongs to the test goroutine
		case <-queued:
		case <-ctx.Done():
		}
		cancel()
	}()
	if _, err := b.AcquireSemaphore(wctx, "w", coordination.OnQueued(func(o uint64) { queued <- o })); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	testcluster.WaitFor(t, 10*time.Second, "the cancelled wait withdrawn", func() bool {
		d, _, err := a.DescribeSemaphore(ctx, "w", coordination.DescribeOptions{Waiters: true})
		return err == nil && len(d.Waiters) == 0
	})
	hold.Release(ctx)
}

// TestSessionSurvivesLeaderKill: the session is restored at the new leader
// and keeps its lease (same token, context not done); another session sees
// the semaphore still held.
func TestSessionSurvivesLeaderKill(t *testing.T) {
	cl := testcluster.Start(t, 3)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{SessionGracePeriod: 60 * time.Second}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var states []coordination.State
	// The timeout outlasts an election: the lease survives on the client
	// only if the session is confirmed again within its deadline.
	a := session(t, c, "/n", coordination.WithTimeout(10*time.Second), coordination.WithStateCallback(func(s coordination.State) {
		mu.Lock()
		states = append(states, s)
		mu.Unlock()
	}))
	if err := a.CreateSemaphore(ctx, "s", 1, nil); err != nil {
		t.Fatal(err)
	}
	lease, err := a.AcquireSemaphore(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// w waits in the queue and watches the owners across the leader change.
	w := session(t, c, "/n", coordination.WithTimeout(10*time.Second))
	queued := make(chan uint64, 2)
	got := make(chan *coordination.Lease, 1)
	go func() {
		l, err := w.AcquireSemaphore(ctx, "s", coordination.OnQueued(func(o uint64) { queued <- o }))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	order := recv(t, ctx, queued)
	_, watch, err := w.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{WatchOwners: true})
	if err != nil {
		t.Fatal(err)
	}

	cl.Kill(cl.LeaderIndex(t))
	testcluster.WaitFor(t, 30*time.Second, "session detached and attached again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(states) >= 3 && states[len(states)-1] == coordination.Attached
	})
	if ch := recv(t, ctx, watch); ch.DataChanged || ch.OwnersChanged {
		t.Fatalf("a watch on a dropped connection fired %+v, want changed(false, false)", ch)
	}
	if lease.Context().Err() != nil || a.Context().Err() != nil {
		t.Fatal("the lease or session ended across the leader change")
	}
	b := session(t, c, "/n")
	d, _, err := b.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true})
	if err != nil || len(d.Owners) != 1 || d.Owners[0].OrderID != lease.Token() || d.Owners[0].Session != a.ID() {
		t.Fatalf("after the failover: %+v %v", d, err)
	}
	if _, err := b.AcquireSemaphore(ctx, "s", coordination.Timeout(0)); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("b acquired a held semaphore: %v", err)
	}
	// w's acquire was sent again after its restore and kept its place: its
	// order id is the one it queued with.
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l := recv(t, ctx, got); l == nil || l.Token() != order {
		t.Fatalf("w's lease %+v, want the order id %d it queued with", l, order)
	}
}

// TestSessionExpiresWithoutServer: a session that cannot be restored within
// its timeout expires: its Context and leases end, and calls fail with
// ErrSessionExpired.
func TestSessionExpiresWithoutServer(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/n", coordination.NodeConfig{})
	a := session(t, c, "/n", coordination.WithTimeout(coordination.MinSessionTimeout))
	a.CreateSemaphore(ctx, "s", 1, nil)
	l, err := a.AcquireSemaphore(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	cl.Kill(0)
	select {
	case <-a.Context().Done():
	case <-ctx.Done():
		t.Fatal("the session's context did not end")
	}
	if l.Context().Err() == nil || a.State() == coordination.Attached {
		t.Fatalf("lease alive, or session %v, after the session's context ended", a.State())
	}
	testcluster.WaitFor(t, 30*time.Second, "the session expires", func() bool { return a.State() == coordination.Expired })
	if cause := context.Cause(a.Context()); !errors.Is(cause, coordination.ErrSessionExpired) {
		t.Fatalf("an expired session's context: cause %v, want ErrSessionExpired", cause)
	}
	if _, err := a.AcquireSemaphore(ctx, "s"); !errors.Is(err, coordination.ErrSessionExpired) {
		t.Fatalf("acquire on an expired session: %v", err)
	}
}

// TestSessionCloseReleases: Close stops the session at once: its lease and
// context end and a waiter is granted.
func TestSessionCloseReleases(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/n", coordination.NodeConfig{})
	a, b := session(t, c, "/n"), session(t, c, "/n")
	a.CreateSemaphore(ctx, "s", 1, nil)
	la, err := a.AcquireSemaphore(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.AcquireSemaphore(ctx, "s")
		got <- err
	}()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if la.Context().Err() == nil || a.Context().Err() == nil || a.State() != coordination.Expired {
		t.Fatalf("closing the session left its lease or context alive: lease %v, session %v, state %v", la.Context().Err(), a.Context().Err(), a.State())
	}
	if err := recv(t, ctx, got); err != nil {
		t.Fatalf("b after a closed: %v", err)
	}
}

// TestCancelledReacquireEndsTheHold: a session that holds a semaphore and
// acquires it again withdraws that acquire with a release when its context
// ends before the answer, and the release gives up the whole hold on the
// server. The first lease must end with it: a holder whose lease still
// looked valid would act on a hold the server no longer has.
func TestCancelledReacquireEndsTheHold(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	a := session(t, c, "/n")
	b := session(t, c, "/n")
	if err := a.CreateSemaphore(ctx, "r", 1, nil); err != nil {
		t.Fatal(err)
	}
	first, err := a.AcquireSemaphore(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.AcquireSemaphore(wctx, "r"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled re-acquire: %v", err)
	}
	// Whether the server released the hold or not, the lease may not
	// outlive the doubt: b is granted the semaphore once a's withdrawal
	// is through, and a must already know it holds nothing.
	got, err := b.AcquireSemaphore(ctx, "r", coordination.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("b after a's withdrawal: %v", err)
	}
	defer got.Release(ctx)
	if first.Context().Err() == nil {
		t.Fatal("a's first lease still looks valid while b holds the semaphore")
	}
	if cause := context.Cause(first.Context()); !errors.Is(cause, coordination.ErrReleased) {
		t.Fatalf("a's first lease ended with %v, want ErrReleased", cause)
	}
}
