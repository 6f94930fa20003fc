package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The workloads beyond the two lock loops (loop.go).
const (
	// Hold fills the servers with N held locks, then runs a sample of
	// uncontended workers on other keys at that size.
	Hold = "hold"
	// Connections opens N idle connections, then runs a few uncontended
	// workers beside them.
	Connections = "connections"
)

// Workloads lists every workload, as a generator's -workload takes them.
var Workloads = []string{Uncontended, Contended, Hold, Connections}

// Shape is the load every generator runs alike: the workload, its workers
// and how many connections they share, the window, and the bounds. What is
// a system's own (its lease, its key prefix, its client's options) stays
// with its generator.
type Shape struct {
	Workload    string
	Nodes       int
	Clients     int           // active workers (0: the workload's default)
	Conns       int           // connections (clients) the workers share
	PerConn     int           // when > 0: ceil(workers/PerConn) connections instead of Conns
	Duration    time.Duration // measured window
	Warmup      time.Duration // unmeasured run-in
	N           int           // hold: locks held; connections: idle connections (0: the system's default)
	FillPar     int           // hold: fill acquires in flight
	FillTimeout time.Duration // hold: bound on the fill
	OpTimeout   time.Duration // per acquire or release call
	MaxOps      int64         // hard bound on iterations per worker
}

// Sizes are a system's defaults of the hold and connections workloads. They
// may differ between systems (etcd keeps a lease per held lock), and
// bench/compare.sh gives each its own.
type Sizes struct {
	Hold, Connections, FillPar int
}

// Flags registers the shape's flags on fs, with sizes' defaults; conns
// names what a connection is in the system's client ("Brokers",
// "clientv3.Clients").
func (s *Shape) Flags(fs *flag.FlagSet, sizes Sizes, conns string) {
	fs.StringVar(&s.Workload, "workload", Uncontended, "workload: "+strings.Join(Workloads, "|"))
	fs.IntVar(&s.Nodes, "nodes", 1, "servers to start: 1 or 3 (ignored against existing servers)")
	fs.IntVar(&s.Clients, "clients", 0, "active workers (0: 128 uncontended, 16 contended, 8 hold sample, 4 connections trickle)")
	fs.IntVar(&s.Conns, "conns", 1, conns+" (connections) the workers share; 1 is each client's documented usage")
	fs.IntVar(&s.PerConn, "per-conn", 0, "when > 0: ceil(workers/per-conn) "+conns+" instead of -conns")
	fs.DurationVar(&s.Duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&s.Warmup, "warmup", 10*time.Second, "unmeasured warmup before the window")
	fs.IntVar(&s.N, "n", 0, fmt.Sprintf("hold: locks to hold (default %d); connections: idle %s (default %d)", sizes.Hold, conns, sizes.Connections))
	fs.IntVar(&s.FillPar, "fill-par", sizes.FillPar, "hold: acquires in flight while filling")
	fs.DurationVar(&s.FillTimeout, "fill-timeout", 10*time.Minute, "hold: bound on the fill")
	fs.DurationVar(&s.OpTimeout, "op-timeout", 30*time.Second, "timeout of each acquire and release call")
	fs.Int64Var(&s.MaxOps, "max-ops", 10_000_000, "hard cap on iterations per worker")
}

// Check says what is wrong with a shape read from flags; extra are
// workloads of the generator's own beyond Workloads.
func (s *Shape) Check(extra ...string) error {
	if !slices.Contains(Workloads, s.Workload) && !slices.Contains(extra, s.Workload) {
		return fmt.Errorf("unknown -workload %q (want %s)", s.Workload, strings.Join(append(slices.Clone(Workloads), extra...), "|"))
	}
	if s.Duration <= 0 || s.Warmup < 0 {
		return errors.New("-duration must be > 0 and -warmup >= 0")
	}
	return nil
}

// ApplyDefaults fills what was left zero: the workload's worker count and
// size (sizes), and the bounds.
func (s *Shape) ApplyDefaults(sizes Sizes) {
	if s.Clients <= 0 {
		s.Clients = map[string]int{Uncontended: 128, Contended: 16, Hold: 8, Connections: 4}[s.Workload]
	}
	if s.N <= 0 {
		s.N = map[string]int{Hold: sizes.Hold, Connections: sizes.Connections}[s.Workload]
	}
	if s.Conns <= 0 {
		s.Conns = 1
	}
	if s.FillPar <= 0 {
		s.FillPar = sizes.FillPar
	}
	if s.FillTimeout <= 0 {
		s.FillTimeout = 10 * time.Minute
	}
	if s.OpTimeout <= 0 {
		s.OpTimeout = 30 * time.Second
	}
	if s.MaxOps <= 0 {
		s.MaxOps = 10_000_000
	}
}

// ConnsFor says how many connections n concurrent workers share: Conns, or
// ceil(n/PerConn) when PerConn is set; never more than n.
func (s *Shape) ConnsFor(n int) int {
	k := s.Conns
	if s.PerConn > 0 {
		k = (n + s.PerConn - 1) / s.PerConn
	}
	return max(1, min(k, n))
}

// Window is the measured window of a run that starts now: after the
// warmup, for the duration.
func (s *Shape) Window() Window {
	start := time.Now().Add(s.Warmup)
	return Window{Start: start, End: start.Add(s.Duration)}
}

// LoopMode is what the loop workloads count: grants (handoffs) for the
// contended one, acquire+release pairs for the others.
func (s *Shape) LoopMode() LoopMode {
	if s.Workload == Contended {
		return CountAcquires
	}
	return CountPairs
}

// RunWorkers runs the Clients workers of the loop workloads (uncontended,
// contended, and the sample of hold and connections) over win and returns
// their records: worker i drives lock(i) on its key (prefix/i; the sample's
// prefix/sample/i; every worker prefix/contended in the contended one, one
// holder at a time checked), each grant's token checked to increase.
// interval > 0 paces each worker to a pair per interval, their first pairs
// spread over one interval.
func (s *Shape) RunWorkers(ctx context.Context, prefix string, win Window, interval time.Duration, lock func(i int) Lock) []*Recorder {
	lc := LoopConfig{Mode: s.LoopMode(), OpTimeout: s.OpTimeout, MaxOps: s.MaxOps, Interval: interval}
	shared := &SharedKeyCheck{}
	recs := make([]*Recorder, s.Clients)
	var wg sync.WaitGroup
	for i := range s.Clients {
		recs[i] = &Recorder{}
		var key string
		var check HeldCheck
		switch s.Workload {
		case Contended:
			key, check = prefix+"/contended", shared
		case Hold:
			key, check = fmt.Sprintf("%s/sample/%d", prefix, i), &PerKeyCheck{}
		default:
			key, check = fmt.Sprintf("%s/%d", prefix, i), &PerKeyCheck{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if interval > 0 {
				SleepUntil(ctx, time.Now().Add(interval*time.Duration(i)/time.Duration(s.Clients)), win.End)
			}
			LockLoop(ctx, lock(i), key, win, lc, check, recs[i])
		}()
	}
	wg.Wait()
	return recs
}

// LoopResult sums the workers' records over win into the result of a loop
// run of system, with its notes: own (the system's client, settings and
// connections), then the warmup, where the fencing token comes from
// (token), the token violations, the pacing (rate > 0: paced at rate a
// second), cpu, extra, and the first errors.
func (s *Shape) LoopResult(system string, recs []*Recorder, win Window, own []string, token string, rate float64, cpu string, extra ...string) *Result {
	r := &Result{System: system, Workload: s.Workload, Nodes: s.Nodes, Clients: s.Clients}
	violations, samples := r.AddRecorders(recs, win, s.LoopMode() == CountAcquires)
	notes := append(slices.Clone(own),
		fmt.Sprintf("warmup_s=%.1f", s.Warmup.Seconds()),
		"token="+token,
		fmt.Sprintf("token_violations=%d", violations))
	if rate > 0 {
		notes = append(notes, fmt.Sprintf("paced_rate=%.1f/s", rate))
	} else {
		notes = append(notes, "closed_loop")
	}
	if cpu != "" {
		notes = append(notes, cpu)
	}
	notes = append(notes, extra...)
	if len(samples) > 0 {
		notes = append(notes, "first_errors=["+strings.Join(samples, " | ")+"]")
	}
	r.Notes = strings.Join(notes, "; ")
	return r
}

// FillCount counts the hold workload's fill: locks held, failures, and the
// first failure's text. Safe for concurrent use.
type FillCount struct {
	Held, Errors atomic.Int64
	mu           sync.Mutex
	first        string
}

// Fail counts a failure of what (a lock, a session).
func (f *FillCount) Fail(what string, err error) {
	f.Errors.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == "" {
		f.first = what + ": " + err.Error()
	}
}

// First is the first failure's text, "" when none failed.
func (f *FillCount) First() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// Notes say what the fill did and cost: the servers' RSS before it,
// after it and at the end, and per held lock.
func (f *FillCount) Notes(rssBefore, rssFilled, rssEnd int64) string {
	held := f.Held.Load()
	n := fmt.Sprintf(" rss_before_fill=%d rss_after_fill=%d rss_end=%d", rssBefore, rssFilled, rssEnd)
	if held > 0 && rssFilled > rssBefore {
		n += fmt.Sprintf(" rss_per_held_lock_bytes=%d", (rssFilled-rssBefore)/held)
	}
	if first := f.First(); first != "" {
		n += " fill_first_error=[" + first + "]"
	}
	return n
}

// Runs are a generator's runs of the workloads: the loop workloads'
// (uncontended and contended; decorate, when not nil, adds to the result,
// as the hold and connections runs do to their sample's), the hold
// workload's and the connections workload's.
type Runs struct {
	Loops             func(ctx context.Context, decorate func(*Result)) (*Result, error)
	Hold, Connections func(context.Context) (*Result, error)
}

// Run runs the shape's workload with runs.
func (s *Shape) Run(ctx context.Context, runs Runs) (*Result, error) {
	switch s.Workload {
	case Uncontended, Contended:
		return runs.Loops(ctx, nil)
	case Hold:
		return runs.Hold(ctx)
	case Connections:
		return runs.Connections(ctx)
	}
	return nil, fmt.Errorf("unknown workload %q (want one of %s)", s.Workload, strings.Join(Workloads, ", "))
}
