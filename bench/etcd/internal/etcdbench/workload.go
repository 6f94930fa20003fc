package etcdbench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// Sizes are etcdbench's defaults of the hold and connections workloads:
// smaller than ticketbench's, since etcd keeps a lease per held lock
// (bench/compare.sh gives each system its own).
var Sizes = benchkit.Sizes{Hold: 10000, Connections: 1000, FillPar: 64}

// Config is the benchmark configuration (mirrors the command-line flags):
// the shape every generator runs alike, and etcd's own settings.
type Config struct {
	benchkit.Shape
	LeaseTTL        int     // session TTL, seconds
	LocksPerSession int     // hold: held locks per session (lease)
	IdleSessions    bool    // connections: each idle client also keeps a session alive
	Rate            float64 // total acquire rate target for all workers, /s (0: closed loop)
	Prefix          string  // key prefix, "/lock"
}

// Env is where the benchmark runs.
type Env struct {
	Endpoints  []string // host:port, loopback only
	ServerPids []int    // for RSS/CPU; may be empty (existing endpoints)
	OwnCluster bool     // servers are ours and will be killed afterwards
	Logf       func(format string, args ...any)
}

// ApplyDefaults fills workload-dependent defaults.
func (c *Config) ApplyDefaults() {
	c.Shape.ApplyDefaults(Sizes)
	if c.LocksPerSession <= 0 {
		c.LocksPerSession = 1
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 60 // concurrency.NewSession's default
	}
	if c.Prefix == "" {
		c.Prefix = "/lock"
	}
}

// createRev returns the create revision of the mutex's own key, which is
// the etcd lock recipe's fencing token. Mutex keeps it as myRev and exposes
// it only through the IsOwner comparison; that costs no extra RPC and is
// right on both the fast path (Txn header revision) and the waiting path
// (where Header() is a later Get's revision, not the create revision).
func createRev(m *concurrency.Mutex) int64 {
	c := m.IsOwner()
	if cr, ok := c.GetCompare().GetTargetUnion().(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return -1
}

// bench holds shared state for one run.
type bench struct {
	cfg Config
	env Env

	sessCtx    context.Context // parent of all session leases
	sessCancel context.CancelFunc

	mu       sync.Mutex
	sessions []*concurrency.Session
	clients  []*clientv3.Client
}

func (b *bench) newClient(ctx context.Context) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   b.env.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		Context:     context.Background(),
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.clients = append(b.clients, cli)
	b.mu.Unlock()
	// Force the connection(s) up now, not inside the measured window.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Get(rctx, "/etcdbench/ping", clientv3.WithSerializable()); err != nil {
		return nil, fmt.Errorf("first request: %w", err)
	}
	return cli, nil
}

// newClients opens n clients with bounded parallelism.
func (b *bench) newClients(ctx context.Context, n int) ([]*clientv3.Client, error) {
	out := make([]*clientv3.Client, n)
	err := benchkit.Parallel(ctx, n, 32, func(i int) error {
		c, err := b.newClient(ctx)
		out[i] = c
		return err
	})
	return out, err
}

func (b *bench) newSession(cli *clientv3.Client) (*concurrency.Session, error) {
	s, err := concurrency.NewSession(cli,
		concurrency.WithTTL(b.cfg.LeaseTTL),
		concurrency.WithContext(b.sessCtx))
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.sessions = append(b.sessions, s)
	b.mu.Unlock()
	return s, nil
}

// close revokes sessions (when the servers outlive us, or when cheap) and
// closes all clients.
func (b *bench) close() {
	b.mu.Lock()
	sessions, clients := b.sessions, b.clients
	b.mu.Unlock()
	if !b.env.OwnCluster || len(sessions) <= 1000 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		benchkit.Parallel(ctx, len(sessions), 64, func(i int) error {
			rctx, c2 := context.WithTimeout(ctx, 5*time.Second)
			defer c2()
			sessions[i].Orphan()
			_, err := sessions[i].Client().Revoke(rctx, sessions[i].Lease())
			return err
		})
		cancel()
	}
	b.sessCancel()
	for _, c := range clients {
		c.Close()
	}
}

// workerLock is etcd's lock recipe as benchkit.LockLoop drives it, for one
// worker: its own session (a lease kept alive by the client) and a Mutex on
// its key; the fencing token is the Mutex key's create revision.
type workerLock struct {
	b    *bench
	cli  *clientv3.Client
	sess *concurrency.Session
	m    *concurrency.Mutex
}

// errSessionLost: the worker's lease ended (keepalives starved); the worker
// carries on with a new session, and the loss is counted as an error.
var errSessionLost = errors.New("session lease lost")

func (w *workerLock) Acquire(ctx context.Context, key string) (uint64, func(context.Context) error, error) {
	select {
	case <-w.sess.Done():
		ns, err := w.b.newSession(w.cli)
		if err != nil {
			return 0, nil, fmt.Errorf("new session: %w", err)
		}
		w.sess, w.m = ns, nil
		return 0, nil, errSessionLost
	default:
	}
	if w.m == nil {
		w.m = concurrency.NewMutex(w.sess, key)
	}
	if err := w.m.Lock(ctx); err != nil {
		w.m = nil
		return 0, nil, err
	}
	release := func(ctx context.Context) error {
		if err := w.m.Unlock(ctx); err != nil {
			w.m = nil
			return err
		}
		return nil
	}
	return uint64(createRev(w.m)), release, nil
}

// meter samples server and client CPU over the window and RSS at its end.
type meter struct {
	pids       []int
	cpu0, cpu1 benchkit.CPUSample
	rssEnd     int64
	done       chan struct{}
}

func startMeter(ctx context.Context, pids []int, win benchkit.Window) *meter {
	m := &meter{pids: pids, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		benchkit.SleepUntil(ctx, win.Start, win.Start.Add(time.Hour))
		m.cpu0 = benchkit.SampleCPU(pids)
		benchkit.SleepUntil(ctx, win.End, win.End.Add(time.Hour))
		m.cpu1 = benchkit.SampleCPU(pids)
		m.rssEnd = benchkit.SumRSS(pids)
	}()
	return m
}

func (m *meter) notes() string {
	<-m.done
	return strings.Join(benchkit.CPUNotes(m.cpu0, m.cpu1, len(m.pids) > 0), " ")
}

// Run executes the configured workload against env and returns its result.
func Run(ctx context.Context, cfg Config, env Env) (*benchkit.Result, error) {
	cfg.ApplyDefaults()
	if env.Logf == nil {
		env.Logf = func(string, ...any) {}
	}
	b := &bench{cfg: cfg, env: env}
	b.sessCtx, b.sessCancel = context.WithCancel(context.Background())
	defer b.close()

	return cfg.Run(ctx, benchkit.Runs{Loops: b.runLoops, Hold: b.runHold, Connections: b.runConnections})
}

// runLoops sets up cfg.Clients workers (sessions, shared clients), runs them
// over warmup+duration and summarizes. extraNotes/extraRSS let hold and
// connections decorate the result.
func (b *bench) runLoops(ctx context.Context, decorate func(*benchkit.Result)) (*benchkit.Result, error) {
	cfg := b.cfg
	workers := cfg.Clients
	sessions := make([]*concurrency.Session, workers)
	nConn := cfg.ConnsFor(workers)
	clients, err := b.newClients(ctx, nConn)
	if err != nil {
		return nil, fmt.Errorf("clients: %w", err)
	}
	if err := benchkit.Parallel(ctx, workers, 32, func(i int) error {
		s, err := b.newSession(clients[i%nConn])
		sessions[i] = s
		return err
	}); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}

	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(workers) / cfg.Rate * float64(time.Second))
	}
	win := cfg.Window()
	met := startMeter(ctx, b.env.ServerPids, win)
	recs := cfg.RunWorkers(ctx, cfg.Prefix, win, interval, func(i int) benchkit.Lock {
		return &workerLock{b: b, cli: clients[i%nConn], sess: sessions[i]}
	})
	cpuNotes := met.notes()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	var extra []string
	if n := Niceness(); n != 0 {
		extra = append(extra, fmt.Sprintf("nice=%d", n))
	}
	r := cfg.LoopResult("etcd", recs, win, []string{
		"etcd v3.7.3 concurrency.Mutex",
		fmt.Sprintf("fsync=on lease_ttl_s=%d", cfg.LeaseTTL),
		fmt.Sprintf("sessions=1/worker clientv3_clients=%d", nConn),
	}, "key create_revision", cfg.Rate, cpuNotes, extra...)
	r.ServerRSSBytes = met.rssEnd
	if decorate != nil {
		decorate(r)
	}
	return r, nil
}

// runHold fills the server with N held locks, then measures RSS and the
// latency of a further sample of acquires (on other keys) at that size.
//
// The N locks are held by ceil(N/LocksPerSession) sessions (one lease
// each); by default LocksPerSession=1, i.e. N independent holders, each with
// its own lease and keepalive, which is what N separate lock holders look
// like to etcd. Fill sessions are spread over ConnsFor(FillPar) clients.
func (b *bench) runHold(ctx context.Context) (*benchkit.Result, error) {
	cfg := b.cfg
	rss0 := benchkit.SumRSS(b.env.ServerPids)
	nConn := cfg.ConnsFor(cfg.FillPar)
	clients, err := b.newClients(ctx, nConn)
	if err != nil {
		return nil, fmt.Errorf("fill clients: %w", err)
	}
	nSess := (cfg.N + cfg.LocksPerSession - 1) / cfg.LocksPerSession
	fctx, cancel := context.WithTimeout(ctx, cfg.FillTimeout)
	defer cancel()
	var fc benchkit.FillCount
	t0 := time.Now()
	_ = benchkit.Parallel(fctx, nSess, cfg.FillPar, func(si int) error { // failures are counted in fc
		s, err := b.newSession(clients[si%nConn])
		if err != nil {
			fc.Fail("session", err)
			return nil
		}
		for j := si * cfg.LocksPerSession; j < (si+1)*cfg.LocksPerSession && j < cfg.N; j++ {
			lctx, c2 := context.WithTimeout(fctx, cfg.OpTimeout)
			m := concurrency.NewMutex(s, fmt.Sprintf("%s/hold/%d", cfg.Prefix, j))
			err := m.Lock(lctx)
			c2()
			if err != nil {
				fc.Fail("lock", err)
				continue
			}
			fc.Held.Add(1)
		}
		return nil
	})
	fill := time.Since(t0)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	held := fc.Held.Load()
	if held == 0 {
		return nil, fmt.Errorf("hold: no lock could be filled (%s)", fc.First())
	}
	b.env.Logf("etcdbench: hold: %d/%d locks held by %d sessions in %.1fs", held, cfg.N, nSess, fill.Seconds())
	// Let the apply loop and GC settle before reading RSS.
	benchkit.SleepUntil(ctx, time.Now().Add(time.Second), time.Now().Add(time.Hour))
	rssFilled := benchkit.SumRSS(b.env.ServerPids)

	return b.runLoops(ctx, func(r *benchkit.Result) {
		r.Errors += fc.Errors.Load()
		rssEnd := r.ServerRSSBytes
		r.ServerRSSBytes = rssFilled
		n := fmt.Sprintf("n=%d held=%d sessions=%d locks_per_session=%d fill_s=%.1f fill_clients=%d fill_errors=%d",
			cfg.N, held, nSess, cfg.LocksPerSession, fill.Seconds(), nConn, fc.Errors.Load())
		n += fc.Notes(rss0, rssFilled, rssEnd)
		r.Notes = n + "; sample: per-worker keys " + cfg.Prefix + "/sample/<i>; " + r.Notes
	})
}

// runConnections opens N idle clientv3 clients (each its own gRPC
// connection to every endpoint), then runs cfg.Clients lock/unlock workers
// alongside them.
func (b *bench) runConnections(ctx context.Context) (*benchkit.Result, error) {
	cfg := b.cfg
	rss0 := benchkit.SumRSS(b.env.ServerPids)
	t0 := time.Now()
	idle, err := b.newClients(ctx, cfg.N)
	if err != nil {
		return nil, fmt.Errorf("idle clients: %w", err)
	}
	if cfg.IdleSessions {
		if err := benchkit.Parallel(ctx, len(idle), 32, func(i int) error {
			_, err := b.newSession(idle[i])
			return err
		}); err != nil {
			return nil, fmt.Errorf("idle sessions: %w", err)
		}
	}
	setup := time.Since(t0)
	benchkit.SleepUntil(ctx, time.Now().Add(time.Second), time.Now().Add(time.Hour))
	rssIdle := benchkit.SumRSS(b.env.ServerPids)
	b.env.Logf("etcdbench: connections: %d idle clients up in %.1fs", len(idle), setup.Seconds())
	return b.runLoops(ctx, func(r *benchkit.Result) {
		n := fmt.Sprintf("n=%d idle clientv3 clients (1 gRPC conn per endpoint each, idle_sessions=%v) setup_s=%.1f rss_before_idle=%d rss_with_idle=%d",
			cfg.N, cfg.IdleSessions, setup.Seconds(), rss0, rssIdle)
		r.Notes = n + "; " + r.Notes
	})
}
