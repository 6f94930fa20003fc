package benchkit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); got != (Percentiles{}) {
		t.Fatalf("empty: %+v", got)
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := Summarize(d)
	want := Percentiles{P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Fatalf("got %+v want %+v", got, want)
	}
	for i := 1; i < len(d); i++ {
		if d[i-1] > d[i] {
			t.Fatal("Summarize did not sort in place")
		}
	}
	if got := Summarize([]time.Duration{1500 * time.Microsecond}); got != (Percentiles{1.5, 1.5, 1.5, 1.5}) {
		t.Fatalf("single: %+v", got)
	}
	// Rounded to microseconds.
	if got := Summarize([]time.Duration{1234567 * time.Nanosecond}); got.P50 != 1.235 {
		t.Fatalf("rounding: %+v", got)
	}
}

func TestRank(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{
		{0, 1}, {0.01, 1}, {0.10, 1}, {0.11, 2}, {0.50, 5}, {0.51, 6},
		{0.90, 9}, {0.99, 10}, {1, 10}, {1.5, 10},
	} {
		if got := Rank(d, c.p); got != c.want {
			t.Errorf("Rank(1..10, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Rank([]time.Duration{7}, 0.5); got != 7 {
		t.Errorf("Rank single = %v", got)
	}
}

func TestResultJSON(t *testing.T) {
	r := &Result{System: "etcd", Workload: "hold", Nodes: 3, Clients: 2, DurationS: 1.5, Ops: 7,
		OpsPerSec: 4.7, Errors: 1, LatencyMs: Percentiles{1, 2, 3, 4}, ServerRSSBytes: 10, Notes: "a=b"}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	want := `{"system":"etcd","workload":"hold","nodes":3,"clients":2,"duration_s":1.5,"ops":7,"ops_per_sec":4.7,"errors":1,` +
		`"latency_ms":{"p50":1,"p90":2,"p99":3,"max":4},"acquire_latency_ms":{"p50":0,"p90":0,"p99":0,"max":0},` +
		`"server_rss_bytes":10,"notes":"a=b"}` + "\n"
	if buf.String() != want {
		t.Fatalf("got  %s\nwant %s", buf.String(), want)
	}
	if got, want := r.HumanDigits(2), "etcd hold nodes=3 clients=2 dur=1.5s ops=7 (4.7/s) errors=1 "+
		"lat_ms p50=1.00 p90=2.00 p99=3.00 max=4.00 | acq_ms p50=0.00 p90=0.00 p99=0.00 max=0.00 | "+
		"server_rss=0.0MiB | a=b"; got != want {
		t.Fatalf("HumanDigits:\n got %s\nwant %s", got, want)
	}
	if Round(1.23456, 3) != 1.235 {
		t.Fatal("Round")
	}
}

func TestParallel(t *testing.T) {
	var n atomic.Int64
	boom := errors.New("boom")
	err := Parallel(context.Background(), 100, 8, func(i int) error {
		n.Add(1)
		if i == 42 {
			return boom
		}
		return nil
	})
	if err != boom || n.Load() != 100 {
		t.Fatalf("err=%v ran=%d", err, n.Load())
	}
	if err := Parallel(context.Background(), 0, 8, func(int) error { return boom }); err != nil {
		t.Fatal(err)
	}
}

func TestProcSelf(t *testing.T) {
	rss, err := ReadRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("ReadRSS(self) = %d, %v", rss, err)
	}
	if _, err := ReadCPU(os.Getpid()); err != nil {
		t.Fatalf("ReadCPU(self): %v", err)
	}
	if SumRSS([]int{os.Getpid(), -1}) <= 0 { // unreadable pids are skipped
		t.Fatal("SumRSS")
	}
}

func TestAddRecorders(t *testing.T) {
	start := time.Now()
	win := Window{Start: start, End: start.Add(2 * time.Second)}
	if !win.In(start) || win.In(win.End) || win.In(start.Add(-1)) {
		t.Fatal("Window.In")
	}
	a, b := &Recorder{}, &Recorder{}
	a.Ops, a.Pair, a.Acquire = 2, []time.Duration{4 * time.Millisecond, 2 * time.Millisecond}, []time.Duration{time.Millisecond, time.Millisecond}
	b.Ops, b.Violations, b.Pair, b.Acquire = 1, 1, []time.Duration{6 * time.Millisecond}, []time.Duration{3 * time.Millisecond}
	for _, s := range []string{"d", "c", "b", "a"} {
		b.Fail(s, errors.New("x"))
	}
	var r Result
	v, samples := r.AddRecorders([]*Recorder{a, b}, win, false)
	if v != 1 || r.Ops != 3 || r.Errors != 5 || r.DurationS != 2 || r.OpsPerSec != 1.5 {
		t.Fatalf("v=%d %+v", v, r)
	}
	if len(samples) != 3 || samples[0] != "b: x" || samples[2] != "d: x" {
		t.Fatalf("samples %q", samples)
	}
	if r.LatencyMs != (Percentiles{4, 6, 6, 6}) || r.AcquireLatencyMs != (Percentiles{1, 3, 3, 3}) {
		t.Fatalf("latencies %+v %+v", r.LatencyMs, r.AcquireLatencyMs)
	}
	var c Result
	c.AddRecorders([]*Recorder{a, b}, win, true)
	if c.LatencyMs != c.AcquireLatencyMs {
		t.Fatalf("acquiresOnly: %+v", c)
	}
}

func TestCPUNotes(t *testing.T) {
	t0 := time.Now()
	s0 := CPUSample{Wall: t0, Server: time.Second, Self: time.Second, Machine: 10 * time.Second}
	s1 := CPUSample{Wall: t0.Add(2 * time.Second), Server: 3 * time.Second, Self: 2 * time.Second, Machine: 14 * time.Second}
	got := CPUNotes(s0, s1, true)
	if len(got) != 3 || got[0] != "server_cpu_s=2.00 server_cpu_cores=1.00" || got[1] != "bench_cpu_s=1.00 bench_cpu_cores=0.50" ||
		!strings.HasPrefix(got[2], "machine_busy_cores=2.00 of ") || !strings.HasSuffix(got[2], " other_cpu_cores=0.50") {
		t.Fatalf("%q", got)
	}
	if got := CPUNotes(s0, s1, false); len(got) != 2 || !strings.HasSuffix(got[1], " other_cpu_cores=1.50") {
		t.Fatalf("no pids: %q", got)
	}
	if got := CPUNotes(s0, s0, true); got != nil {
		t.Fatalf("no time: %q", got)
	}
}

// tokenLock is an in-process lock whose tokens come from a function, so the
// loop's accounting and checks can be exercised without a server.
type tokenLock struct {
	next     func() uint64
	failEach int // every failEach-th acquire fails (0: never)
	calls    int
}

func (l *tokenLock) Acquire(context.Context, string) (uint64, func(context.Context) error, error) {
	l.calls++
	if l.failEach > 0 && l.calls%l.failEach == 0 {
		return 0, nil, errors.New("refused")
	}
	return l.next(), func(context.Context) error { return nil }, nil
}

func TestLockLoopCountsAndChecks(t *testing.T) {
	win := Window{Start: time.Now().Add(-time.Hour), End: time.Now().Add(time.Hour)}
	var tok uint64
	up := &tokenLock{next: func() uint64 { tok++; return tok }}
	rec := &Recorder{}
	LockLoop(context.Background(), up, "k", win, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 50}, &PerKeyCheck{}, rec)
	if rec.Ops != 50 || len(rec.Pair) != 50 || len(rec.Acquire) != 50 || rec.Violations != 0 || rec.Errs != 0 {
		t.Fatalf("increasing tokens: ops=%d pairs=%d acquires=%d violations=%d errs=%d", rec.Ops, len(rec.Pair), len(rec.Acquire), rec.Violations, rec.Errs)
	}

	same := &tokenLock{next: func() uint64 { return 7 }}
	rec = &Recorder{}
	LockLoop(context.Background(), same, "k", win, LoopConfig{Mode: CountAcquires, OpTimeout: time.Second, MaxOps: 10}, &SharedKeyCheck{}, rec)
	if rec.Ops != 10 || len(rec.Pair) != 0 || rec.Violations != 9 {
		t.Fatalf("repeated token: ops=%d pairs=%d violations=%d, want 10, 0, 9", rec.Ops, len(rec.Pair), rec.Violations)
	}

	failing := &tokenLock{next: func() uint64 { tok++; return tok }, failEach: 2}
	rec = &Recorder{}
	LockLoop(context.Background(), failing, "k", win, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 4}, &PerKeyCheck{}, rec)
	if rec.Ops != 2 || rec.Errs != 2 || len(rec.ErrSamples) != 2 {
		t.Fatalf("failing acquires: ops=%d errs=%d samples=%v", rec.Ops, rec.Errs, rec.ErrSamples)
	}

	// Outside the window nothing is recorded.
	past := Window{Start: time.Now().Add(time.Hour), End: time.Now().Add(2 * time.Hour)}
	rec = &Recorder{}
	LockLoop(context.Background(), up, "k", past, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 5}, &PerKeyCheck{}, rec)
	if rec.Ops != 0 || len(rec.Pair) != 0 {
		t.Fatalf("before the window: ops=%d", rec.Ops)
	}
}

// One connection by default (each client's documented usage); -conns and
// -per-conn spread the workers, never over more connections than workers.
func TestConnsFor(t *testing.T) {
	for _, tc := range []struct{ conns, perConn, n, want int }{
		{1, 0, 128, 1}, {16, 0, 128, 16}, {16, 0, 4, 4}, {1, 8, 128, 16}, {1, 8, 1, 1},
	} {
		s := Shape{Conns: tc.conns, PerConn: tc.perConn}
		if got := s.ConnsFor(tc.n); got != tc.want {
			t.Errorf("conns=%d per-conn=%d workers=%d: %d connections, want %d", tc.conns, tc.perConn, tc.n, got, tc.want)
		}
	}
	d := Shape{Workload: Uncontended}
	d.ApplyDefaults(Sizes{Hold: 10, Connections: 5, FillPar: 2})
	if d.ConnsFor(d.Clients) != 1 || d.Clients != 128 {
		t.Errorf("default: %d connections for %d workers, want 1 for 128", d.ConnsFor(d.Clients), d.Clients)
	}
}

// The loop workloads' workers: each its own key, or every one on one key
// one at a time in the contended workload, with tokens checked.
func TestRunWorkersKeys(t *testing.T) {
	for _, tc := range []struct {
		workload string
		keys     []string
	}{
		{Uncontended, []string{"p/0", "p/1", "p/2"}},
		{Hold, []string{"p/sample/0", "p/sample/1", "p/sample/2"}},
		{Contended, []string{"p/contended"}},
	} {
		s := Shape{Workload: tc.workload, Clients: 3, Duration: 50 * time.Millisecond, OpTimeout: time.Second, MaxOps: 5}
		var mu, held sync.Mutex // held: one lock over every key, granted with the next token
		seen := map[string]bool{}
		var next uint64
		recs := s.RunWorkers(context.Background(), "p", s.Window(), 0, func(int) Lock {
			return lockFunc(func(_ context.Context, key string) (uint64, func(context.Context) error, error) {
				mu.Lock()
				seen[key] = true
				mu.Unlock()
				held.Lock()
				next++
				return next, func(context.Context) error { held.Unlock(); return nil }, nil
			})
		})
		var keys []string
		for k := range seen {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.keys) || len(recs) != 3 {
			t.Errorf("%s: keys %v and %d records, want %v and 3", tc.workload, keys, len(recs), tc.keys)
		}
		for _, r := range recs {
			if r.Violations != 0 {
				t.Errorf("%s: %d token violations", tc.workload, r.Violations)
			}
		}
	}
}

type lockFunc func(ctx context.Context, key string) (uint64, func(context.Context) error, error)

func (f lockFunc) Acquire(ctx context.Context, key string) (uint64, func(context.Context) error, error) {
	return f(ctx, key)
}

// A loop run's notes: the system's own first, then what every system's
// say, in one order.
func TestLoopResultNotes(t *testing.T) {
	s := Shape{Workload: Uncontended, Clients: 1, Warmup: 2 * time.Second}
	r := s.LoopResult("sys", []*Recorder{{}}, Window{}, []string{"client x"}, "revision", 0, "cpu=1", "nice=5")
	if want := "client x; warmup_s=2.0; token=revision; token_violations=0; closed_loop; cpu=1; nice=5"; r.Notes != want || r.System != "sys" {
		t.Errorf("notes %q, want %q", r.Notes, want)
	}
	if r := s.LoopResult("sys", nil, Window{}, nil, "t", 12.5, ""); !strings.Contains(r.Notes, "paced_rate=12.5/s") {
		t.Errorf("paced run's notes %q", r.Notes)
	}
}

// The fill's notes keep the first failure and the RSS per held lock.
func TestFillCount(t *testing.T) {
	var f FillCount
	f.Held.Add(10)
	f.Fail("lock", errors.New("first"))
	f.Fail("lock", errors.New("second"))
	if got, want := f.Notes(1000, 2000, 2500), " rss_before_fill=1000 rss_after_fill=2000 rss_end=2500 rss_per_held_lock_bytes=100 fill_first_error=[lock: first]"; got != want || f.Errors.Load() != 2 {
		t.Errorf("notes %q (%d errors), want %q", got, f.Errors.Load(), want)
	}
}

// Each workload runs its generator's run; an unknown one is refused with
// the list.
func TestShapeRunDispatches(t *testing.T) {
	ran := ""
	run := func(name string) func(context.Context) (*Result, error) {
		return func(context.Context) (*Result, error) { ran = name; return &Result{}, nil }
	}
	loops := run("loops")
	runs := Runs{Loops: func(ctx context.Context, _ func(*Result)) (*Result, error) { return loops(ctx) }, Hold: run("hold"), Connections: run("connections")}
	for w, want := range map[string]string{Uncontended: "loops", Contended: "loops", Hold: "hold", Connections: "connections"} {
		s := Shape{Workload: w}
		if _, err := s.Run(context.Background(), runs); err != nil || ran != want {
			t.Errorf("%s ran %q (%v), want %s", w, ran, err, want)
		}
	}
	s := Shape{Workload: "nope"}
	if _, err := s.Run(context.Background(), runs); err == nil || !strings.Contains(err.Error(), "uncontended") {
		t.Errorf("unknown workload: %v", err)
	}
}
