package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNoRedisServer: redis-server is not installed.
var errNoRedisServer = errors.New("redis-server not found on PATH: install Debian's package with `apt-get install -y redis-server` (or give -redis-server PATH)")

// server is one redis-server process started by the benchmark, with the
// append-only file fsynced before every answer (appendfsync always), so a
// grant is on disk before it is answered, as Ticketing's is. Its data dir
// is under $TMPDIR, on the same disk as the other systems' data.
type server struct {
	dir    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startServer starts redis-server on a free loopback port and waits until
// it answers PING, it exits, or ready passes.
func startServer(ctx context.Context, bin string, ready time.Duration) (*server, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", errNoRedisServer, err)
	}
	dir, err := os.MkdirTemp("", "redisbench-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{dir: dir, addr: "127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	logPath := filepath.Join(dir, "redis.log")
	s.cmd = exec.Command(path,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "", // no RDB snapshots: the append-only file is the durability
		"--daemonize", "no",
		"--logfile", logPath,
		"--maxclients", "20000",
	)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()

	rctx, cancel := context.WithTimeout(ctx, ready)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }() // the probe client only: nothing to report
	for {
		if err := rdb.Ping(rctx).Err(); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			s.remove()
			return nil, fmt.Errorf("redis-server exited during startup (%v); log:\n%s", s.err, log)
		case <-rctx.Done():
			s.stop()
			s.remove()
			return nil, fmt.Errorf("redis-server not answering PING on %s within %v", s.addr, ready)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits up to 5 s, then kills.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *server) remove() { os.RemoveAll(s.dir) }

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
