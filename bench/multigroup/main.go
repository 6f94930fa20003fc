// Command multigroup measures what running more than one Raft group in one
// process costs: N independent single-node hashicorp/raft groups, each with
// its own write-ahead log (raft-wal, fsynced on every append) in its own
// directory on the same disk, a tiny grant state machine (a token counter
// per key), and a fixed set of workers spread over the groups. For each N it
// reports throughput, latency and the process's CPU per operation, so the
// cost of a group, and what independent groups buy on one disk, are known
// before the product is split into groups.
//
//	cd bench/multigroup && GOWORK=off go run . -groups 1,2,4,8 -duration 10s
//
// It is a prototype for the design (docs/design.md, "Beyond one Raft
// group"), not the product: no network transport, no snapshots worth the
// name, no client protocol.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options mirrors the flags.
type options struct {
	groups   []int
	workers  int
	perGroup int // > 0: workers = perGroup × groups instead of workers
	keys     int
	duration time.Duration
	warmup   time.Duration
	dir      string
	jsonOut  bool
}

// row is one N's result (one JSON object per line with -json).
type row struct {
	Groups        int                  `json:"groups"`
	Workers       int                  `json:"workers"`
	DurationS     float64              `json:"duration_s"`
	Ops           int64                `json:"ops"`
	OpsPerSec     float64              `json:"ops_per_sec"`
	OpsPerSecPerG float64              `json:"ops_per_sec_per_group"`
	Errors        int64                `json:"errors"`
	Violations    int64                `json:"token_violations"`
	LatencyMs     benchkit.Percentiles `json:"latency_ms"`
	CPUPerOpUs    float64              `json:"cpu_per_op_us"`
	CPUCores      float64              `json:"cpu_cores"`
	OtherCores    float64              `json:"other_cpu_cores"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("multigroup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	groups := fs.String("groups", "1,2,4,8", "comma-separated group counts to run, one after another")
	var o options
	fs.IntVar(&o.workers, "workers", 64, "workers in all, spread evenly over the groups (each Apply waits for its commit)")
	fs.IntVar(&o.perGroup, "per-group", 0, "when > 0: this many workers per group (N groups get N times as many), instead of -workers in all")
	fs.IntVar(&o.keys, "keys", 1024, "keys in all; key k lives in group k mod N")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured window per group count")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured run-in per group count")
	fs.StringVar(&o.dir, "dir", "", "parent of the groups' log directories (default: a new dir under $TMPDIR, removed afterwards)")
	fs.BoolVar(&o.jsonOut, "json", false, "one JSON object per group count on stdout instead of a table")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, s := range strings.Split(*groups, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 64 {
			fmt.Fprintf(stderr, "multigroup: bad -groups entry %q: want numbers from 1 to 64, e.g. 1,2,4,8\n", s)
			return 2
		}
		o.groups = append(o.groups, n)
	}
	if o.workers < 1 || o.perGroup < 0 || o.keys < 1 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(stderr, "multigroup: -workers and -keys must be >= 1, -per-group >= 0, -duration > 0, -warmup >= 0")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.jsonOut {
		fmt.Fprintln(stdout, "| groups | workers | ops/s | ops/s per group | p50 ms | p99 ms | CPU µs/op | CPU cores | other load (cores) | errors |")
		fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|---|")
	}
	for _, n := range o.groups {
		r, err := measure(ctx, o, n)
		if err != nil {
			fmt.Fprintf(stderr, "multigroup: %d group(s): %v\n", n, err)
			return 1
		}
		if o.jsonOut {
			b, _ := json.Marshal(r) // plain struct: cannot fail
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintf(stdout, "| %d | %d | %.0f | %.0f | %.3f | %.3f | %.1f | %.2f | %.2f | %d |\n",
				r.Groups, r.Workers, r.OpsPerSec, r.OpsPerSecPerG, r.LatencyMs.P50, r.LatencyMs.P99, r.CPUPerOpUs, r.CPUCores, r.OtherCores, r.Errors+r.Violations)
		}
	}
	return 0
}

// grantFSM is the state machine of one group: a token counter per key.
// Applying a grant of key k returns k's next token; the counter never goes
// back, so tokens are strictly increasing per key within the group.
type grantFSM struct {
	mu     sync.Mutex
	tokens map[string]uint64
}

func (f *grantFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[string(l.Data)]++
	return f.tokens[string(l.Data)]
}

// Snapshot and Restore are minimal: a run is far too short to snapshot
// (SnapshotThreshold is set high), but raft needs them.
func (f *grantFSM) Snapshot() (raft.FSMSnapshot, error) { return noSnapshot{}, nil }
func (f *grantFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noSnapshot struct{}

func (noSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (noSnapshot) Release()                          {}

// group is one single-node Raft group with its own log directory.
type group struct {
	raft *raft.Raft
	log  *wal.WAL
	fsm  *grantFSM
}

func startGroup(dir string, id int) (*group, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	w, err := wal.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open log in %s: %w", dir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, hclog.NewNullLogger())
	if err != nil {
		_ = w.Close() // the error being returned is the one to report
		return nil, err
	}
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID("g" + strconv.Itoa(id))
	cfg.Logger = hclog.NewNullLogger()
	cfg.SnapshotThreshold = 1 << 40
	cfg.SnapshotInterval = 24 * time.Hour
	// One node: it elects itself at once.
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.LocalID))
	fsm := &grantFSM{tokens: map[string]uint64{}}
	r, err := raft.NewRaft(cfg, fsm, w, w, snaps, trans)
	if err != nil {
		_ = w.Close() // the error being returned is the one to report
		return nil, err
	}
	boot := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: addr}}}
	if err := r.BootstrapCluster(boot).Error(); err != nil {
		r.Shutdown()
		_ = w.Close() // the error being returned is the one to report
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return &group{raft: r, log: w, fsm: fsm}, nil
}

func (g *group) stop() {
	_ = g.raft.Shutdown().Error() // a shutdown of a healthy node does not fail
	_ = g.log.Close()
}

// waitLeaders waits until every group has elected itself.
func waitLeaders(ctx context.Context, gs []*group) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, g := range gs {
		for g.raft.State() != raft.Leader {
			select {
			case <-ctx.Done():
				return errors.New("a group did not elect itself within 30 s")
			case <-g.raft.LeaderCh():
			case <-time.After(10 * time.Millisecond): // LeaderCh may have fired before we listened
			}
		}
	}
	return nil
}

// measure runs n groups with o.workers workers (o.perGroup×n when set)
// for warmup+duration.
func measure(ctx context.Context, o options, n int) (*row, error) {
	if o.perGroup > 0 {
		o.workers = o.perGroup * n
	}
	root := o.dir
	if root == "" {
		d, err := os.MkdirTemp("", "multigroup-")
		if err != nil {
			return nil, err
		}
		root = d
		defer os.RemoveAll(d)
	} else {
		root = filepath.Join(root, "n"+strconv.Itoa(n))
	}
	gs := make([]*group, 0, n)
	defer func() {
		for _, g := range gs {
			g.stop()
		}
	}()
	for i := 0; i < n; i++ {
		g, err := startGroup(filepath.Join(root, "g"+strconv.Itoa(i)), i)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	if err := waitLeaders(ctx, gs); err != nil {
		return nil, err
	}

	start := time.Now().Add(o.warmup)
	win := benchkit.Window{Start: start, End: start.Add(o.duration)}
	type rec struct {
		ops, errs, violations int64
		lat                   []time.Duration
	}
	recs := make([]*rec, o.workers)
	var cpu0, cpu1 benchkit.CPUSample
	meterDone := make(chan struct{})
	go func() {
		defer close(meterDone)
		benchkit.SleepUntil(ctx, win.Start, win.Start.Add(time.Hour))
		cpu0 = benchkit.SampleCPU(nil)
		benchkit.SleepUntil(ctx, win.End, win.End.Add(time.Hour))
		cpu1 = benchkit.SampleCPU(nil)
	}()
	var wg sync.WaitGroup
	for w := 0; w < o.workers; w++ {
		recs[w] = &rec{}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := recs[w]
			// Worker w owns the keys w, w+workers, ... so each key has one
			// writer and its tokens can be checked in order.
			last := map[int]uint64{}
			var buf [8]byte
			for i := 0; ctx.Err() == nil && time.Now().Before(win.End); i++ {
				k := w + (i%max(1, o.keys/o.workers))*o.workers
				g := gs[k%n]
				binary.BigEndian.PutUint64(buf[:], uint64(k))
				t0 := time.Now()
				f := g.raft.Apply(buf[:], 10*time.Second)
				err := f.Error()
				t1 := time.Now()
				if !win.In(t1) {
					continue
				}
				if err != nil {
					r.errs++
					continue
				}
				tok := f.Response().(uint64)
				if tok <= last[k] {
					r.violations++
				}
				last[k] = tok
				r.ops++
				r.lat = append(r.lat, t1.Sub(t0))
			}
		}(w)
	}
	wg.Wait()
	<-meterDone
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out := &row{Groups: n, Workers: o.workers, DurationS: o.duration.Seconds()}
	var lat []time.Duration
	for _, r := range recs {
		out.Ops += r.ops
		out.Errors += r.errs
		out.Violations += r.violations
		lat = append(lat, r.lat...)
	}
	out.LatencyMs = benchkit.Summarize(lat)
	out.OpsPerSec = benchkit.Round(float64(out.Ops)/o.duration.Seconds(), 1)
	out.OpsPerSecPerG = benchkit.Round(out.OpsPerSec/float64(n), 1)
	wall := cpu1.Wall.Sub(cpu0.Wall).Seconds()
	self := (cpu1.Self - cpu0.Self).Seconds()
	if out.Ops > 0 {
		out.CPUPerOpUs = benchkit.Round(self/float64(out.Ops)*1e6, 2)
	}
	if wall > 0 {
		out.CPUCores = benchkit.Round(self/wall, 2)
		out.OtherCores = benchkit.Round(max(0, (cpu1.Machine-cpu0.Machine).Seconds()-self)/wall, 2)
	}
	return out, nil
}
