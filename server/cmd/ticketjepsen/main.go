//go:build linux

// Command ticketjepsen runs the nemesis harness (internal/nemesis) by hand:
// a ticketd cluster in network namespaces, client workers, faults from a
// seeded schedule, and a check of the recorded history. It needs root and
// iproute2 (ip). It prints the report and exits 1 when the run found a
// violation, 2 when it could not run.
//
//	go run ./cmd/ticketjepsen -duration 30m -seed 42
//
// With -check FILE it runs nothing and checks a history.txt recorded by an
// earlier run again (after a change to the checker, for instance).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
)

func main() {
	var cfg nemesis.Config
	var kinds, check string
	flag.Uint64Var(&cfg.Seed, "seed", 0, "schedule `seed` (0: from the clock; the report prints it)")
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "how long to inject faults (every kind is injected once even if that takes longer)")
	flag.IntVar(&cfg.Nodes, "nodes", 3, "number of ticketd servers (3 or 5)")
	flag.IntVar(&cfg.Workers, "workers", 6, "client workers, each with its own connection")
	flag.IntVar(&cfg.Keys, "keys", 4, "contended keys")
	flag.DurationVar(&cfg.Hold, "hold", 3*time.Second, "mean `duration` of one fault")
	flag.StringVar(&cfg.Dir, "dir", "", "`directory` for data, logs and the visualization, created if missing (default: a new temporary directory, kept)")
	flag.StringVar(&cfg.Ticketd, "ticketd", "", "ticketd `binary` (default: built from this module with -tags stallhook; the stall-after-commit fault needs that hook)")
	flag.StringVar(&kinds, "faults", "", "comma-separated fault `kinds` (default: all): "+allKinds()+"; also quiet (no fault: counts elections a healthy cluster holds)")
	flag.StringVar(&check, "check", "", "check the history.txt `file` of an earlier run instead of running")
	var young string
	var coord bool
	flag.BoolVar(&coord, "coord", false, "run the coordination workload (12 sessions of the coordination SDK: a limit-1 and a limit-3 semaphore, an election) beside the tickets one, and check it; without -faults, inject the coordination faults ("+coordKinds()+")")
	flag.StringVar(&young, "young", string(nemesis.YoungStall)+","+string(nemesis.YoungKill),
		"comma-separated faults of the cluster's first second, each on a different server before the workload starts (\"\" for none)")
	flag.Parse()
	for _, k := range strings.Split(young, ",") {
		switch nemesis.FaultKind(k) {
		case "":
		case nemesis.YoungStall, nemesis.YoungKill:
			cfg.Young = append(cfg.Young, nemesis.FaultKind(k))
		default:
			fmt.Fprintf(os.Stderr, "ticketjepsen: -young: unknown kind %q; the kinds are %s and %s\n", k, nemesis.YoungStall, nemesis.YoungKill)
			os.Exit(2)
		}
	}
	if check != "" {
		os.Exit(recheck(check))
	}
	if kinds != "" {
		for _, k := range strings.Split(kinds, ",") {
			if !known(k) {
				fmt.Fprintf(os.Stderr, "ticketjepsen: unknown fault kind %q; the kinds are %s\n", k, allKinds())
				os.Exit(2)
			}
			cfg.Kinds = append(cfg.Kinds, nemesis.FaultKind(k))
		}
	}
	if coord {
		cfg.Coord = &nemesis.CoordConfig{}
		if kinds == "" {
			cfg.Kinds = nemesis.CoordFaults
		}
	}
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		fmt.Fprintln(os.Stderr, "ticketjepsen: -nodes must be 3 or 5")
		os.Exit(2)
	}
	cfg.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := nemesis.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ticketjepsen: %v\n", err)
		os.Exit(2)
	}
	fmt.Print(rep.String())
	if rep.Failed() {
		os.Exit(1)
	}
}

// recheck checks a recorded history and returns the exit code.
func recheck(file string) int {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ticketjepsen: %v\n", err)
		return 2
	}
	defer func() { _ = f.Close() }() // read only
	ops, err := nemesis.ParseHistory(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ticketjepsen: %v\n", err)
		return 2
	}
	res := nemesis.Check(ops, nemesis.CheckOptions{VisualizationFile: file + ".linearizability.html"})
	fmt.Printf("%s: %d operations checked, %d grants, %d indeterminate; linearizability (porcupine, per key): %v\n",
		file, res.Ops, res.Grants, res.Unknown, res.Linearizable)
	for _, v := range res.Violations {
		fmt.Printf("VIOLATION: %v\n", v)
	}
	if len(res.Violations) > 0 || res.Linearizable == porcupine.Illegal {
		return 1
	}
	return 0
}

func allKinds() string {
	var s []string
	seen := map[nemesis.FaultKind]bool{}
	for _, k := range append(append([]nemesis.FaultKind(nil), nemesis.AllFaults...), nemesis.CoordFaults...) {
		if !seen[k] {
			s = append(s, string(k))
		}
		seen[k] = true
	}
	return strings.Join(s, ",")
}

func coordKinds() string {
	var s []string
	for _, k := range nemesis.CoordFaults {
		s = append(s, string(k))
	}
	return strings.Join(s, ",")
}

func known(k string) bool {
	for _, f := range append(append(append([]nemesis.FaultKind(nil), nemesis.AllFaults...), nemesis.CoordFaults...), nemesis.Quiet) {
		if string(f) == k {
			return true
		}
	}
	return false
}
