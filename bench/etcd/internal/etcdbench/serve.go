package etcdbench

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// ServeCommand is the hidden subcommand the benchmark re-executes itself
// with to run one etcd member in its own process.
const ServeCommand = "serve"

// Serve runs one embedded etcd member until SIGTERM/SIGINT. It is the body
// of `etcdbench serve`; it returns the process exit code.
func Serve(args []string) int {
	fs := flag.NewFlagSet(ServeCommand, flag.ContinueOnError)
	name := fs.String("name", "n0", "member name")
	dataDir := fs.String("data-dir", "", "data directory (required)")
	clientURL := fs.String("client-url", "", "client URL, e.g. http://127.0.0.1:2379 (required)")
	peerURL := fs.String("peer-url", "", "peer URL, e.g. http://127.0.0.1:2380 (required)")
	initialCluster := fs.String("initial-cluster", "", "name=peerURL,... (required)")
	token := fs.String("token", "etcdbench", "initial cluster token")
	logLevel := fs.String("log-level", "error", "etcd log level")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *clientURL == "" || *peerURL == "" || *initialCluster == "" {
		fmt.Fprintln(os.Stderr, "serve: -data-dir, -client-url, -peer-url and -initial-cluster are required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve: bad -client-url:", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve: bad -peer-url:", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = *initialCluster
	cfg.InitialClusterToken = *token
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.Logger = "zap"
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{"stderr"}
	// Everything else stays at etcd's defaults: fsync on (UnsafeNoFsync is
	// false), snapshot count, quotas, no auto-compaction, 100 ms heartbeat,
	// 1 s election timeout.

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve: start etcd:", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "serve: member %s ready on %s (pid %d)\n", *name, *clientURL, os.Getpid())
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "serve: etcd failed before ready:", err)
		e.Close()
		return 1
	case <-sigc:
		e.Close()
		return 0
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "serve: etcd not ready after 2m")
		e.Close()
		return 1
	}
	select {
	case <-sigc:
		e.Close()
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "serve: etcd error:", err)
		e.Close()
		return 1
	}
}
