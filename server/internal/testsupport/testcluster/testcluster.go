// Package testcluster starts real ticketd servers in-process for tests: one,
// three or five of them on loopback, each with its own data directory, Raft
// and client listener. It also has Raw, a byte-level client for protocol tests.
//
//	c := testcluster.Start(t, 3)
//	leader := c.LeaderIndex(t)
//	c.Kill(leader)           // stops at once, as a crash looks to peers
//	c.LeaderIndex(t)         // a new leader serves
//	c.Restart(leader)        // rejoins with its data
package testcluster

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/freeport"
)

// Option adjusts every server's configuration before start.
type Option func(*server.Config)

// WithConfig applies fn to each server's configuration.
func WithConfig(fn func(*server.Config)) Option { return Option(fn) }

// Cluster is a set of in-process servers.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	cfgs    []server.Config
	servers []*server.Server // nil while killed
}

// FreePort returns a loopback address that was free a moment ago, that no
// earlier call of this process returned (two servers of one cluster given
// the same address fail to start), and that lies below the kernel's
// ephemeral range, so no outgoing connection takes it while a server is
// down and restarts on it (see package freeport).
func FreePort(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return addr
}

var (
	secretsMu sync.Mutex
	secrets   = map[string]string{} // by top-level test name
)

// RaftSecretFile returns the file of a cluster secret made for test t by
// ticketd's own generator (mode 0600): the same file for every call of one
// top-level test and its subtests, so that their servers form one cluster.
func RaftSecretFile(t testing.TB) string {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	secretsMu.Lock()
	defer secretsMu.Unlock()
	if f, ok := secrets[top]; ok {
		return f
	}
	f := filepath.Join(t.TempDir(), "raft-secret")
	if err := server.WriteNewRaftSecret(f, false); err != nil {
		t.Fatalf("make the cluster secret: %v", err)
	}
	secrets[top] = f
	t.Cleanup(func() { // the file goes with t's temporary directory
		secretsMu.Lock()
		delete(secrets, top)
		secretsMu.Unlock()
	})
	return f
}

// Logger returns a logger for test servers: silent unless TICKETING_TEST_LOG
// is set (then debug level to stderr).
func Logger() *slog.Logger {
	if os.Getenv("TICKETING_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Config returns a configuration for a test server with fresh loopback ports,
// fast failure detection and its data under dir.
func Config(t testing.TB, id, dir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.NodeID = id
	cfg.ClientAddr = FreePort(t)
	cfg.RaftAddr = FreePort(t)
	cfg.HTTPAddr = FreePort(t)
	cfg.DataDir = dir
	// Peers prove the cluster secret, as every multi-server setup does;
	// every server of one test shares it.
	cfg.RaftSecretFile = RaftSecretFile(t)
	// Production's failure detection (500 ms), stated here so that tests
	// keep it if the default changes: not so fast that a race-detector
	// build on a busy 2-core machine loses its leader.
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	cfg.ElectionTimeout = 500 * time.Millisecond
	// A Raw client answers pings only while it reads: tests that hold one
	// idle for a while would lose it to the 500 ms default. Tests of pings
	// set their own interval.
	cfg.PingInterval = 5 * time.Second
	cfg.Logger = Logger()
	return cfg
}

// Start starts n servers bootstrapped as one cluster and waits until one of
// them leads and serves clients. They are stopped when the test ends.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	// Free ports are found by listening and closing, so another process may
	// take one before the server binds it: start again on fresh ports then.
	for attempt := 1; ; attempt++ {
		c, err := start(t, n, opts)
		if err == nil {
			t.Cleanup(c.stopAll)
			c.LeaderIndex(t)
			return c
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

func start(t testing.TB, n int, opts []Option) (*Cluster, error) {
	c := &Cluster{t: t}
	base := t.TempDir()
	var peers []server.Peer
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		cfg := Config(t, id, filepath.Join(base, id))
		c.cfgs = append(c.cfgs, cfg)
		peers = append(peers, server.Peer{ID: id, RaftAddr: cfg.RaftAddr})
	}
	for i := range c.cfgs {
		if n > 1 {
			c.cfgs[i].Bootstrap = peers
		}
		for _, o := range opts {
			o(&c.cfgs[i])
		}
	}
	c.servers = make([]*server.Server, n)
	for i := range c.cfgs {
		s, err := server.New(c.cfgs[i])
		if err != nil {
			c.stopAll()
			return nil, fmt.Errorf("start server %s: %w", c.cfgs[i].NodeID, err)
		}
		c.servers[i] = s
	}
	return c, nil
}

func (c *Cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.servers {
		if s != nil {
			_ = s.Close()
			c.servers[i] = nil
		}
	}
}

// Len is the number of servers (running or killed).
func (c *Cluster) Len() int { return len(c.cfgs) }

// Server returns server i, or nil while it is killed.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// Config returns server i's configuration.
func (c *Cluster) Config(i int) server.Config { return c.cfgs[i] }

// Addr is server i's client address.
func (c *Cluster) Addr(i int) string { return c.cfgs[i].ClientAddr }

// ClientAddrs lists every server's client address.
func (c *Cluster) ClientAddrs() []string {
	out := make([]string, len(c.cfgs))
	for i := range c.cfgs {
		out[i] = c.cfgs[i].ClientAddr
	}
	return out
}

// AddrList is ClientAddrs joined with commas, as clients take it.
func (c *Cluster) AddrList() string { return strings.Join(c.ClientAddrs(), ",") }

// LeaderIndex waits (up to 30 s) until a running server leads and serves, and
// returns its index.
func (c *Cluster) LeaderIndex(t testing.TB) int {
	t.Helper()
	leader := -1
	WaitFor(t, 30*time.Second, "no server became a serving leader", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, s := range c.servers {
			if s != nil && s.IsServing() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// Kill stops server i at once, as a crash looks to its peers and clients.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// Restart starts server i again on its data directory and addresses.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		c.t.Fatalf("restart %s: it is running", c.cfgs[i].NodeID)
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the old listeners may linger briefly
		if c.servers[i], err = server.New(c.cfgs[i]); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("restart %s: %v", c.cfgs[i].NodeID, err)
}

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test with what (and cond's last state, if it gives one) after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}
