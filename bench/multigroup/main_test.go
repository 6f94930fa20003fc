package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestGroupsRunAndKeepTokensIncreasing runs 1 and 2 real raft groups (raft-wal
// logs, fsync on) briefly and checks one row per group count, work done, and
// tokens strictly increasing per key.
func TestGroupsRunAndKeepTokensIncreasing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	args := []string{"-groups", "1,2", "-workers", "8", "-keys", "32", "-duration", "300ms", "-warmup", "100ms", "-json"}
	if rc := run(args, &stdout, &stderr); rc != 0 {
		t.Fatalf("multigroup %v: exit %d\n%s", args, rc, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	for _, want := range []int{1, 2} {
		var r row
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("row for %d group(s): %v", want, err)
		}
		if r.Groups != want || r.Ops <= 0 || r.Errors != 0 || r.Violations != 0 || r.CPUPerOpUs <= 0 {
			t.Errorf("%d group(s): %+v", want, r)
		}
	}
	if dec.More() {
		t.Error("more rows than group counts")
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

func TestBadGroupsFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"-groups", "1,x"}, &stdout, &stderr); rc != 2 || !bytes.Contains(stderr.Bytes(), []byte(`bad -groups entry "x"`)) {
		t.Fatalf("exit %d, stderr %q", rc, stderr.String())
	}
}

func TestPerGroupScalesWorkers(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var stdout, stderr bytes.Buffer
	args := []string{"-groups", "2", "-per-group", "3", "-duration", "200ms", "-warmup", "50ms", "-json"}
	if rc := run(args, &stdout, &stderr); rc != 0 {
		t.Fatalf("exit %d\n%s", rc, stderr.String())
	}
	var r row
	if err := json.NewDecoder(&stdout).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Workers != 6 || r.Ops <= 0 {
		t.Fatalf("workers=%d ops=%d, want 6 workers and some ops", r.Workers, r.Ops)
	}
}
