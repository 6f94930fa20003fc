// Command redisbench measures the lock Redis users build themselves (SET NX
// PX with a per-key fencing counter in one Lua script, a compare-and-delete
// release) on one redis-server with appendfsync always, with the workloads,
// the measurement and the JSON output of ticketbench and etcdbench
// (package benchkit), so that bench/compare.sh can run it beside them.
//
// See ../../README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// config mirrors the command-line flags.
type config struct {
	workload   string
	clients    int           // workers
	conns      int           // go-redis clients the workers share
	pool       int           // connections in each client's pool (0: its share of the workers)
	duration   time.Duration // measured window
	warmup     time.Duration // unmeasured run-in
	ttl        time.Duration // lock TTL (PX)
	wait       time.Duration // how long an acquire polls a held key (<0: workload default)
	retryDelay time.Duration // mean delay between polls
	opTimeout  time.Duration
	maxOps     int64
	prefix     string
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("redisbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.workload, "workload", benchkit.Uncontended, "workload: uncontended|contended")
	fs.IntVar(&cfg.clients, "clients", 0, "workers (0: 128 uncontended, 16 contended)")
	fs.IntVar(&cfg.conns, "conns", 1, "go-redis clients the workers share (1: one per process, as go-redis is meant to be used)")
	fs.IntVar(&cfg.pool, "pool", 0, "connections in each client's pool (0: the workers sharing it, so no worker waits for a connection)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&cfg.warmup, "warmup", 10*time.Second, "unmeasured warmup before the window")
	fs.DurationVar(&cfg.ttl, "lease", 30*time.Second, "lock TTL (SET PX), as ticketbench's lease")
	fs.DurationVar(&cfg.wait, "wait", -1, "how long an acquire polls a held key (<0: 0 uncontended, 10s contended, as ticketbench)")
	fs.DurationVar(&cfg.retryDelay, "retry-delay", 2*time.Millisecond, "mean delay between polls of a held key (jittered ±50%)")
	fs.DurationVar(&cfg.opTimeout, "op-timeout", 30*time.Second, "an acquire+release pair shares one context of twice this")
	fs.Int64Var(&cfg.maxOps, "max-ops", 10_000_000, "cap on iterations per worker")
	nodes := fs.Int("nodes", 1, "servers: only 1 (Redis replication is asynchronous, so there is no 3-node row to compare)")
	serverBin := fs.String("redis-server", "redis-server", "the redis-server binary")
	addr := fs.String("addr", "", "use this running loopback redis-server instead of starting one")
	jsonOut := fs.Bool("json", false, "print exactly one JSON object on stdout (the human line goes to stderr)")
	keepData := fs.Bool("keep-data", false, "keep the server's data dir and log")
	ready := fs.Duration("ready-timeout", 30*time.Second, "deadline for the started server to answer")
	quiet := fs.Bool("q", false, "no progress messages on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redisbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	switch cfg.workload {
	case benchkit.Uncontended, benchkit.Contended:
	default:
		fmt.Fprintf(stderr, "redisbench: unknown -workload %q (want uncontended or contended; hold and connections are not measured for Redis)\n", cfg.workload)
		return 2
	}
	if *nodes != 1 {
		fmt.Fprintln(stderr, "redisbench: -nodes must be 1: Redis replicates asynchronously, so a grant on 3 nodes is not comparable")
		return 2
	}
	if cfg.duration <= 0 || cfg.warmup < 0 || cfg.retryDelay <= 0 {
		fmt.Fprintln(stderr, "redisbench: -duration and -retry-delay must be > 0 and -warmup >= 0")
		return 2
	}
	applyDefaults(&cfg)
	logf := func(format string, a ...any) {
		if !*quiet {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var pids []int
	target := *addr
	if target == "" {
		srv, err := startServer(ctx, *serverBin, *ready)
		if err != nil {
			fmt.Fprintln(stderr, "redisbench:", err)
			return 1
		}
		defer func() {
			srv.stop()
			if *keepData {
				fmt.Fprintf(stderr, "redisbench: kept data and log in %s\n", srv.dir)
			} else {
				srv.remove()
			}
		}()
		target, pids = srv.addr, []int{srv.pid()}
		logf("redisbench: redis-server on %s (pid %d, dir %s, appendfsync always)", target, srv.pid(), srv.dir)
	}
	logf("redisbench: running %s: clients=%d conns=%d pool=%d warmup=%v duration=%v", cfg.workload, cfg.clients, cfg.conns, cfg.pool, cfg.warmup, cfg.duration)
	res, err := runLoops(ctx, cfg, target, pids)
	if err != nil {
		fmt.Fprintln(stderr, "redisbench:", err)
		return 1
	}
	if *jsonOut {
		fmt.Fprintln(stderr, res.HumanDigits(3))
		if err := res.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "redisbench:", err)
			return 1
		}
	} else {
		fmt.Fprintln(stdout, res.HumanDigits(3))
	}
	return 0
}

func applyDefaults(c *config) {
	if c.clients <= 0 {
		c.clients = 128
		if c.workload == benchkit.Contended {
			c.clients = 16
		}
	}
	if c.wait < 0 {
		c.wait = 0
		if c.workload == benchkit.Contended {
			c.wait = 10 * time.Second
		}
	}
	c.conns = max(1, min(c.conns, c.clients))
	if c.pool <= 0 {
		c.pool = (c.clients + c.conns - 1) / c.conns
	}
	if c.opTimeout <= 0 {
		c.opTimeout = 30 * time.Second
	}
	if c.maxOps <= 0 {
		c.maxOps = 10_000_000
	}
	if c.prefix == "" {
		c.prefix = "bench"
	}
}

// runLoops runs cfg.clients workers through benchkit.LockLoop over
// warmup+duration and summarizes them in the shared result schema.
func runLoops(ctx context.Context, cfg config, addr string, pids []int) (*benchkit.Result, error) {
	clients := make([]*redis.Client, cfg.conns)
	locks := make([]*redisLock, cfg.conns)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:         addr,
			PoolSize:     cfg.pool,
			MinIdleConns: cfg.pool, // opened before the window, not inside it
			ReadTimeout:  cfg.opTimeout,
			WriteTimeout: cfg.opTimeout,
			// A retried script after a lost answer could take a second
			// grant; a careful lock user turns retries off.
			MaxRetries: -1,
		})
		c := clients[i]
		defer func() { _ = c.Close() }() // closing idle pool connections: nothing to report
		// Load the scripts once, so every call is an EVALSHA.
		for _, s := range []*redis.Script{acquireScript, releaseScript} {
			if err := s.Load(ctx, clients[i]).Err(); err != nil {
				return nil, fmt.Errorf("load script on %s: %w", addr, err)
			}
		}
		locks[i] = newRedisLock(clients[i], cfg.ttl, cfg.wait, cfg.retryDelay)
	}

	lc := benchkit.LoopConfig{Mode: benchkit.CountPairs, OpTimeout: cfg.opTimeout, MaxOps: cfg.maxOps}
	var shared *benchkit.SharedKeyCheck
	if cfg.workload == benchkit.Contended {
		lc.Mode = benchkit.CountAcquires
		shared = &benchkit.SharedKeyCheck{}
	}
	start := time.Now().Add(cfg.warmup)
	win := benchkit.Window{Start: start, End: start.Add(cfg.duration)}
	var cpu0, cpu1 benchkit.CPUSample
	var rss int64
	meterDone := make(chan struct{})
	go func() {
		defer close(meterDone)
		benchkit.SleepUntil(ctx, win.Start, win.Start.Add(time.Hour))
		cpu0 = benchkit.SampleCPU(pids)
		benchkit.SleepUntil(ctx, win.End, win.End.Add(time.Hour))
		cpu1 = benchkit.SampleCPU(pids)
		rss = benchkit.SumRSS(pids)
	}()
	recs := make([]*benchkit.Recorder, cfg.clients)
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = &benchkit.Recorder{}
		key := fmt.Sprintf("%s/%d", cfg.prefix, i)
		var check benchkit.HeldCheck = &benchkit.PerKeyCheck{}
		if shared != nil {
			key, check = cfg.prefix+"/contended", shared
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			benchkit.LockLoop(ctx, locks[i%cfg.conns], key, win, lc, check, recs[i])
		}(i)
	}
	wg.Wait()
	<-meterDone
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r := &benchkit.Result{System: "redis", Workload: cfg.workload, Nodes: 1, Clients: cfg.clients}
	violations, samples := r.AddRecorders(recs, win, lc.Mode == benchkit.CountAcquires)
	r.ServerRSSBytes = rss
	notes := []string{
		"redis-server SET NX PX + per-key INCR fencing counter (one Lua script, EVALSHA), compare-and-delete release",
		fmt.Sprintf("fsync=on appendonly=yes appendfsync=always lease_s=%g wait_s=%g retry_delay_ms=%g", cfg.ttl.Seconds(), cfg.wait.Seconds(), float64(cfg.retryDelay)/1e6),
		fmt.Sprintf("redis_clients=%d pool=%d", cfg.conns, cfg.pool),
		fmt.Sprintf("warmup_s=%.1f", cfg.warmup.Seconds()),
		"token=per-key INCR counter",
		fmt.Sprintf("token_violations=%d", violations),
		"closed_loop",
	}
	if c := benchkit.CPUNotes(cpu0, cpu1, len(pids) > 0); len(c) > 0 {
		notes = append(notes, strings.Join(c, " "))
	}
	if len(samples) > 0 {
		notes = append(notes, "first_errors=["+strings.Join(samples, " | ")+"]")
	}
	r.Notes = strings.Join(notes, "; ")
	return r, nil
}
