package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

const counterSchema = `CREATE TABLE counters (
	id         text   PRIMARY KEY,
	n          bigint NOT NULL,
	last_token bigint NOT NULL
);
CREATE TABLE counter_log (
	n      bigint PRIMARY KEY, -- the counter's value after the increment
	token  bigint NOT NULL,
	worker int    NOT NULL
);
INSERT INTO counters VALUES ('c', 0, 0)`

// progress is what the workers know about each other: the largest token
// committed so far, and how many workers are still running (not finished,
// not paused). A paused worker waits on it.
type progress struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	maxToken  uint64        // largest token whose transaction committed
	committed int           // successful fenced commits
	running   int
}

func newProgress(workers int) *progress {
	return &progress{changed: make(chan struct{}), running: workers}
}

func (p *progress) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *progress) commit(token uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.committed++
	p.maxToken = max(p.maxToken, token)
	p.broadcast()
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	p.broadcast()
}

// pause blocks a worker holding token until another worker has committed a
// larger token, and reports true then. So that the test cannot deadlock, it
// also ends (reporting false) when no other worker is running any more,
// since then nobody could.
func (p *progress) pause(ctx context.Context, token uint64) (overtaken bool, err error) {
	p.mu.Lock()
	p.running--
	p.broadcast()
	defer func() {
		p.running++
		p.broadcast()
		p.mu.Unlock()
	}()
	for p.maxToken <= token && p.running > 0 {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			return false, ctx.Err()
		}
		p.mu.Lock()
	}
	return p.maxToken > token, nil
}

// TestConcurrentWorkers runs 8 workers, each its own client process, that
// loop acquire → fenced read-modify-write increment of one counter → commit
// → release, with 1 s leases. A few (worker, iteration) pairs chosen at
// random are paused after the acquire until another worker has committed a
// larger token, which the server can only have granted after the paused
// lease expired.
//
// It checks that the counter equals the number of successful fenced commits,
// that the log of increments has one entry per value 1..n with tokens rising
// in commit order, that the stored high-water mark and last_token are the
// largest committed token, that every failed write failed with ErrStaleToken
// after exactly one attempt under retry.Do, and that every paused worker that
// was overtaken was rejected.
//
// It runs through both drivers on a 1-node cluster, and through native pgx on
// a 3-node cluster.
func TestConcurrentWorkers(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, nodes)
			for _, d := range drivers {
				if nodes == 3 && d.name != "pgx" {
					continue
				}
				t.Run(d.name, func(t *testing.T) {
					t.Parallel()
					concurrentWorkers(t, c.AddrList(), newStore(t, d.open, counterSchema), "counters/"+t.Name())
				})
			}
		})
	}
}

func concurrentWorkers(t *testing.T, addrs string, s store, key string) {
	const (
		workers = 8
		iters   = 8
		pauses  = 3
	)
	ctx := testCtx(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("pause plan seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// Pauses only in the first half of a worker's iterations, so that other
	// workers still have work to do and overtake it.
	plan := map[[2]int]bool{}
	for len(plan) < pauses {
		plan[[2]int{rng.IntN(workers), rng.IntN(iters / 2)}] = true
	}

	brokers := make([]*ticketing.Broker, workers)
	for w := range brokers {
		brokers[w] = connect(t, addrs)
	}

	p := newProgress(workers)
	var mu sync.Mutex
	var stale, overtaken int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			defer p.finish()
			for i := range iters {
				tk, err := acquire(ctx, brokers[w], key, 30*time.Second, time.Second, 0)
				if err != nil {
					t.Errorf("worker %d: acquire: %v", w, err)
					return
				}
				token := tk.Token()
				wasOvertaken := false
				if plan[[2]int{w, i}] {
					if wasOvertaken, err = p.pause(ctx, token); err != nil {
						t.Errorf("worker %d: pause: %v", w, err)
						return
					}
				}
				attempts, err := retried(ctx, s, func(ctx context.Context, tx txn) error {
					if err := tx.check(ctx, key, token); err != nil {
						return err
					}
					n, err := tx.queryInt(ctx, `SELECT n FROM counters WHERE id = 'c'`)
					if err != nil {
						return err
					}
					if err := tx.exec(ctx, `UPDATE counters SET n = $1, last_token = $2 WHERE id = 'c'`, n+1, token); err != nil {
						return err
					}
					return tx.exec(ctx, `INSERT INTO counter_log (n, token, worker) VALUES ($1, $2, $3)`, n+1, token, w)
				})
				switch {
				case err == nil:
					p.commit(token)
					if wasOvertaken {
						t.Errorf("worker %d: token %d committed after a larger token did", w, token)
					}
				case errors.Is(err, fence.ErrStaleToken):
					if attempts != 1 {
						t.Errorf("worker %d: stale write ran %d times under retry.Do, want 1", w, attempts)
					}
					mu.Lock()
					stale++
					mu.Unlock()
				default:
					t.Errorf("worker %d: fenced increment with token %d: %v", w, token, err)
				}
				if wasOvertaken {
					mu.Lock()
					overtaken++
					mu.Unlock()
				}
				// A lease that ran out (paused, or a slow machine) makes the
				// release find the key no longer held; that is expected. A
				// release that got no answer (a leader change) is not what
				// this test is about: the lease ends the ticket anyway.
				if err := tk.Release(ctx); err != nil && !errors.Is(err, ticketing.ErrNotHeld) {
					t.Logf("worker %d: release token %d: %v", w, token, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	committed, maxToken := p.committed, p.maxToken
	t.Logf("%d fenced commits, %d stale rejections, %d of %d pauses overtaken; largest token %d",
		committed, stale, overtaken, pauses, maxToken)
	if committed+stale != workers*iters {
		t.Errorf("%d commits + %d stale = %d, want %d iterations", committed, stale, committed+stale, workers*iters)
	}
	if overtaken == 0 {
		t.Errorf("no paused worker was overtaken: the run did not exercise a stale holder")
	}
	if stale < overtaken {
		t.Errorf("%d stale rejections for %d overtaken pauses", stale, overtaken)
	}

	var n, lastToken int64
	if err := s.queryRow(ctx, `SELECT n, last_token FROM counters WHERE id = 'c'`).Scan(&n, &lastToken); err != nil {
		t.Fatal(err)
	}
	if n != int64(committed) {
		t.Errorf("counter = %d, want %d (the number of successful fenced commits)", n, committed)
	}
	if uint64(lastToken) != maxToken {
		t.Errorf("counter's last_token = %d, want the largest committed token %d", lastToken, maxToken)
	}
	if mark, err := fenceMark(ctx, s, key); err != nil || mark != maxToken {
		t.Errorf("fence mark = %d, %v; want the largest committed token %d", mark, err, maxToken)
	}
	// The log: values 1..n, each once, and tokens strictly rising with them.
	var entries, gaps, unordered int64
	err := s.queryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE n <> rn),
			count(*) FILTER (WHERE token <= prev)
		FROM (SELECT n, token, row_number() OVER (ORDER BY n) AS rn,
		             coalesce(lag(token) OVER (ORDER BY n), 0) AS prev
		      FROM counter_log) l`).Scan(&entries, &gaps, &unordered)
	if err != nil {
		t.Fatal(err)
	}
	if entries != int64(committed) || gaps != 0 || unordered != 0 {
		t.Errorf("counter_log: %d entries (want %d), %d not numbered 1..n, %d with a token not above the previous one",
			entries, committed, gaps, unordered)
	}
}
