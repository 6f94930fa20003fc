package coordtest_test

// Benchmarks of coordination nodes on in-process servers (testcluster,
// fsync on). Timings are never asserted; numbers and the commands are in
// docs/benchmarks.md, "Coordination".

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/cutproxy"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

const benchSessions = 128

func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// benchSessionsOn opens n sessions on path, on c's broker (its one
// connection, against a server that carries many sessions on one).
func benchSessionsOn(b *testing.B, ctx context.Context, c *coordination.Client, path string, n int, opts ...coordination.SessionOption) []*coordination.Session {
	out := make([]*coordination.Session, n)
	for i := range out {
		s, err := c.Session(ctx, path, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		out[i] = s
	}
	return out
}

// BenchmarkSemaphore128Sessions: 128 sessions of one client (one broker)
// acquire and release one unit of one semaphore in a loop; one op = one
// acquire+release pair. limit=128: nobody queues; limit=8: 120 sessions wait
// in the FIFO queue at any time, so each release hands the unit over.
func BenchmarkSemaphore128Sessions(b *testing.B) {
	for _, servers := range []int{1, 3} {
		for _, limit := range []uint64{benchSessions, 8} {
			b.Run(fmt.Sprintf("servers=%d/limit=%d", servers, limit), func(b *testing.B) {
				cl := testcluster.Start(b, servers)
				ctx := benchCtx(b)
				c, err := newCoordClient(b, cl.Addr(cl.LeaderIndex(b)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				if err := c.CreateNode(ctx, "/bench", coordination.NodeConfig{}); err != nil {
					b.Fatal(err)
				}
				ss := benchSessionsOn(b, ctx, c, "/bench", benchSessions)
				if err := ss[0].CreateSemaphore(ctx, "pool", limit, nil); err != nil {
					b.Fatal(err)
				}
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				errs := make(chan error, len(ss))
				b.ResetTimer()
				start := time.Now()
				for _, s := range ss {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for left.Add(-1) >= 0 {
							l, err := s.AcquireSemaphore(ctx, "pool", coordination.Shared())
							if err == nil {
								err = l.Release(ctx)
							}
							if err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
			})
		}
	}
}

// BenchmarkElectionFailover: an election with a leader, a queued candidate
// and 16 observers (each a session of its own). The leader's client is cut
// off (its connection and every new one refused, as when its process dies);
// one op = the time from the cut until every observer has seen the
// candidate as the new leader. The leader's session timeout (1 s) is part
// of it: the server must not hand the election over before then. Reported:
// the median and the worst failover, and the median minus the timeout.
func BenchmarkElectionFailover(b *testing.B) {
	const observers = 16
	const timeout = time.Second
	for _, servers := range []int{1, 3} {
		b.Run(fmt.Sprintf("servers=%d", servers), func(b *testing.B) {
			cl := testcluster.Start(b, servers)
			ctx := benchCtx(b)
			leaderAddr := cl.Addr(cl.LeaderIndex(b))
			c, err := newCoordClient(b, leaderAddr)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			if err := c.CreateNode(ctx, "/bench", coordination.NodeConfig{}); err != nil {
				b.Fatal(err)
			}
			obs := benchSessionsOn(b, ctx, c, "/bench", observers)
			var took []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				name := fmt.Sprintf("e%d", i)
				// The leader, through a proxy that stands in for its network.
				px := cutproxy.Start(b, leaderAddr)
				lc, err := newCoordClient(b, px.Addr())
				if err != nil {
					b.Fatal(err)
				}
				a, err := lc.Session(ctx, "/bench", coordination.WithTimeout(timeout))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := a.Election(name).Campaign(ctx, []byte("a")); err != nil {
					b.Fatal(err)
				}
				cand := benchSessionsOn(b, ctx, c, "/bench", 1)[0]
				queued := make(chan struct{})
				go func() {
					cand.Election(name).Campaign(ctx, []byte("b"))
					close(queued)
				}()
				octx, stop := context.WithCancel(ctx)
				var seen sync.WaitGroup
				var ready sync.WaitGroup
				for _, o := range obs {
					seen.Add(1)
					ready.Add(1)
					ch := o.Election(name).Observe(octx)
					go func() {
						defer seen.Done()
						sawA := false
						for li := range ch {
							if string(li.Data) == "a" && !sawA {
								sawA = true
								ready.Done()
							}
							if sawA && string(li.Data) == "b" {
								return
							}
						}
					}()
				}
				ready.Wait()
				b.StartTimer()
				start := time.Now()
				px.Close()
				seen.Wait()
				took = append(took, time.Since(start))
				b.StopTimer()
				<-queued
				stop()
				lc.Close()
				cand.Close(ctx)
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			med := took[len(took)/2]
			b.ReportMetric(float64(med.Milliseconds()), "ms-median")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "ms-worst")
			b.ReportMetric(float64((med - timeout).Milliseconds()), "ms-over-timeout")
		})
	}
}

// BenchmarkServerFailover: three servers, 128 sessions of one client (each
// with one hold on a shared semaphore). One op = the time from
// killing the leading server until every session is attached again at the
// new leader, with its hold (the restore keeps it). The killed server is
// restarted between ops, outside the timing.
func BenchmarkServerFailover(b *testing.B) {
	cl := testcluster.Start(b, 3)
	ctx := benchCtx(b)
	c, err := newCoordClient(b, cl.AddrList())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.CreateNode(ctx, "/bench", coordination.NodeConfig{SessionGracePeriod: time.Minute}); err != nil {
		b.Fatal(err)
	}
	attachedAgain := make(chan struct{}, benchSessions)
	ss := make([]*coordination.Session, benchSessions)
	for i := range ss {
		var lost atomic.Bool
		s, err := c.Session(ctx, "/bench", coordination.WithTimeout(30*time.Second), coordination.WithStateCallback(func(st coordination.State) {
			switch st {
			case coordination.Detached:
				lost.Store(true)
			case coordination.Attached:
				if lost.Swap(false) {
					attachedAgain <- struct{}{}
				}
			}
		}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		ss[i] = s
	}
	if err := ss[0].CreateSemaphore(ctx, "pool", benchSessions, nil); err != nil {
		b.Fatal(err)
	}
	for _, s := range ss {
		if _, err := s.AcquireSemaphore(ctx, "pool", coordination.Shared()); err != nil {
			b.Fatal(err)
		}
	}
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		leader := cl.LeaderIndex(b)
		start := time.Now()
		cl.Kill(leader)
		for n := 0; n < benchSessions; n++ {
			select {
			case <-attachedAgain:
			case <-ctx.Done():
				b.Fatalf("%d sessions attached again", n)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		d, _, err := ss[0].DescribeSemaphore(ctx, "pool", coordination.DescribeOptions{})
		if err != nil || d.Count != benchSessions {
			b.Fatalf("holds after the failover: %+v %v", d, err)
		}
		cl.Restart(leader) // rejoins as a follower; Raft lets only an up-to-date server lead
		b.StartTimer()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "ms-median")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "ms-worst")
}
