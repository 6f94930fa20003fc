package logstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testdisk"
)

// A full disk: appends fail (and are not acknowledged), every acknowledged
// entry stays readable, and once space returns the same open store appends
// again, and opens again with everything.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	testdisk.MountTmpfs(t, dir, 1<<20)
	s, err := Open(filepath.Join(dir, "wal"), Options{SegmentSize: testSegment})
	if err != nil {
		t.Fatal(err)
	}
	filler := testdisk.Fill(t, dir)
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
