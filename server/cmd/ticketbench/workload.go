package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// sizes are ticketbench's defaults of the hold and connections workloads.
var sizes = benchkit.Sizes{Hold: 1_000_000, Connections: 10_000, FillPar: 512}

// holdLease is the lease of the tickets filled by the hold workload: the
// longest there is, so that they outlive the fill, the sample and a restart
// (a restart only extends leases).
const holdLease = ticketing.MaxLease

// Config is the benchmark configuration (mirrors the flags): the shape
// every generator runs alike, and Ticketing's own settings.
type Config struct {
	benchkit.Shape
	Lease    time.Duration // lease of the measured acquires
	Wait     time.Duration // wait of the measured acquires (<0: workload default)
	Restart  bool          // hold: SIGKILL and restart the servers (own cluster only)
	Restarts int           // hold: how many restarts to time, one after the other (0: 1)
	// RestartBins, when set, are the server binaries the restarts take in
	// turn (an A/B of two builds on the same data); else the one that
	// started the servers.
	RestartBins []string
	Prefix      string // key prefix
	// IdleWindow, for connections: how long the servers' CPU is measured
	// with no load, first without and then with the idle connections (0:
	// not measured). Longer than the idle ping interval, so that it holds
	// whole ping cycles.
	IdleWindow time.Duration
	// SourceIPs, for connections: the idle Brokers dial from 127.0.0.2
	// onwards, this many addresses in turn (0: the system picks), so that
	// tens of thousands of connections never run out of source ports.
	SourceIPs int
}

// ApplyDefaults fills the workload-dependent defaults.
func (c *Config) ApplyDefaults() {
	c.Shape.ApplyDefaults(sizes)
	if c.Wait < 0 {
		c.Wait = 0
		if c.Workload == benchkit.Contended {
			c.Wait = 10 * time.Second
		}
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.Prefix == "" {
		c.Prefix = "bench"
	}
}

// Env is where the benchmark runs.
type Env struct {
	Addrs    string             // comma-separated client addresses (loopback)
	Opts     []ticketing.Option // token, TLS
	Token    string             // for probes
	Pids     func() []int       // server processes for RSS/CPU (may return none)
	HTTPAddr string             // -http: /metrics for RSS when there are no pids
	Cluster  *cluster           // nil when targeting an existing cluster
	HTTP     func() []string    // servers' HTTP addresses for commit metrics (may return none)
	Logf     func(string, ...any)
}

func (e *Env) rss() int64 {
	if p := e.Pids(); len(p) > 0 {
		return benchkit.SumRSS(p)
	}
	if e.HTTPAddr != "" {
		if v, err := metricsRSS(e.HTTPAddr); err == nil {
			return v
		}
	}
	return 0
}

type bench struct {
	cfg Config
	env Env

	mu      sync.Mutex
	brokers []*ticketing.Broker
}

func (b *bench) newBroker(ctx context.Context, extra ...ticketing.Option) (*ticketing.Broker, error) {
	opts := append([]ticketing.Option{ticketing.WithLogger(quietLogger())}, b.env.Opts...)
	opts = append(opts, extra...)
	br, err := ticketing.Connect(b.env.Addrs, opts...)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.brokers = append(b.brokers, br)
	b.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := br.WaitReady(wctx); err != nil {
		return nil, err
	}
	return br, nil
}

// newBrokers opens n Brokers (n connections) with bounded parallelism;
// with sourceIPs > 0, Broker i dials from 127.0.0.(2 + i%sourceIPs).
func (b *bench) newBrokers(ctx context.Context, n, sourceIPs int) ([]*ticketing.Broker, error) {
	out := make([]*ticketing.Broker, n)
	err := benchkit.Parallel(ctx, n, 32, func(i int) error {
		var extra []ticketing.Option
		if sourceIPs > 0 {
			local := &net.TCPAddr{IP: net.IPv4(127, 0, byte((2+i%sourceIPs)>>8), byte(2+i%sourceIPs))}
			d := &net.Dialer{LocalAddr: local, KeepAlive: -1} // as the client's own dialer
			extra = append(extra, ticketing.WithDialer(d.DialContext))
		}
		br, err := b.newBroker(ctx, extra...)
		out[i] = br
		return err
	})
	return out, err
}

func (b *bench) close() {
	b.mu.Lock()
	brs := b.brokers
	b.brokers = nil
	b.mu.Unlock()
	_ = benchkit.Parallel(context.Background(), len(brs), 64, func(i int) error { return brs[i].Close() }) // Close returns nil
}

// brokerLock is Ticketing's lock as benchkit.LockLoop drives it: one
// Acquire call with the workload's wait and lease, the ticket's token, and
// its Release.
type brokerLock struct {
	br          *ticketing.Broker
	wait, lease time.Duration
}

func (l brokerLock) Acquire(ctx context.Context, key string) (uint64, func(context.Context) error, error) {
	t, err := l.br.Acquire(ctx, key, l.wait, l.lease, 0)
	if err != nil {
		return 0, nil, err
	}
	return t.Token(), t.Release, nil
}

// Run executes the configured workload and returns its result.
func Run(ctx context.Context, cfg Config, env Env) (*benchkit.Result, error) {
	cfg.ApplyDefaults()
	if env.Logf == nil {
		env.Logf = func(string, ...any) {}
	}
	if env.Pids == nil {
		env.Pids = func() []int { return nil }
	}
	if env.HTTP == nil {
		env.HTTP = func() []string {
			if env.HTTPAddr != "" {
				return []string{env.HTTPAddr}
			}
			return nil
		}
	}
	b := &bench{cfg: cfg, env: env}
	defer b.close()
	return cfg.Run(ctx, benchkit.Runs{Loops: b.runLoops, Hold: b.runHold, Connections: b.runConnections})
}

// runLoops runs cfg.Clients workers over cfg.ConnsFor(Clients) Brokers for
// warmup+duration and summarizes; decorate lets hold and connections add to
// the result.
func (b *bench) runLoops(ctx context.Context, decorate func(*benchkit.Result)) (*benchkit.Result, error) {
	cfg := b.cfg
	nConn := cfg.ConnsFor(cfg.Clients)
	brs, err := b.newBrokers(ctx, nConn, 0)
	if err != nil {
		return nil, fmt.Errorf("brokers: %w", err)
	}
	win := cfg.Window()
	met := startMeter(b.env.Pids, b.env.HTTP(), win, ctx.Done())
	recs := cfg.RunWorkers(ctx, cfg.Prefix, win, 0, func(i int) benchkit.Lock { return brokerLock{brs[i%nConn], cfg.Wait, cfg.Lease} })
	cpuNotes := met.notes()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	r := cfg.LoopResult("ticketing", recs, win, []string{
		"ticketing client Broker.Acquire/Ticket.Release",
		fmt.Sprintf("fsync=on lease_s=%g wait_s=%g", cfg.Lease.Seconds(), cfg.Wait.Seconds()),
		fmt.Sprintf("brokers=%d", nConn),
	}, "fencing token", 0, cpuNotes)
	r.ServerRSSBytes = met.rssEnd
	if r.ServerRSSBytes == 0 {
		r.ServerRSSBytes = b.env.rss()
	}
	if decorate != nil {
		decorate(r)
	}
	return r, nil
}

// runHold fills the server with N held tickets (FillPar acquires in flight
// over cfg.ConnsFor(FillPar) Brokers, lease 250 s), reads the servers' RSS,
// runs a sample of uncontended workers on other keys at that size, and
// then, when it owns the servers, SIGKILLs and restarts them on the same
// data and times how long until an acquire is granted again.
func (b *bench) runHold(ctx context.Context) (*benchkit.Result, error) {
	cfg := b.cfg
	rss0 := b.env.rss()
	nConn := cfg.ConnsFor(cfg.FillPar)
	brs, err := b.newBrokers(ctx, nConn, 0)
	if err != nil {
		return nil, fmt.Errorf("fill brokers: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, cfg.FillTimeout)
	defer cancel()
	// The Tickets are kept (about 200 bytes each) to check tokens after
	// the restart and to release them when the servers are not ours.
	tickets := make([]*ticketing.Ticket, cfg.N)
	var fc benchkit.FillCount
	var logMu sync.Mutex
	t0 := time.Now()
	lastLog := time.Now()
	_ = benchkit.Parallel(fctx, cfg.N, cfg.FillPar, func(j int) error { // failures are counted in fc
		actx, c2 := context.WithTimeout(fctx, cfg.OpTimeout)
		t, err := brs[j%nConn].Acquire(actx, fmt.Sprintf("%s/hold/%d", cfg.Prefix, j), 0, holdLease, 0)
		c2()
		if err != nil {
			fc.Fail("acquire", err)
			return nil
		}
		tickets[j] = t
		if h := fc.Held.Add(1); h%100_000 == 0 {
			logMu.Lock()
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				b.env.Logf("ticketbench: hold: %d held after %.1fs", h, time.Since(t0).Seconds())
			}
			logMu.Unlock()
		}
		return nil
	})
	held := fc.Held.Load()
	fill := time.Since(t0)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if held == 0 {
		return nil, fmt.Errorf("hold: no ticket could be filled (%s)", fc.First())
	}
	b.env.Logf("ticketbench: hold: %d/%d tickets held in %.1fs (%.0f/s)", held, cfg.N, fill.Seconds(), float64(held)/fill.Seconds())
	sleepTo(ctx.Done(), time.Now().Add(time.Second)) // let GC settle, as etcdbench does
	rssFilled := b.env.rss()

	res, err := b.runLoops(ctx, nil)
	if err != nil {
		return nil, err
	}
	res.Errors += fc.Errors.Load()
	n := fmt.Sprintf("n=%d held=%d fill_s=%.1f fill_par=%d fill_brokers=%d fill_errors=%d lease_s=%g",
		cfg.N, held, fill.Seconds(), cfg.FillPar, nConn, fc.Errors.Load(), holdLease.Seconds())
	n += fc.Notes(rss0, rssFilled, res.ServerRSSBytes)
	res.ServerRSSBytes = rssFilled

	if cl := b.env.Cluster; cl != nil && cfg.Restart {
		n += " " + b.restarts(ctx, cl, tickets, res)
	} else if cl == nil {
		// Not our servers: give the tickets back.
		_ = benchkit.Parallel(ctx, len(tickets), cfg.FillPar, func(j int) error { // best effort: the leases expire anyway
			if tickets[j] != nil {
				rctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
				_ = tickets[j].Release(rctx)
				cancel()
			}
			return nil
		})
	}
	res.Notes = n + "; sample: per-worker keys " + cfg.Prefix + "/sample/<i>; " + res.Notes
	return res, nil
}

// restarts times cfg.Restarts restarts one after the other, each with the
// next of cfg.RestartBins when given. The first is restart_s (as with one
// restart); every one is listed in restart_s_all (and restart_bins).
func (b *bench) restarts(ctx context.Context, cl *cluster, tickets []*ticketing.Ticket, res *benchkit.Result) string {
	count := max(b.cfg.Restarts, 1)
	var out string
	var all, bins []string
	for r := range count {
		if len(b.cfg.RestartBins) > 0 {
			cl.bin = b.cfg.RestartBins[r%len(b.cfg.RestartBins)]
			bins = append(bins, filepath.Base(filepath.Dir(cl.bin))+"/"+filepath.Base(cl.bin))
			b.env.Logf("ticketbench: hold: restart %d of %d with %s", r+1, count, cl.bin)
		}
		b.close() // the old connections would only reconnect in the background
		rn, d, rerr := b.restart(ctx, cl, tickets)
		if rerr != nil {
			res.Errors++
			rn += " restart_error=[" + rerr.Error() + "]"
		}
		if r == 0 {
			out = rn
		} else {
			out += fmt.Sprintf(" restart%d=[%s]", r+1, rn)
		}
		all = append(all, fmt.Sprintf("%.3f", d.Seconds()))
		if rerr != nil || ctx.Err() != nil {
			break
		}
	}
	if count > 1 {
		out += " restart_s_all=" + strings.Join(all, ",")
		if len(bins) > 0 {
			out += " restart_bins=" + strings.Join(bins, ",")
		}
	}
	return out
}

// restart SIGKILLs every server, starts them again on the same data dirs
// and measures the time from the exec to the first granted acquire
// (restart_s). It then checks that a sample of the held tickets survived
// with their tokens.
func (b *bench) restart(ctx context.Context, cl *cluster, tickets []*ticketing.Ticket) (string, time.Duration, error) {
	for i := range cl.nodes {
		cl.kill(i)
	}
	t0 := time.Now()
	for i := range cl.nodes {
		if err := cl.start(i); err != nil {
			return "", 0, err
		}
	}
	if _, err := cl.waitServing(ctx, 5*time.Minute); err != nil {
		return "", 0, fmt.Errorf("after restart: %w", err)
	}
	d := time.Since(t0)
	rss := b.env.rss()
	var rssMax int64 // the largest server's
	// The CPU the new processes used until the cluster served: the
	// restart's cost, less dependent on other load than its wall time.
	var cpu, cpuMax time.Duration
	for _, pid := range cl.pids() {
		if v, err := benchkit.ReadRSS(pid); err == nil {
			rssMax = max(rssMax, v)
		}
		if v, err := benchkit.ReadCPU(pid); err == nil {
			cpu += v
			cpuMax = max(cpuMax, v)
		}
	}
	b.env.Logf("ticketbench: hold: restarted and serving in %.2fs", d.Seconds())
	// Durability check: the held tickets are still held with their tokens.
	br, err := b.newBroker(ctx)
	if err != nil {
		return fmt.Sprintf("restart_s=%.3f rss_after_restart=%d", d.Seconds(), rss), d, err
	}
	lost := 0
	checked := 0
	step := max(1, len(tickets)/100)
	for j := 0; j < len(tickets); j += step {
		if tickets[j] == nil {
			continue
		}
		checked++
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		desc, err := br.Describe(dctx, fmt.Sprintf("%s/hold/%d", b.cfg.Prefix, j))
		cancel()
		if err != nil || !desc.Held || desc.Token != tickets[j].Token() {
			lost++
		}
	}
	out := fmt.Sprintf("restart_s=%.3f restart_cpu_s=%.2f restart_cpu_max_server_s=%.2f rss_after_restart=%d rss_after_restart_max_server=%d restart_checked=%d restart_lost=%d",
		d.Seconds(), cpu.Seconds(), cpuMax.Seconds(), rss, rssMax, checked, lost)
	if lost > 0 {
		return out, d, fmt.Errorf("%d of %d sampled held tickets were not held with their token after the restart", lost, checked)
	}
	return out, d, nil
}

// runConnections opens N idle Brokers (N connections, each with its hello
// done), then runs cfg.Clients acquire/release workers alongside them.
func (b *bench) runConnections(ctx context.Context) (*benchkit.Result, error) {
	cfg := b.cfg
	pids := b.env.Pids()
	var cpuBase time.Duration
	if cfg.IdleWindow > 0 {
		var err error
		if cpuBase, err = b.serverCPU(ctx, pids); err != nil {
			return nil, err
		}
	}
	rss0 := b.env.rss()
	t0 := time.Now()
	idle, err := b.newBrokers(ctx, cfg.N, cfg.SourceIPs)
	if err != nil {
		return nil, fmt.Errorf("idle brokers: %w", err)
	}
	setup := time.Since(t0)
	sleepTo(ctx.Done(), time.Now().Add(time.Second))
	rssIdle := b.env.rss()
	b.env.Logf("ticketbench: connections: %d idle Brokers ready in %.1fs", len(idle), setup.Seconds())
	idleNotes := ""
	if cfg.IdleWindow > 0 {
		cpuIdle, err := b.serverCPU(ctx, pids)
		if err != nil {
			return nil, err
		}
		perConn := float64(cpuIdle-cpuBase) / float64(time.Microsecond) / cfg.IdleWindow.Seconds() / float64(cfg.N)
		idleNotes = fmt.Sprintf(" idle_window_s=%.0f server_cpu_base_cores=%.4f server_cpu_idle_conns_cores=%.4f idle_cpu_us_per_conn_s=%.3f rss_per_conn_b=%d",
			cfg.IdleWindow.Seconds(), cpuBase.Seconds()/cfg.IdleWindow.Seconds(), cpuIdle.Seconds()/cfg.IdleWindow.Seconds(), perConn, (rssIdle-rss0)/int64(cfg.N))
		b.env.Logf("ticketbench: connections: idle server CPU %.3f µs per connection per second, RSS %d B per connection", perConn, (rssIdle-rss0)/int64(cfg.N))
	}
	return b.runLoops(ctx, func(r *benchkit.Result) {
		n := fmt.Sprintf("n=%d idle Brokers (1 connection each, WaitReady) setup_s=%.1f rss_before_idle=%d rss_with_idle=%d%s",
			cfg.N, setup.Seconds(), rss0, rssIdle, idleNotes)
		r.Notes = n + "; " + r.Notes
	})
}

// serverCPU is the servers' CPU time over one IdleWindow with no load of
// ours (the idle connections, if open, only answer pings).
func (b *bench) serverCPU(ctx context.Context, pids []int) (time.Duration, error) {
	if len(pids) == 0 {
		return 0, errors.New("-idle-window needs the servers' pids (servers started here, or -server-pids)")
	}
	c0 := benchkit.SumCPU(pids)
	if !sleepTo(ctx.Done(), time.Now().Add(b.cfg.IdleWindow)) {
		return 0, ctx.Err()
	}
	return benchkit.SumCPU(pids) - c0, nil
}
