package ticketing_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// BenchmarkClientAcquireRelease measures the client library's own cost
// per acquire+release pair (allocs/op, CPU) against the scripted fake
// server, which answers at once and commits nothing: one op is one pair,
// 16 goroutines per GOMAXPROCS on one Broker. Timings are never asserted;
// CI runs it once with -benchtime 1x.
//
//	go test -run '^$' -bench ClientAcquireRelease -benchmem -benchtime 3s .
func BenchmarkClientAcquireRelease(b *testing.B) {
	l := faketicketd.NewLocks()
	b.Cleanup(l.Close)
	srv := faketicketd.Start(b, faketicketd.Serve(l, faketicketd.Ready{}))
	br, err := ticketing.Connect(srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := br.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	var next, fails atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench/%d", next.Add(1))
		ctx := context.Background()
		for pb.Next() {
			t, err := br.Acquire(ctx, key, 0, 30*time.Second, 0)
			if err != nil {
				fails.Add(1)
				continue
			}
			if err := t.Release(ctx); err != nil {
				fails.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d of %d pairs failed", n, b.N)
	}
}
