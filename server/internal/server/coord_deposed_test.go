package server_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// A leader whose core stalls is deposed (leadership moves to another
// server) while its connections live on: its readers still answer at once
// the refusals they decide alone — BAD_REQUEST for a field out of range,
// UNAUTHORIZED for a principal that may no longer use coordination nodes
// (a reload made it a monitor). Session A keeps sending such requests
// through it. The new leader expires A's session (timeout plus the node's
// grace period after its takeover) and grants A's semaphore to B. A's
// lease must have ended before that: those refusals follow no commit, so
// they must not move A's deadline (docs/protocol.md, "A coordination
// session's deadline"), however often they come.
func TestDeposedLeadersImmediateRefusalsNeverExtendASession(t *testing.T) {
	for _, kind := range []string{"bad-request", "unauthorized"} {
		t.Run(kind, func(t *testing.T) { deposedRefusals(t, kind) })
	}
}

func deposedRefusals(t *testing.T, kind string) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = authPrincipals() }))
	l := c.LeaderIndex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(addr string) *coordination.Client {
		b, err := ticketing.Connect(addr, ticketing.WithToken(ordersToken), ticketing.WithDialTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		cc, err := coordination.New(b)
		if err != nil {
			t.Fatal(err)
		}
		return cc
	}
	ca := connect(c.Addr(l))
	if err := ca.CreateNode(ctx, "/orders/d", coordination.NodeConfig{SessionGracePeriod: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	a, err := ca.Session(ctx, "/orders/d", coordination.WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateSemaphore(ctx, "x", 1, nil); err != nil {
		t.Fatal(err)
	}
	lease, err := a.AcquireSemaphore(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	var leaseEnded atomic.Int64
	stop := context.AfterFunc(lease.Context(), func() { leaseEnded.Store(time.Now().UnixNano()) })
	defer stop()

	s := c.Server(l)
	release := server.HoldLeadershipWatch(s)
	resume := server.PauseCore(s)
	defer func() { resume(); release() }()
	if err := s.Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("transfer away: %v", err)
	}
	other := -1
	testcluster.WaitFor(t, 20*time.Second, "another server leads", func() bool {
		other = raftLeader(c)
		return other >= 0 && other != l
	})
	if kind == "unauthorized" {
		// Only on the deposed leader: its reader refuses every request of
		// the principal's open connection from now on.
		monitor := authPrincipals()
		monitor.Principals[0].Role, monitor.Principals[0].KeyPrefixes = server.RoleMonitor, nil
		if err := s.SetAuth(nil, monitor); err != nil {
			t.Fatal(err)
		}
	}

	// A keeps sending requests that the deposed leader's reader refuses.
	refusals := make(chan error, 1)
	sending, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var refused atomic.Int64
	go func() {
		for sending.Err() == nil {
			var err error
			if kind == "bad-request" {
				err = a.CreateSemaphore(sending, "y", 0, nil) // limit 0
			} else {
				err = a.UpdateSemaphore(sending, "x", []byte("d"))
			}
			if errors.Is(err, coordination.ErrBadRequest) || errors.Is(err, coordination.ErrUnauthorized) {
				refused.Add(1)
			} else if sending.Err() == nil {
				refusals <- err
				return
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-sending.Done():
			}
		}
	}()

	cb := connect(c.Addr(other))
	b, err := cb.Session(ctx, "/orders/d", coordination.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireSemaphore(ctx, "x"); err != nil {
		t.Fatalf("B's acquire at the new leader: %v", err)
	}
	grantedB := time.Now()
	stopSending()
	if lease.Context().Err() == nil {
		t.Fatalf("B was granted the semaphore while A's lease is live (%d immediate refusals answered to A by the deposed leader)", refused.Load())
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, coordination.ErrDeadlinePassed) {
		t.Fatalf("A's lease ended with %v, want ErrDeadlinePassed", cause)
	}
	if e := leaseEnded.Load(); e != 0 {
		t.Logf("%d refusals answered to A; A's lease ended %v before B's grant", refused.Load(), grantedB.Sub(time.Unix(0, e)).Round(time.Millisecond))
	}
	select {
	case err := <-refusals:
		t.Logf("A's requests stopped being refused at once: %v", err)
	default:
	}
	if refused.Load() == 0 {
		t.Fatal("the deposed leader refused nothing: the scenario did not happen")
	}
}
