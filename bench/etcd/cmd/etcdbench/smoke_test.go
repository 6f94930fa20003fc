package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// buildBinary compiles etcdbench into a temp dir (the benchmark re-executes
// its own binary as the etcd server, so it must be a real executable).
func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "etcdbench")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// TestSmoke runs every workload for about a second against one etcd member
// started by the binary and checks the JSON output.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd servers; skipped with -short")
	}
	bin := buildBinary(t)
	cases := []struct {
		workload string
		args     []string
	}{
		{benchkit.Uncontended, []string{"-clients", "16"}},
		{benchkit.Contended, []string{"-clients", "4"}},
		{benchkit.Hold, []string{"-clients", "2", "-n", "200"}},
		{benchkit.Connections, []string{"-clients", "2", "-n", "20"}},
	}
	for _, tc := range cases {
		t.Run(tc.workload, func(t *testing.T) {
			tmp := t.TempDir() // the cluster's data dirs go here
			args := append([]string{"-workload", tc.workload, "-nodes", "1",
				"-duration", "1s", "-warmup", "300ms", "-json", "-q"}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("etcdbench %v: %v\nstderr:\n%s", args, err, stderr.String())
			}
			t.Logf("%s", bytes.TrimSpace(stderr.Bytes()))

			// Exactly one JSON object on stdout, with the agreed keys.
			dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
			var raw map[string]any
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
			}
			if dec.More() {
				t.Fatalf("more than one JSON value on stdout:\n%s", stdout.String())
			}
			for _, k := range []string{"system", "workload", "nodes", "clients", "duration_s", "ops",
				"ops_per_sec", "errors", "latency_ms", "acquire_latency_ms", "server_rss_bytes", "notes"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("missing key %q", k)
				}
			}
			if len(raw) != 12 {
				t.Errorf("got %d keys, want 12: %v", len(raw), raw)
			}
			var r benchkit.Result
			dstrict := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
			dstrict.DisallowUnknownFields()
			if err := dstrict.Decode(&r); err != nil {
				t.Fatalf("decode benchkit.Result: %v", err)
			}
			if r.System != "etcd" || r.Workload != tc.workload || r.Nodes != 1 {
				t.Errorf("header = %q %q %d", r.System, r.Workload, r.Nodes)
			}
			if r.Ops <= 0 || r.OpsPerSec <= 0 {
				t.Errorf("ops = %d (%.1f/s), want > 0", r.Ops, r.OpsPerSec)
			}
			if r.AcquireLatencyMs.P50 <= 0 || r.LatencyMs.P50 <= 0 || r.LatencyMs.Max < r.LatencyMs.P99 {
				t.Errorf("latencies look wrong: %+v %+v", r.LatencyMs, r.AcquireLatencyMs)
			}
			if r.ServerRSSBytes <= 0 {
				t.Errorf("server_rss_bytes = %d, want > 0", r.ServerRSSBytes)
			}
			if r.Errors != 0 {
				t.Errorf("errors = %d on a healthy 1-node cluster; notes: %s", r.Errors, r.Notes)
			}
			// Data dirs and logs are removed without -keep-data.
			left, _ := os.ReadDir(tmp)
			for _, e := range left {
				t.Errorf("left behind in TMPDIR: %s", e.Name())
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	for ep, ok := range map[string]bool{
		"127.0.0.1:2379":        true,
		"127.3.4.5:1":           true,
		"localhost:2379":        true,
		"[::1]:2379":            true,
		"http://127.0.0.1:2379": true,
		"10.0.0.1:2379":         false,
		"192.168.1.1:2379":      false,
		"example.com:2379":      false,
		"127.0.0.1":             false,
	} {
		if err := checkLoopback(ep); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok=%v", ep, err, ok)
		}
	}
}
