package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// mountTmpfs puts a tmpfs of size bytes on dir (as root), unmounted when the
// test ends.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a tmpfs on %s (the test needs root): %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fillDisk writes a file into dir until the file system is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return name
		}
	}
}

// A full disk: appends fail (and are not acknowledged), every acknowledged
// entry stays readable, and once space returns the same open store appends
// again, and opens again with everything.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, 1<<20)
	s, err := Open(filepath.Join(dir, "wal"), Options{SegmentSize: testSegment})
	if err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)
	var acked uint64
	var failed error
	for failed == nil {
		logs := []*raft.Log{newLog(acked + 1), newLog(acked + 2), newLog(acked + 3)}
		if failed = s.StoreLogs(logs); failed == nil {
			acked += 3
		}
		if acked > 100000 {
			t.Fatal("appends never failed on a full disk")
		}
	}
	t.Logf("the write after entry %d failed: %v", acked, failed)
	checkEntries(t, s, 1, acked)
	// Still full: retries fail cleanly, or succeed where the cut of the
	// failed write freed room; either way nothing acknowledged is lost.
	for range 20 {
		if err := s.StoreLogs([]*raft.Log{newLog(acked + 1)}); err == nil {
			acked++
		}
	}
	checkEntries(t, s, 1, acked)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, s, acked+1, acked+60, 5)
	checkEntries(t, s, 1, acked+60)
	s.Close()
	s = open(t, filepath.Join(dir, "wal"))
	defer s.Close()
	checkEntries(t, s, 1, acked+60)
}
