package etcdbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Member is one etcd server process started by the benchmark.
type Member struct {
	Name      string
	DataDir   string
	LogPath   string
	ClientURL string
	PeerURL   string
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
}

// Pid is the server's process id.
func (m *Member) Pid() int { return m.cmd.Process.Pid }

// Cluster is a set of local etcd server processes on loopback.
type Cluster struct {
	Root    string // parent of all data dirs and logs
	Members []*Member
}

// Endpoints returns the client endpoints (host:port) of all members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, strings.TrimPrefix(m.ClientURL, "http://"))
	}
	return eps
}

// Pids returns the server process ids.
func (c *Cluster) Pids() []int {
	var p []int
	for _, m := range c.Members {
		p = append(p, m.Pid())
	}
	return p
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are closed before returning, so another process could in theory grab one
// before etcd binds it; StartCluster retries on failure.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StartCluster starts `nodes` etcd members as child processes of exe (which
// must implement the ServeCommand subcommand), each with its own data dir
// under a fresh temp dir, and waits until the cluster serves linearizable
// reads on every member or the deadline passes. It retries up to 3 times
// (fresh ports, fresh dirs) if a member fails to start.
func StartCluster(ctx context.Context, exe string, nodes int, readyTimeout time.Duration, logf func(string, ...any)) (*Cluster, error) {
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := startClusterOnce(ctx, exe, nodes, readyTimeout)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		logf("etcdbench: cluster start attempt %d failed: %v", attempt, err)
	}
	return nil, lastErr
}

func startClusterOnce(ctx context.Context, exe string, nodes int, readyTimeout time.Duration) (c *Cluster, err error) {
	root, err := os.MkdirTemp("", "etcdbench-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Root: root}
	defer func() {
		if err != nil {
			c.Stop(5 * time.Second)
			os.RemoveAll(root)
		}
	}()
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return c, err
	}
	var initial []string
	for i := 0; i < nodes; i++ {
		m := &Member{
			Name:      fmt.Sprintf("n%d", i),
			DataDir:   filepath.Join(root, fmt.Sprintf("n%d.etcd", i)),
			LogPath:   filepath.Join(root, fmt.Sprintf("n%d.log", i)),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	var tok [6]byte
	rand.Read(tok[:])
	token := "etcdbench-" + hex.EncodeToString(tok[:])
	for _, m := range c.Members {
		lf, err := os.Create(m.LogPath)
		if err != nil {
			return c, err
		}
		cmd := exec.Command(exe, ServeCommand,
			"-name", m.Name,
			"-data-dir", m.DataDir,
			"-client-url", m.ClientURL,
			"-peer-url", m.PeerURL,
			"-initial-cluster", strings.Join(initial, ","),
			"-token", token,
		)
		cmd.Stdout = lf
		cmd.Stderr = lf
		// The server dies with us even if we are killed hard.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			lf.Close()
			return c, fmt.Errorf("start %s: %w", m.Name, err)
		}
		lf.Close() // the child has its own copy
		m.cmd = cmd
		m.exited = make(chan struct{})
		go func(m *Member) {
			m.waitErr = m.cmd.Wait()
			close(m.exited)
		}(m)
	}
	if err := c.waitReady(ctx, readyTimeout); err != nil {
		return c, err
	}
	return c, nil
}

// waitReady polls until every member reports a leader and serves a
// linearizable read, a member exits, or the timeout passes.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	var lastErr error = errors.New("not checked yet")
	for {
		for _, m := range c.Members {
			select {
			case <-m.exited:
				return fmt.Errorf("member %s exited during startup (%v); log tail:\n%s", m.Name, m.waitErr, tail(m.LogPath, 2000))
			default:
			}
		}
		lastErr = c.checkHealthy(ctx, cli)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy within %v: %v", timeout, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) checkHealthy(ctx context.Context, cli *clientv3.Client) error {
	for _, ep := range c.Endpoints() {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(rctx, ep)
		cancel()
		if err != nil {
			return fmt.Errorf("status %s: %w", ep, err)
		}
		if st.Leader == 0 {
			return fmt.Errorf("%s has no leader", ep)
		}
		if len(st.Errors) > 0 {
			return fmt.Errorf("%s: %v", ep, st.Errors)
		}
	}
	// A linearizable read goes through raft's read index: proves a working quorum.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cli.Get(rctx, "/etcdbench/health"); err != nil {
		return fmt.Errorf("linearizable get: %w", err)
	}
	return nil
}

// Stop sends SIGTERM to every member and SIGKILLs those still alive after
// grace. It does not remove data.
func (c *Cluster) Stop(grace time.Duration) {
	for _, m := range c.Members {
		if m.cmd != nil && m.cmd.Process != nil {
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for _, m := range c.Members {
		if m.cmd == nil {
			continue
		}
		if !expired {
			select {
			case <-m.exited:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-m.exited:
		default:
			m.cmd.Process.Kill()
			<-m.exited
		}
	}
}

// Remove deletes the cluster's temp dir (data dirs and logs).
func (c *Cluster) Remove() error { return os.RemoveAll(c.Root) }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
