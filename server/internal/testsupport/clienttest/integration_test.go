package clienttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Many goroutines on one broker against a real 1-node cluster: grants are
// exclusive, releases succeed and tokens grow.
func TestIntegration_ManyGoroutinesOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	c := testcluster.Start(t, 1)
	b := connect(t, c.AddrList())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 16, 25
	keys := []string{"it/a", "it/b", "it/c", "it/d"}
	var inUse [4]atomic.Int32
	var mu sync.Mutex
	var high [4]uint64
	var lastToken uint64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := (g + i) % len(keys)
				tk, err := b.Acquire(ctx, keys[k], 10*time.Second, 30*time.Second, time.Second)
				if err != nil {
					t.Errorf("acquire %s: %v", keys[k], err)
					return
				}
				if inUse[k].Add(1) != 1 {
					t.Errorf("two holders of %s", keys[k])
				}
				mu.Lock()
				if tk.Token() <= high[k] {
					t.Errorf("token %d for %s is not above its high-water mark %d", tk.Token(), keys[k], high[k])
				}
				high[k] = tk.Token()
				lastToken = max(lastToken, tk.Token())
				mu.Unlock()
				if tk.Remaining() < time.Second {
					t.Errorf("remaining %v below the budget", tk.Remaining())
				}
				inUse[k].Add(-1)
				if err := tk.Release(ctx); err != nil {
					t.Errorf("release %s token %d: %v", keys[k], tk.Token(), err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Releases were real: every key is free and a stale release is N.
	for _, k := range keys {
		d, err := b.Describe(ctx, k)
		if err != nil || d.Held {
			t.Errorf("describe %s: %+v, %v", k, d, err)
		}
	}
	if err := b.ReleaseToken(ctx, keys[0], high[0]); !errors.Is(err, ticketing.ErrNotHeld) {
		t.Errorf("release of a released token: %v, want ErrNotHeld", err)
	}
	// A later grant on any key is above every token seen.
	tk, err := b.Acquire(ctx, "it/other", 0, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Token() <= lastToken {
		t.Errorf("token %d not above %d", tk.Token(), lastToken)
	}
	tk.Release(ctx)
}

// Failover of a 3-node cluster under load: calls in flight when the leader
// dies end (granted, ErrIndeterminate, or another error) within their
// deadlines, and later calls succeed against the new leader.
func TestIntegration_FailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	c := testcluster.Start(t, 3)
	b := connect(t, c.AddrList())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	checkAdmin(t, ctx, c)

	var (
		grants, before atomic.Int64
		stop           atomic.Bool
		killed         atomic.Bool
		mu             sync.Mutex
		outcomes       = map[string]int{}
		high           = map[string]uint64{}
	)
	note := func(what string) {
		mu.Lock()
		outcomes[what]++
		mu.Unlock()
	}
	const workers = 12
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("fo/%d", (w+i)%6)
				cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				tk, err := b.Acquire(cctx, key, time.Second, 3*time.Second, 0)
				switch err {
				case nil:
					grants.Add(1)
					if !killed.Load() {
						before.Add(1)
					}
					mu.Lock()
					if tk.Token() <= high[key] {
						t.Errorf("token %d for %s not above %d", tk.Token(), key, high[key])
					}
					high[key] = tk.Token()
					mu.Unlock()
					if err := tk.Release(cctx); err != nil {
						note("release: " + kindOf(err))
					} else {
						note("granted and released")
					}
				default:
					note("acquire: " + kindOf(err))
				}
				cancel()
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	stopLoad := func() {
		stop.Store(true)
		select {
		case <-finished:
		case <-time.After(patience):
			t.Fatalf("calls did not return within their deadlines: a silent hang")
		}
	}
	defer stopLoad()

	waitUntil(t, "the load is granted", func() bool { return grants.Load() >= 50 })
	leader := c.LeaderIndex(t)
	killed.Store(true)
	c.Kill(leader)
	newLeader := c.LeaderIndex(t)
	if newLeader == leader {
		t.Fatalf("the killed server still leads")
	}
	atKill := grants.Load()
	waitUntil(t, "calls succeed against the new leader", func() bool { return grants.Load() >= atKill+30 })
	stopLoad()

	// A fresh call on a fresh key succeeds at once.
	tk, err := b.Acquire(ctx, "fo/fresh", 0, 5*time.Second, 0)
	if err != nil {
		t.Fatalf("acquire after failover: %v", err)
	}
	if err := tk.Release(ctx); err != nil {
		t.Errorf("release after failover: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("grants %d (before the kill %d); outcomes %v", grants.Load(), before.Load(), outcomes)
	for what := range outcomes {
		switch what {
		case "granted and released", "acquire: indeterminate", "acquire: not acquired", "acquire: unavailable",
			"acquire: deadline", "release: indeterminate", "release: not held", "release: unavailable", "release: deadline":
		default:
			t.Errorf("unexpected outcome %q", what)
		}
	}
}

// kindOf names an error's kind for the failover tally.
func kindOf(err error) string {
	switch {
	case errors.Is(err, ticketing.ErrIndeterminate):
		return "indeterminate"
	case errors.Is(err, ticketing.ErrNotAcquired):
		return "not acquired"
	case errors.Is(err, ticketing.ErrNotHeld):
		return "not held"
	case errors.Is(err, ticketing.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return err.Error()
}

// checkAdmin: an admin session with a follower reports its view, and a
// leader-only request names the leader's client address.
func checkAdmin(t *testing.T, ctx context.Context, c *testcluster.Cluster) {
	t.Helper()
	leader := c.LeaderIndex(t)
	follower := (leader + 1) % c.Len()
	a, err := ticketing.DialAdmin(ctx, c.Addr(follower), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var st ticketing.Status
	waitUntil(t, "the follower knows the leader", func() bool {
		st, err = a.Status(ctx)
		return err == nil && st.LeaderAddr != ""
	})
	if st.Role != "follower" || st.LeaderAddr != c.Addr(leader) || len(st.Members) != c.Len() {
		t.Errorf("follower status: %+v", st)
	}
	// A snapshot is the leader's: a follower's state may lag.
	var snap bytes.Buffer
	_, err = a.SaveSnapshot(ctx, &snap)
	var nl *ticketing.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr != c.Addr(leader) || snap.Len() != 0 {
		t.Errorf("snapshot from a follower: %v (%d bytes)", err, snap.Len())
	}
	err = a.RemoveMember(ctx, "n-none")
	if !errors.As(err, &nl) || nl.LeaderAddr != c.Addr(leader) {
		t.Errorf("leader-only op on a follower: %v", err)
	}
	la, err := ticketing.DialAdmin(ctx, c.Addr(leader), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if st, err := la.Status(ctx); err != nil || st.Role != "leader" {
		t.Errorf("leader status: %+v, %v", st, err)
	}
	if info, err := la.SaveSnapshot(ctx, &snap); err != nil || info.Size == 0 || info.Size != int64(snap.Len()) || info.Index == 0 {
		t.Errorf("snapshot from the leader: %+v, %v", info, err)
	}
}
