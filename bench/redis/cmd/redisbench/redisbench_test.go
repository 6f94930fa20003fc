package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// needRedisServer fails (never skips) when redis-server is missing.
func needRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("%v", errNoRedisServer)
	}
}

// TestWorkloadsAgainstRedis runs both workloads briefly against a real
// redis-server started by the benchmark and checks the shared JSON schema,
// that work was done and that no token went backwards.
func TestWorkloadsAgainstRedis(t *testing.T) {
	needRedisServer(t)
	for _, w := range []string{benchkit.Uncontended, benchkit.Contended} {
		t.Run(w, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // the server's data dir goes here
			var stdout, stderr bytes.Buffer
			args := []string{"-workload", w, "-clients", "4", "-duration", "500ms", "-warmup", "200ms", "-json", "-q"}
			if rc := run(args, &stdout, &stderr); rc != 0 {
				t.Fatalf("redisbench %v: exit %d\n%s", args, rc, stderr.String())
			}
			dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
			dec.DisallowUnknownFields()
			var r benchkit.Result
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("stdout is not one result: %v\n%s", err, stdout.String())
			}
			if dec.More() {
				t.Fatalf("more than one JSON value on stdout:\n%s", stdout.String())
			}
			if r.System != "redis" || r.Workload != w || r.Nodes != 1 || r.Clients != 4 {
				t.Errorf("header = %q %q %d %d", r.System, r.Workload, r.Nodes, r.Clients)
			}
			if r.Ops <= 0 || r.Errors != 0 || r.ServerRSSBytes <= 0 {
				t.Errorf("ops=%d errors=%d rss=%d; notes: %s", r.Ops, r.Errors, r.ServerRSSBytes, r.Notes)
			}
			left, _ := os.ReadDir(tmp)
			for _, e := range left {
				t.Errorf("left behind in TMPDIR: %s", e.Name())
			}
		})
	}
}

// TestLockFencingAndOwnRelease: a held key is not granted again; after the
// TTL ends the next grant has a higher token; the old owner's release does
// not delete the new owner's lock.
func TestLockFencingAndOwnRelease(t *testing.T) {
	needRedisServer(t)
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startServer(ctx, "redis-server", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.stop(); srv.remove() }()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr, MaxRetries: -1})
	defer rdb.Close()

	short := newRedisLock(rdb, 200*time.Millisecond, 0, time.Millisecond)
	tok1, release1, err := short.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := short.Acquire(ctx, "k"); !errors.Is(err, errWaitOver) {
		t.Fatalf("second acquire of a held key: %v, want errWaitOver", err)
	}
	// Wait (bounded) for the TTL to end the first grant.
	for rdb.Exists(ctx, keys("k")[0]).Val() == 1 {
		if ctx.Err() != nil {
			t.Fatal("lock key never expired")
		}
		time.Sleep(10 * time.Millisecond) // polling interval of the condition above
	}
	long := newRedisLock(rdb, time.Minute, 0, time.Millisecond)
	tok2, release2, err := long.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if tok2 <= tok1 {
		t.Fatalf("token after expiry %d, want > %d", tok2, tok1)
	}
	if err := release1(ctx); !errors.Is(err, errNotHeld) {
		t.Fatalf("stale owner's release: %v, want errNotHeld", err)
	}
	if rdb.Exists(ctx, keys("k")[0]).Val() != 1 {
		t.Fatal("stale owner's release deleted the new owner's lock")
	}
	if err := release2(ctx); err != nil {
		t.Fatal(err)
	}
	tok3, _, err := long.Acquire(ctx, "k")
	if err != nil || tok3 <= tok2 {
		t.Fatalf("acquire after release: token %d err %v, want > %d", tok3, err, tok2)
	}
}
