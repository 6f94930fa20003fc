// Command etcdbench benchmarks etcd's lock recipe (client/v3/concurrency
// Mutex) with the same workloads as the Ticketing load generator. It starts
// its own etcd servers as separate processes (it re-executes itself with the
// hidden "serve" subcommand) or targets existing loopback endpoints.
//
// See ../../README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ticketing-io/ticketing/bench/etcd/internal/etcdbench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == etcdbench.ServeCommand {
		os.Exit(etcdbench.Serve(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	var cfg etcdbench.Config
	fs := flag.NewFlagSet("etcdbench", flag.ContinueOnError)
	cfg.Flags(fs, etcdbench.Sizes, "clientv3.Clients")
	fs.IntVar(&cfg.LeaseTTL, "lease", 60, "session (lease) TTL in seconds (60: concurrency.NewSession's default)")
	fs.IntVar(&cfg.LocksPerSession, "locks-per-session", 1, "hold: held locks per session/lease")
	fs.BoolVar(&cfg.IdleSessions, "idle-sessions", false, "connections: each idle client also keeps a session (lease) alive")
	fs.Float64Var(&cfg.Rate, "rate", 0, "total acquire rate over all workers per second (0: closed loop)")
	endpoints := fs.String("endpoints", "", "comma-separated existing etcd endpoints (loopback only); no servers are started")
	serverPids := fs.String("server-pids", "", "with -endpoints: comma-separated server pids to read RSS/CPU from")
	jsonOut := fs.Bool("json", false, "print exactly one JSON object on stdout (human line goes to stderr)")
	keepData := fs.Bool("keep-data", false, "keep the servers' temp data dirs and logs")
	readyTimeout := fs.Duration("ready-timeout", 60*time.Second, "deadline for the started cluster to become healthy")
	quiet := fs.Bool("q", false, "no progress messages on stderr")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "etcdbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		return 2
	}
	logf := func(format string, args ...any) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	env := etcdbench.Env{Logf: logf}
	if *endpoints != "" {
		for _, ep := range strings.Split(*endpoints, ",") {
			ep = strings.TrimSpace(ep)
			if ep == "" {
				continue
			}
			if err := checkLoopback(ep); err != nil {
				fmt.Fprintln(os.Stderr, "etcdbench:", err)
				return 2
			}
			env.Endpoints = append(env.Endpoints, ep)
		}
		for _, p := range strings.Split(*serverPids, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			pid, err := strconv.Atoi(p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "etcdbench: bad pid %q\n", p)
				return 2
			}
			env.ServerPids = append(env.ServerPids, pid)
		}
		cfg.Nodes = len(env.Endpoints)
	} else {
		if cfg.Nodes != 1 && cfg.Nodes != 3 {
			fmt.Fprintln(os.Stderr, "etcdbench: -nodes must be 1 or 3")
			return 2
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdbench:", err)
			return 1
		}
		logf("etcdbench: starting %d etcd member(s)", cfg.Nodes)
		cl, err := etcdbench.StartCluster(ctx, exe, cfg.Nodes, *readyTimeout, logf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdbench: start cluster:", err)
			return 1
		}
		defer func() {
			// SIGTERM, then SIGKILL after 3s: a leader that is stopped at
			// the same time as its followers spends ~7s trying to transfer
			// leadership to them; etcd's WAL is fsynced, so a kill is safe.
			cl.Stop(3 * time.Second)
			if *keepData {
				fmt.Fprintf(os.Stderr, "etcdbench: kept data and logs in %s\n", cl.Root)
			} else if err := cl.Remove(); err != nil {
				logf("etcdbench: removing %s: %v", cl.Root, err)
			}
		}()
		env.Endpoints = cl.Endpoints()
		env.ServerPids = cl.Pids()
		env.OwnCluster = true
		logf("etcdbench: cluster healthy: %s (pids %v, dir %s)", strings.Join(env.Endpoints, ","), env.ServerPids, cl.Root)
	}

	cfg.ApplyDefaults()
	logf("etcdbench: running %s: clients=%d warmup=%v duration=%v", cfg.Workload, cfg.Clients, cfg.Warmup, cfg.Duration)
	res, err := etcdbench.Run(ctx, cfg, env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		return 1
	}
	if *jsonOut {
		fmt.Fprintln(os.Stderr, res.HumanDigits(2))
		if err := res.WriteJSON(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "etcdbench:", err)
			return 1
		}
	} else {
		fmt.Println(res.HumanDigits(2))
	}
	return 0
}

// checkLoopback accepts host:port or a URL whose host is localhost or in
// 127.0.0.0/8 or ::1. The benchmark never sends traffic anywhere else.
func checkLoopback(ep string) error {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("bad endpoint %q: %v", ep, err)
		}
		hostport = u.Host
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("bad endpoint %q (want host:port): %v", ep, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("endpoint %q is not loopback; etcdbench only targets 127.0.0.0/8, ::1 or localhost", ep)
}
