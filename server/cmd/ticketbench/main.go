// Command ticketbench is the load generator of Ticketing: it measures the
// server with the same workloads, and prints the same JSON, as bench/etcd's
// etcdbench does for etcd's lock recipe, so that the two can be compared
// side by side (bench/compare.sh).
//
//	ticketbench -workload uncontended -nodes 1 -clients 128 -duration 10s
//	ticketbench -workload contended -nodes 3 -clients 16 -json
//	ticketbench -workload hold -n 1000000
//	ticketbench -workload connections -n 10000
//	ticketbench -workload uncontended -addr 127.0.0.1:5225 -http 127.0.0.1:5227
//
// By default it starts the servers itself: 1 or 3 ticketd processes on
// loopback with free ports and fresh data directories (fsync is always on),
// waits until a leader grants an acquire, runs the workload, and stops them.
// See docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/benchkit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		os.Exit(serveMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var cfg Config
	fs := flag.NewFlagSet("ticketbench", flag.ContinueOnError)
	cfg.Flags(fs, sizes, "Brokers")
	fs.Lookup("workload").Usage += "|" + Fsync + " (the disk's floor: 4 KiB append+fdatasync, no server)"
	fs.DurationVar(&cfg.Lease, "lease", 30*time.Second, "lease of the measured acquires")
	wait := fs.Duration("wait", -1, "wait of the measured acquires (default: 0, contended 10s)")
	fs.BoolVar(&cfg.Restart, "restart", true, "hold: SIGKILL and restart the servers afterwards and time it (own servers only)")
	fs.IntVar(&cfg.Restarts, "restarts", 1, "hold: restarts to time one after the other on the same data (restart_s is the first, restart_s_all every one)")
	restartBins := fs.String("restart-ticketd", "", "hold: comma-separated ticketd binaries the restarts take in turn (an A/B of two builds on the same data)")
	fs.DurationVar(&cfg.IdleWindow, "idle-window", 0, "connections: measure the servers' CPU over this window without load, before and with the idle connections (idle_cpu_us_per_conn_s); longer than the idle ping interval (20 s)")
	fs.IntVar(&cfg.SourceIPs, "source-ips", 0, "connections: the idle Brokers dial from this many source addresses from 127.0.0.2 on (0: the system picks)")
	fs.StringVar(&cfg.Prefix, "prefix", "bench", "key prefix: keys are <prefix>/<worker> (a principal's key_prefixes must allow them)")
	addr := fs.String("addr", "", "comma-separated client addresses of an existing cluster (loopback only); no servers are started")
	httpAddr := fs.String("http", "", "with -addr: a server's HTTP address, for its RSS from /metrics")
	serverPids := fs.String("server-pids", "", "with -addr: comma-separated server pids for RSS/CPU from /proc")
	ticketd := fs.String("ticketd", "", "ticketd binary (default: next to this binary, else go build it into a temp dir)")
	cpuprofile := fs.String("server-cpuprofile", "", "run the servers as this binary's in-process server and write their CPU profile to `file` (.nX appended with 3 nodes)")
	selfprofile := fs.String("cpuprofile", "", "write a CPU profile of ticketbench itself (the client side) to `file`")
	memprofile := fs.String("server-memprofile", "", "like -server-cpuprofile, for a heap profile written when the servers stop")
	timings := fs.String("server-timings", "", "like -server-cpuprofile, for Raft's internal timings and the core's stage trace (p50/p90/p99/mean per stage) written when the servers stop")
	token := fs.String("token", "", "client token (given to the started servers too)")
	tlsCA := fs.String("tls-ca", "", "with -addr: TLS verified against this CA `file` (PEM)")
	jsonOut := fs.Bool("json", false, "print exactly one JSON object on stdout (the human line goes to stderr)")
	keepData := fs.Bool("keep-data", false, "keep the servers' temp data dirs and logs")
	readyTimeout := fs.Duration("ready-timeout", 60*time.Second, "deadline for the started cluster to serve")
	quiet := fs.Bool("q", false, "no progress messages on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Wait = *wait
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ticketbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := cfg.Check(Fsync); err != nil {
		fmt.Fprintln(os.Stderr, "ticketbench:", err)
		return 2
	}
	if *restartBins != "" {
		if *cpuprofile != "" || *memprofile != "" || *timings != "" {
			fmt.Fprintln(os.Stderr, "ticketbench: -restart-ticketd runs ticketd binaries; it does not go with the in-process server of -server-cpuprofile, -server-memprofile or -server-timings")
			return 2
		}
		cfg.RestartBins = strings.Split(*restartBins, ",")
	}
	if *tlsCA != "" && *addr == "" {
		fmt.Fprintln(os.Stderr, "ticketbench: -tls-ca needs -addr (the servers ticketbench starts serve plain TCP on loopback)")
		return 2
	}
	logf := func(format string, a ...any) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}
	cfg.ApplyDefaults()

	// Room for N connections here and in the servers we start (they inherit it).
	need := uint64(4096)
	if cfg.Workload == benchkit.Connections {
		// The servers are other processes: N here, N there. 1,024 to spare
		// keeps 18,000 connections within a 20,000 limit.
		need = max(need, uint64(cfg.N)+1024)
	}
	if lim, err := raiseNofile(need); err != nil || lim < need {
		logf("ticketbench: RLIMIT_NOFILE is %d (wanted %d): %v", lim, need, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cfg.Workload == Fsync {
		logf("ticketbench: fsync floor in %s: warmup=%v duration=%v", os.TempDir(), cfg.Warmup, cfg.Duration)
		res, err := runFsync(ctx, cfg, os.TempDir())
		if err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
		return printResult(res, *jsonOut)
	}

	env := Env{Logf: logf, Token: *token}
	if *token != "" {
		env.Opts = append(env.Opts, ticketing.WithToken(*token))
	}
	if *tlsCA != "" {
		env.Opts = append(env.Opts, ticketing.WithTLS(ticketing.TLSCAFile(*tlsCA)))
	}
	if *addr != "" {
		var list []string
		for _, a := range strings.Split(*addr, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if err := checkLoopback(a); err != nil {
				fmt.Fprintln(os.Stderr, "ticketbench:", err)
				return 2
			}
			list = append(list, a)
		}
		if *httpAddr != "" {
			if err := checkLoopback(*httpAddr); err != nil {
				fmt.Fprintln(os.Stderr, "ticketbench: -http:", err)
				return 2
			}
		}
		var pids []int
		for _, p := range strings.Split(*serverPids, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			pid, err := strconv.Atoi(p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "ticketbench: bad pid %q\n", p)
				return 2
			}
			pids = append(pids, pid)
		}
		env.Addrs, env.HTTPAddr = strings.Join(list, ","), *httpAddr
		env.Pids = func() []int { return pids }
		cfg.Nodes = len(list)
	} else {
		if cfg.Nodes != 1 && cfg.Nodes != 3 {
			fmt.Fprintln(os.Stderr, "ticketbench: -nodes must be 1 or 3")
			return 2
		}
		bin, prefix, cleanup, err := serverBinary(ctx, *ticketd, *cpuprofile, *memprofile, *timings, logf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
		defer cleanup()
		logf("ticketbench: starting %d server(s) (%s)", cfg.Nodes, bin)
		cl, err := startCluster(ctx, bin, prefix, cfg.Nodes, *token, *readyTimeout, logf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
		defer func() {
			cl.stop(5 * time.Second) // SIGTERM (a profile is written), then SIGKILL
			if *keepData {
				fmt.Fprintf(os.Stderr, "ticketbench: kept data and logs in %s\n", cl.root)
			} else if err := cl.remove(); err != nil {
				logf("ticketbench: removing %s: %v", cl.root, err)
			}
		}()
		env.Addrs, env.Cluster, env.Pids, env.HTTP = cl.addrs(), cl, cl.pids, cl.httpAddrs
		logf("ticketbench: serving: %s (pids %v, dir %s)", env.Addrs, cl.pids(), cl.root)
	}

	if *selfprofile != "" {
		f, err := os.Create(*selfprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	logf("ticketbench: running %s: nodes=%d clients=%d warmup=%v duration=%v", cfg.Workload, cfg.Nodes, cfg.Clients, cfg.Warmup, cfg.Duration)
	res, err := Run(ctx, cfg, env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticketbench:", err)
		return 1
	}
	return printResult(res, *jsonOut)
}

// printResult prints res as one JSON line (and the human line on stderr)
// or as the human line.
func printResult(res *benchkit.Result, jsonOut bool) int {
	if jsonOut {
		fmt.Fprintln(os.Stderr, res.Human())
		if err := res.WriteJSON(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ticketbench:", err)
			return 1
		}
	} else {
		fmt.Println(res.Human())
	}
	return 0
}

// serverBinary decides what to exec as a server: this binary's "serve"
// subcommand when a server CPU profile is wanted, else -ticketd, else a
// ticketd next to this binary, else one built with go build into a temp
// dir from the module this binary was run in.
func serverBinary(ctx context.Context, flagPath, cpuprofile, memprofile, timings string, logf func(string, ...any)) (bin string, prefix []string, cleanup func(), err error) {
	cleanup = func() {}
	if cpuprofile != "" || memprofile != "" || timings != "" {
		exe, err := os.Executable()
		if err != nil {
			return "", nil, cleanup, err
		}
		prefix = []string{serveCommand}
		for _, p := range []struct{ flag, path string }{{"-cpuprofile", cpuprofile}, {"-memprofile", memprofile}, {"-timings", timings}} {
			if p.path == "" {
				continue
			}
			abs, err := filepath.Abs(p.path)
			if err != nil {
				return "", nil, cleanup, err
			}
			prefix = append(prefix, p.flag, abs)
		}
		return exe, prefix, cleanup, nil
	}
	if flagPath != "" {
		return flagPath, nil, cleanup, nil
	}
	if exe, err := os.Executable(); err == nil {
		sib := filepath.Join(filepath.Dir(exe), "ticketd")
		if st, err := os.Stat(sib); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return sib, nil, cleanup, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", nil, cleanup, fmt.Errorf("no ticketd: give -ticketd PATH, put ticketd next to ticketbench, or run inside the repository (%v)", err)
	}
	dir, err := os.MkdirTemp("", "ticketbench-bin-*")
	if err != nil {
		return "", nil, cleanup, err
	}
	out := filepath.Join(dir, "ticketd")
	logf("ticketbench: go build -o %s ./cmd/ticketd", out)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/ticketd")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, cleanup, fmt.Errorf("go build ticketd: %w", err)
	}
	return out, nil, func() { os.RemoveAll(dir) }, nil
}

// moduleRoot finds the directory of github.com/ticketing-io/ticketing's
// go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/ticketing-io/ticketing\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod of github.com/ticketing-io/ticketing not found above the working directory")
		}
		dir = parent
	}
}
