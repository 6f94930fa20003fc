package crashtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
)

// TestPlannedRollingRestartLeavesNoAcquireIndeterminate restarts every
// server of a three-server cluster in turn with SIGTERM, as
// docs/deployment.md's "Restarts and upgrades" does (followers first, the
// leader last), while clients acquire and release in a loop. The stopping
// leader drains what it proposed and ends its sessions with E 11; the
// client sends the acquires still pending again with the same owners. No
// acquire may end indeterminate, and no release may fail.
func TestPlannedRollingRestartLeavesNoAcquireIndeterminate(t *testing.T) {
	c := startClusterConfig(t, 3, plannedConfig)
	b, err := ticketing.Connect(strings.Join(c.addrs(), ","))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	var granted, notAcquired, indeterminate, otherAcq, releaseFailed atomic.Int64
	var firstErrs sync.Map // kind -> first error, for the report
	note := func(kind string, err error) { firstErrs.LoadOrStore(kind, err) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A few keys per worker, some shared, so that acquires queue too.
				key := fmt.Sprintf("rolling/%d", (w+i)%(workers/2))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				tk, err := b.Acquire(ctx, key, 5*time.Second, 30*time.Second, 0)
				switch {
				case err == nil:
					granted.Add(1)
					if err := tk.Release(ctx); err != nil {
						releaseFailed.Add(1)
						note("release", err)
					}
				case errors.Is(err, ticketing.ErrIndeterminate):
					indeterminate.Add(1)
					note("indeterminate", err)
				case errors.Is(err, ticketing.ErrNotAcquired):
					notAcquired.Add(1)
				default:
					otherAcq.Add(1)
					note("other", err)
				}
				cancel()
			}
		}()
	}
	// progress waits until the clients have been granted n more tickets.
	progress := func(what string, n int64) {
		t.Helper()
		from := granted.Load()
		deadline := time.Now().Add(startTimeout)
		for granted.Load() < from+n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the clients were granted %d tickets in %v, want %d", what, granted.Load()-from, startTimeout, n)
			}
			time.Sleep(20 * time.Millisecond) // polling a counter, with a deadline
		}
	}
	progress("before the restarts", 200)
	leader := c.leader()
	order := []int{}
	for i := range c.procs {
		if i != leader {
			order = append(order, i)
		}
	}
	order = append(order, leader)
	for _, i := range order {
		p := c.procs[i]
		p.stop()
		if code := p.exitCode(); code != 0 {
			t.Fatalf("%s exited with %d after SIGTERM\n%s", p.id, code, p.logTail(30))
		}
		p.start()
		p.mustReady()
		progress("after restarting "+p.id, 200)
	}
	close(stop)
	wg.Wait()
	t.Logf("rolling restart of 3 servers (leader last, was %s): %d granted and released, %d not acquired within 5 s, %d indeterminate, %d other acquire errors, %d failed releases",
		c.procs[leader].id, granted.Load(), notAcquired.Load(), indeterminate.Load(), otherAcq.Load(), releaseFailed.Load())
	firstErrs.Range(func(k, v any) bool {
		t.Errorf("first %s error: %v", k, v)
		return true
	})
	if indeterminate.Load() != 0 || otherAcq.Load() != 0 || releaseFailed.Load() != 0 {
		t.Errorf("a planned rolling restart left %d acquires indeterminate, %d failed otherwise and %d releases failed; want none",
			indeterminate.Load(), otherAcq.Load(), releaseFailed.Load())
	}
}
