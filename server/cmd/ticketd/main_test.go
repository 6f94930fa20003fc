package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// syncBuffer is a strings.Builder safe for the server's logging goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	addrs := make(chan net.Addr, 1)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{
			"--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "",
			"--data-dir", t.TempDir(), "--node-id", "solo", "--initial-cluster-state", "new", "--log-level", "debug",
		}, &stdout, &stderr, func(s *server.Server) { addrs <- s.ClientAddr() })
	}()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case c := <-code:
		t.Fatalf("run exited with %d before serving:\n%s", c, stderr.String())
	}
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("dial the client listener: %v", err)
	}
	nc.Close()
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d after clean shutdown:\n%s", c, stderr.String())
	}
	logs := stderr.String()
	for _, want := range []string{`msg="ticketd started"`, "node=solo", "data_dir=", "msg=stopped", "version=", "commit=", "raft_tls=false"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// --log-format json: every line, the start line included, is one JSON
// object; the start line names the build and whether Raft TLS is on.
func TestRunLogsJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	started := make(chan struct{}, 1)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{
			"--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "",
			"--data-dir", t.TempDir(), "--node-id", "solo", "--initial-cluster-state", "new", "--log-format", "json",
		}, &stdout, &stderr, func(*server.Server) { started <- struct{}{} })
	}()
	select {
	case <-started:
	case c := <-code:
		t.Fatalf("run exited with %d before serving:\n%s", c, stderr.String())
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d:\n%s", c, stderr.String())
	}
	var startLine map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if m["msg"] == "ticketd started" {
			startLine = m
		}
	}
	if startLine == nil || startLine["version"] == "" || startLine["commit"] == nil || startLine["go"] == nil || startLine["raft_tls"] != false {
		t.Errorf("start line %v, want version, commit, go and raft_tls false", startLine)
	}
}

func TestRunStartupErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	garbage := filepath.Join(t.TempDir(), "garbage.snap")
	if err := os.WriteFile(garbage, []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"config error", []string{"--node-id", ""}, "ticketd: invalid configuration: node_id is empty"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined: -nope"},
		{"restore of a file that is not a backup", []string{"--restore", garbage, "--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "", "--data-dir", t.TempDir()}, "not a valid Ticketing snapshot"},
		{"port in use", []string{"--listen", busy.Addr().String(), "--raft-listen", "127.0.0.1:0", "--initial-cluster-state", "new", "--http-listen", "", "--data-dir", t.TempDir()}, "ticketd: listen for clients on " + busy.Addr().String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			c := run(context.Background(), tc.args, &stdout, &stderr, func(*server.Server) { t.Error("server started") })
			if c != 1 {
				t.Errorf("exit code %d, want 1", c)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestRunVersionAndHelp(t *testing.T) {
	var stdout, stderr syncBuffer
	if c := run(context.Background(), []string{"--version"}, &stdout, &stderr, nil); c != 0 || !strings.HasPrefix(stdout.String(), "ticketd ") {
		t.Errorf("--version: exit %d, stdout %q", c, stdout.String())
	}
	stdout, stderr = syncBuffer{}, syncBuffer{}
	if c := run(context.Background(), []string{"-h"}, &stdout, &stderr, nil); c != 0 || !strings.Contains(stderr.String(), "-bootstrap") {
		t.Errorf("-h: exit %d, stderr %q", c, stderr.String())
	}
}
