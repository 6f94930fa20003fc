package server_test

// Benchmarks of one in-process server (testcluster, fsync on). They run in
// CI with -benchtime 1x only to prove that they work; timings are never
// asserted. For numbers and profiles see docs/benchmarks.md, e.g.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 10s -cpuprofile cpu.out ./internal/server
//	go tool pprof -top cpu.out

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// brokers connects n Brokers to c's leader and waits until they are ready.
func brokers(b *testing.B, c *testcluster.Cluster, n int) []*ticketing.Broker {
	b.Helper()
	out := make([]*ticketing.Broker, n)
	for i := range out {
		br, err := ticketing.Connect(c.AddrList(), ticketing.WithLogger(testcluster.Logger()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = br.WaitReady(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		out[i] = br
	}
	return out
}

// BenchmarkAcquireRelease is one full acquire + release of the goroutine's
// own key through the client library, with 16 goroutines per GOMAXPROCS
// sharing 4 Brokers (about ticketbench's 8 workers per Broker). One op is
// one pair: two commits, both group-committed with the other goroutines'.
func BenchmarkAcquireRelease(b *testing.B) {
	c := testcluster.Start(b, 1)
	brs := brokers(b, c, 4)
	var next atomic.Int64
	var fails atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1)
		br := brs[int(i)%len(brs)]
		key := fmt.Sprintf("bench/%d", i)
		ctx := context.Background()
		for pb.Next() {
			acquireRelease(ctx, br, key, 0, &fails)
		}
	})
	b.StopTimer()
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d of %d pairs failed", n, b.N)
	}
}

// acquireRelease is one benchmark op: a ticket on key, released at once.
// Failures are counted, so that the benchmark fails after its timed part.
func acquireRelease(ctx context.Context, br *ticketing.Broker, key string, wait time.Duration, fails *atomic.Int64) {
	t, err := br.Acquire(ctx, key, wait, 30*time.Second, 0)
	if err != nil {
		fails.Add(1)
		return
	}
	if err := t.Release(ctx); err != nil {
		fails.Add(1)
	}
}

// BenchmarkContendedHandoff is many goroutines on one key (wait 10 s): one
// op is one grant, handed over by the previous holder's release.
func BenchmarkContendedHandoff(b *testing.B) {
	c := testcluster.Start(b, 1)
	brs := brokers(b, c, 2)
	var next atomic.Int64
	var fails atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		br := brs[int(next.Add(1))%len(brs)]
		ctx := context.Background()
		for pb.Next() {
			acquireRelease(ctx, br, "bench/contended", 10*time.Second, &fails)
		}
	})
	b.StopTimer()
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d of %d handoffs failed", n, b.N)
	}
}

// BenchmarkRawPipelined drives the server over one raw connection with
// window acquire/release cycles in flight at once (no client library): one
// op is one pair. It measures the server and the wire alone.
func BenchmarkRawPipelined(b *testing.B) {
	for _, window := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			c := testcluster.Start(b, 1)
			benchRaw(b, c.Addr(0), window)
		})
	}
}

func benchRaw(b *testing.B, addr string, window int) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := wire.NewReader(nc)
	w := bufio.NewWriterSize(nc, 64<<10)
	var buf []byte
	send := func(f *wire.Frame) {
		buf = wire.Append(buf[:0], f)
		w.Write(buf)
	}
	send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	w.Flush()
	var f wire.Frame
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := r.Next(&f); err != nil || f.Type != wire.TypeReady {
		b.Fatalf("hello: %v %s", err, f.Type)
	}
	window = min(window, b.N)
	keys := make([][]byte, window)
	var owner wire.Owner
	var seq uint64
	acquire := func(slot int) {
		seq++
		owner[0], owner[1], owner[2], owner[3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
		// Request ids: acquire 2*slot+1, release 2*slot+2 (unique while in flight).
		send(&wire.Frame{Type: wire.TypeAcquire, ID: uint32(2*slot + 1), Owner: owner, Wait: 0, Lease: 30, Key: keys[slot]})
	}
	b.ReportAllocs()
	b.ResetTimer()
	started, done := 0, 0
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "raw/%d", i)
		acquire(i)
		started++
	}
	w.Flush()
	for done < b.N {
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := r.Next(&f); err != nil {
			b.Fatalf("after %d pairs: %v", done, err)
		}
		switch f.Type {
		case wire.TypePing:
			send(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		case wire.TypeGranted:
			slot := int(f.ID-1) / 2
			send(&wire.Frame{Type: wire.TypeRelease, ID: uint32(2*slot + 2), Token: f.Token, Key: keys[slot]})
		case wire.TypeReleased:
			done++
			if started < b.N {
				acquire(int(f.ID-2) / 2)
				started++
			}
		default:
			b.Fatalf("unexpected %s (id %d, code %d %q)", f.Type, f.ID, f.Code, f.Text)
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}
