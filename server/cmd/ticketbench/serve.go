package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/server"
)

// serveCommand is the hidden subcommand that runs one server in this
// process, like ticketd, optionally writing a CPU profile of the server
// alone (ticketd has no pprof endpoint). It takes the subset of ticketd's
// flags that the benchmark passes.
const serveCommand = "serve"

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func serveMain(args []string) int {
	cfg := server.DefaultConfig()
	fs := flag.NewFlagSet("ticketbench serve", flag.ContinueOnError)
	fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "node id")
	fs.StringVar(&cfg.ClientAddr, "listen", cfg.ClientAddr, "client address")
	fs.StringVar(&cfg.RaftAddr, "raft-listen", cfg.RaftAddr, "Raft address")
	fs.StringVar(&cfg.HTTPAddr, "http-listen", cfg.HTTPAddr, "HTTP address")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "log level")
	bootstrap := fs.String("bootstrap", "", "ID=RAFTADDR,...")
	fs.StringVar(&cfg.RaftSecretFile, "raft-secret-file", "", "the cluster secret's `file` (raft_secret_file)")
	var tokens stringList
	fs.Var(&tokens, "client-token", "client token (repeatable)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of this server to `file` (until SIGTERM)")
	memprofile := fs.String("memprofile", "", "write a heap profile of this server to `file` at SIGTERM")
	timings := fs.String("timings", "", "write Raft's internal timings (p50/p90/p99/mean per stage, ms) to `file` at SIGTERM")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	peers, err := server.ParsePeers(*bootstrap)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 2
	}
	cfg.Bootstrap = peers
	cfg.ClientTokens = tokens
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var pf *os.File
	if *cpuprofile != "" {
		if pf, err = os.Create(*cpuprofile); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
	}
	var ts *timingSink
	if *timings != "" {
		ts = newTimingSink()
		if err := installTimings(ts); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
		core.SetStageTrace(ts.addDuration)
	}
	if v := os.Getenv("TICKETBENCH_INFLIGHT"); v != "" {
		// An experiment's knob, inherited from the ticketbench that started
		// this server: the core's batches in flight (its default otherwise).
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "serve: TICKETBENCH_INFLIGHT=%q: want a whole number of batches, at least 1\n", v)
			return 2
		}
		core.SetInFlightBatches(n)
	}
	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	<-ctx.Done()
	if pf != nil {
		pprof.StopCPUProfile()
		_ = pf.Close()
	}
	if *memprofile != "" {
		runtime.GC()
		if f, err := os.Create(*memprofile); err == nil {
			if err := errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close()); err != nil {
				fmt.Fprintln(os.Stderr, "serve: heap profile:", err)
			}
		}
	}
	if ts != nil {
		if f, err := os.Create(*timings); err == nil {
			ts.write(f)
			if err := f.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "serve: timings:", err)
			}
		}
	}
	_ = srv.Close() // like a crash to peers: the benchmark discards the data
	return 0
}
