package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/freeport"
)

// node is one server process started by the benchmark.
type node struct {
	id, clientAddr, raftAddr, httpAddr, dataDir, logPath string

	cmd    *exec.Cmd
	exited chan struct{}
}

// cluster is 1 or 3 server processes on loopback with data under root.
// The processes are ticketd itself, or this binary's hidden "serve"
// subcommand (the same server, in-process, with a CPU profile).
type cluster struct {
	root      string
	bin       string   // ticketd, or os.Executable() for serve
	binPrefix []string // {"serve", "-cpuprofile", ...} for the serve mode
	token     string
	// secretFile is the cluster secret its servers prove to each other
	// (made by ticketd's generator); empty for a single server.
	secretFile string
	nodes      []*node
	logf       func(string, ...any)
}

// freePorts picks n distinct free TCP ports on 127.0.0.1 below the
// ephemeral range, so a restarted server finds its ports free again
// (startCluster retries if one is taken in between).
func freePorts(n int) ([]string, error) { return freeport.Take(n) }

// startCluster starts n servers bootstrapped as one cluster (fsync is always
// on in ticketd) and waits until a leader serves an acquire.
func startCluster(ctx context.Context, bin string, prefix []string, n int, token string, readyTimeout time.Duration, logf func(string, ...any)) (*cluster, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		root, err := os.MkdirTemp("", "ticketbench-*")
		if err != nil {
			return nil, err
		}
		c := &cluster{root: root, bin: bin, binPrefix: prefix, token: token, logf: logf}
		if n > 1 {
			c.secretFile = filepath.Join(root, "raft-secret")
			if err := server.WriteNewRaftSecret(c.secretFile, false); err != nil {
				os.RemoveAll(root)
				return nil, err
			}
		}
		ports, err := freePorts(3 * n)
		if err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("n%d", i+1)
			c.nodes = append(c.nodes, &node{id: id, clientAddr: ports[3*i], raftAddr: ports[3*i+1], httpAddr: ports[3*i+2],
				dataDir: filepath.Join(root, id), logPath: filepath.Join(root, id+".log")})
		}
		for i := range c.nodes {
			if err = c.start(i); err != nil {
				break
			}
		}
		if err == nil {
			_, err = c.waitServing(ctx, readyTimeout)
		}
		if err == nil {
			return c, nil
		}
		lastErr = err
		logf("ticketbench: cluster start attempt %d failed: %v", attempt+1, err)
		c.stop(0)
		if tail := c.logTail(); tail != "" {
			logf("ticketbench: server log tail:\n%s", tail)
		}
		_ = c.remove()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("start cluster: %w", lastErr)
}

func (c *cluster) args(i int) []string {
	nd := c.nodes[i]
	a := append([]string(nil), c.binPrefix...)
	if len(c.binPrefix) > 0 && len(c.nodes) > 1 {
		// one CPU profile per server in the serve mode
		for j := range a {
			if (a[j] == "-cpuprofile" || a[j] == "-memprofile" || a[j] == "-timings") && j+1 < len(a) && a[j+1] != "" {
				a[j+1] = fmt.Sprintf("%s.%s", a[j+1], nd.id)
			}
		}
	}
	a = append(a, "--node-id", nd.id, "--listen", nd.clientAddr, "--raft-listen", nd.raftAddr,
		"--http-listen", nd.httpAddr, "--data-dir", nd.dataDir, "--log-level", "warn")
	if len(c.binPrefix) == 0 {
		// ticketd bootstraps only when told to once cluster flags are given.
		a = append(a, "--initial-cluster-state", "new")
	}
	if len(c.nodes) > 1 {
		var peers []string
		for _, p := range c.nodes {
			peers = append(peers, p.id+"="+p.raftAddr)
		}
		a = append(a, "--bootstrap", strings.Join(peers, ","), "--raft-secret-file", c.secretFile)
	}
	if c.token != "" {
		a = append(a, "--client-token", c.token)
	}
	return a
}

// start execs server i. It inherits this process's RLIMIT_NOFILE, which
// main raised beforehand (Setrlimit also stops os/exec from restoring the
// original soft limit in children).
func (c *cluster) start(i int) error {
	nd := c.nodes[i]
	lf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, c.args(i)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return fmt.Errorf("start %s: %w", c.bin, err)
	}
	nd.cmd = cmd
	nd.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); _ = lf.Close(); close(nd.exited) }()
	return nil
}

// kill SIGKILLs server i and waits for it to be gone.
func (c *cluster) kill(i int) {
	nd := c.nodes[i]
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Kill()
	<-nd.exited
	nd.cmd = nil
}

// stop SIGTERMs every server, SIGKILLs those still running after grace.
func (c *cluster) stop(grace time.Duration) {
	for _, nd := range c.nodes {
		if nd.cmd != nil {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited already
		}
	}
	deadline := time.After(grace)
	for i, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		select {
		case <-nd.exited:
			nd.cmd = nil
		case <-deadline:
			c.kill(i)
		}
	}
}

func (c *cluster) remove() error { return os.RemoveAll(c.root) }

func (c *cluster) pids() []int {
	var p []int
	for _, nd := range c.nodes {
		if nd.cmd != nil {
			p = append(p, nd.cmd.Process.Pid)
		}
	}
	return p
}

func (c *cluster) addrs() string {
	var a []string
	for _, nd := range c.nodes {
		a = append(a, nd.clientAddr)
	}
	return strings.Join(a, ",")
}

// logTail returns the last lines of every server log (for failures).
func (c *cluster) logTail() string {
	var sb strings.Builder
	for _, nd := range c.nodes {
		b, err := os.ReadFile(nd.logPath)
		if err != nil || len(b) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
		fmt.Fprintf(&sb, "%s: %s\n", nd.id, strings.Join(lines, "\n    "))
	}
	return sb.String()
}

// waitServing waits until the cluster's leader grants an acquire, with a
// fresh Broker, and returns how long that took. A server that exited is
// reported at once.
func (c *cluster) waitServing(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exited := make(chan string, len(c.nodes))
	for _, nd := range c.nodes {
		if ch := nd.exited; ch != nil {
			go func(id string) {
				select {
				case <-ch:
					exited <- id
				case <-ctx.Done():
				}
			}(nd.id)
		}
	}
	type res struct{ err error }
	done := make(chan res, 1)
	go func() { done <- res{probe(ctx, c.addrs(), c.token, nil)} }()
	select {
	case r := <-done:
		return time.Since(t0), r.err
	case id := <-exited:
		return 0, fmt.Errorf("server %s exited before serving; log tail:\n%s", id, c.logTail())
	}
}

// probe connects a fresh Broker to addrs and retries one acquire+release
// until it succeeds or ctx ends: the definition of "serves".
func probe(ctx context.Context, addrs, token string, extra []ticketing.Option) error {
	opts := append([]ticketing.Option{ticketing.WithLogger(quietLogger()), ticketing.WithDialTimeout(2 * time.Second)}, extra...)
	if token != "" {
		opts = append(opts, ticketing.WithToken(token))
	}
	b, err := ticketing.Connect(addrs, opts...)
	if err != nil {
		return err
	}
	defer b.Close()
	var last error
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := b.Acquire(actx, "ticketbench/probe", 0, time.Second, 0)
		if err == nil {
			err = t.Release(actx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ticketing.ErrUnauthenticated) {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("no serving leader: %v (last error: %v)", ctx.Err(), last)
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// metricsRSS reads process_resident_memory_bytes from a server's /metrics
// (the -addr mode without -server-pids).
func metricsRSS(httpAddr string) (int64, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, err
			}
			return int64(f), nil
		}
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes in %s/metrics", httpAddr)
}

// scrapeCommits sums, over the servers' /metrics, the counters that say how
// requests were committed: batches committed (ticketing_commit_seconds
// count and sum: propose to applied, fsync and replication included) and
// grants + releases. ok is false when no server answered.
func scrapeCommits(httpAddrs []string) (commits, commitSeconds, ops float64, ok bool) {
	cl := &http.Client{Timeout: 2 * time.Second}
	for _, a := range httpAddrs {
		resp, err := cl.Get("http://" + a + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			name, val, found := strings.Cut(sc.Text(), " ")
			if !found {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				continue
			}
			switch name {
			case "ticketing_commit_seconds_count":
				commits += v
			case "ticketing_commit_seconds_sum":
				commitSeconds += v
			case "ticketing_grants_total", "ticketing_releases_total":
				ops += v
			}
		}
		_ = resp.Body.Close()
		ok = true
	}
	return commits, commitSeconds, ops, ok
}

func (c *cluster) httpAddrs() []string {
	var a []string
	for _, nd := range c.nodes {
		a = append(a, nd.httpAddr)
	}
	return a
}

// checkLoopback accepts host:port whose host is localhost, 127.0.0.0/8 or
// ::1: the benchmark never sends traffic anywhere else.
func checkLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("bad address %q (want host:port): %v", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("address %q is not loopback; ticketbench only targets 127.0.0.0/8, ::1 or localhost", hostport)
}

// raiseNofile raises RLIMIT_NOFILE (soft and, as root, hard) to at least
// need, so that N connections fit here and in the servers started after it.
func raiseNofile(need uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	want := rl
	if want.Max < need {
		want.Max = need
		if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && want.Max > v {
				want.Max = v
			}
		}
	}
	want.Cur = max(want.Max, rl.Cur)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		// Not root: at least the soft limit up to the hard one.
		want = syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err2 != nil {
			return rl.Cur, err
		}
	}
	return want.Cur, nil
}
