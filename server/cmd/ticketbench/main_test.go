package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/benchkit"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestMain lets the test binary act as a server ("serve"), so that the
// tests can exercise the process management (start, SIGKILL, restart)
// without building ticketd.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func short(w string) Config {
	return Config{Shape: benchkit.Shape{Workload: w, Nodes: 1, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond, OpTimeout: 10 * time.Second}, Wait: -1}
}

func check(t *testing.T, r *benchkit.Result, err error, w string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", w, err)
	}
	if r.System != "ticketing" || r.Workload != w || r.Ops == 0 || r.Errors != 0 || r.AcquireLatencyMs.P50 <= 0 {
		t.Fatalf("%s: unexpected result %s", w, r.Human())
	}
	if !strings.Contains(r.Notes, "token_violations=0") {
		t.Fatalf("%s: token violations: %s", w, r.Notes)
	}
}

// Every workload, briefly, against an in-process server (the -addr mode).
func TestWorkloadsAgainstExistingCluster(t *testing.T) {
	c := testcluster.Start(t, 1)
	env := Env{Addrs: c.AddrList(), HTTPAddr: c.Server(0).HTTPAddr().String()}
	ctx := context.Background()
	for _, w := range benchkit.Workloads {
		cfg := short(w)
		cfg.Clients = 4
		switch w {
		case benchkit.Hold:
			cfg.N, cfg.FillPar = 500, 32
		case benchkit.Connections:
			cfg.N = 20
		}
		r, err := Run(ctx, cfg, env)
		check(t, r, err, w)
		if r.ServerRSSBytes <= 0 {
			t.Fatalf("%s: no RSS from /metrics: %s", w, r.Human())
		}
		if w == benchkit.Hold && !strings.Contains(r.Notes, "held=500 ") {
			t.Fatalf("hold: %s", r.Notes)
		}
	}
}

// hold with its own server process: fill, SIGKILL, restart on the same
// data, and every sampled ticket still held with its token.
func TestHoldRestartsOwnServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := startCluster(ctx, exe, []string{serveCommand}, 1, "", 30*time.Second, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cl.stop(time.Second); cl.remove() }()
	cfg := short(benchkit.Hold)
	cfg.Clients, cfg.N, cfg.FillPar, cfg.Restart = 2, 300, 16, true
	cfg.Restarts, cfg.RestartBins = 2, []string{exe, exe} // an A/B of one build with itself
	r, err := Run(ctx, cfg, Env{Addrs: cl.addrs(), Cluster: cl, Pids: cl.pids})
	check(t, r, err, benchkit.Hold)
	if !strings.Contains(r.Notes, "restart_s=") || !strings.Contains(r.Notes, "restart_lost=0") || r.ServerRSSBytes <= 0 {
		t.Fatalf("hold restart: %s", r.Human())
	}
	all := regexp.MustCompile(`restart_s_all=([0-9.]+),([0-9.]+) `).FindStringSubmatch(r.Notes)
	if all == nil || !strings.Contains(r.Notes, "restart_bins=") {
		t.Fatalf("two timed restarts: %s", r.Notes)
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, a := range []string{"127.0.0.1:1", "localhost:5225", "[::1]:5", "127.1.2.3:9"} {
		if err := checkLoopback(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{"10.0.0.1:5225", "192.168.1.1:1", "example.com:80", "nope"} {
		if err := checkLoopback(a); err == nil {
			t.Errorf("%s accepted", a)
		}
	}
}

// The disk floor workload measures appends+fdatasync and nothing else.
func TestFsyncFloor(t *testing.T) {
	cfg := short(Fsync)
	cfg.ApplyDefaults()
	r, err := runFsync(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.System != "disk" || r.Workload != Fsync || r.Ops == 0 || r.Errors != 0 || r.LatencyMs.P50 <= 0 {
		t.Fatalf("unexpected result %s", r.Human())
	}
}
