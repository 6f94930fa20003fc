package logstore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// appenderEnv names the store directory a child process of this test
// binary appends to (see TestMain): the kill -9 test's victim.
const appenderEnv = "TICKETING_LOGSTORE_APPENDER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(appenderEnv); dir != "" {
		appendForever(dir)
	}
	os.Exit(m.Run())
}

// appendForever appends batches of 1 to 20 entries after the last one the
// store holds and prints "acked N" once StoreLogs returned for entry N.
func appendForever(dir string) {
	s, err := Open(dir, Options{SegmentSize: testSegment})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	last, _ := s.LastIndex()
	for {
		n := 1 + rand.IntN(20)
		logs := make([]*raft.Log, n)
		for i := range logs {
			logs[i] = newLog(last + 1 + uint64(i))
		}
		if err := s.StoreLogs(logs); err != nil {
			fmt.Fprintln(os.Stderr, "store:", err)
			os.Exit(4)
		}
		last += uint64(n)
		fmt.Printf("acked %d\n", last)
	}
}

// killCycles is how many times TestKill9DuringAppends kills the appender:
// TICKETING_LOGSTORE_KILL_CYCLES, or 12 (a few seconds; segments are
// small, so the run crosses many segment rotations).
func killCycles(t *testing.T) int {
	if v := os.Getenv("TICKETING_LOGSTORE_KILL_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TICKETING_LOGSTORE_KILL_CYCLES=%q: want a positive number", v)
		}
		return n
	}
	return 12
}

// TestKill9DuringAppends kills a process appending to a store with SIGKILL
// at a random moment, again and again on the same directory: every entry
// it saw acknowledged must be there and intact after each kill, and the
// store must open without repair.
func TestKill9DuringAppends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	var acked uint64
	for cycle := range killCycles(t) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), appenderEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		want := 1 + rand.IntN(60) // acknowledgements to see before the kill
		for seen := 0; seen < want && lines.Scan(); seen++ {
			n, err := strconv.ParseUint(strings.TrimPrefix(lines.Text(), "acked "), 10, 64)
			if err != nil {
				t.Fatalf("appender said %q", lines.Text())
			}
			acked = n
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if strings.TrimSpace(stderr.String()) != "" {
			t.Fatalf("cycle %d: the appender failed: %s", cycle, stderr.String())
		}
		s, err := Open(dir, Options{SegmentSize: testSegment})
		if err != nil {
			t.Fatalf("cycle %d: open after kill -9: %v", cycle, err)
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if last < acked {
			t.Fatalf("cycle %d: the store ends at entry %d, but entry %d was acknowledged", cycle, last, acked)
		}
		checkEntries(t, s, first, last)
		// Compact as Raft does after a snapshot: the log stays short, and
		// head truncation is crashed into too.
		if last > 500 {
			if err := s.DeleteRange(first, last-500); err != nil {
				t.Fatalf("cycle %d: delete a prefix: %v", cycle, err)
			}
		}
		// Now and then drop the newest entries, as a follower does with
		// entries its leader's log does not have.
		if cycle%3 == 2 && last > 510 {
			if err := s.DeleteRange(last-4, last); err != nil {
				t.Fatalf("cycle %d: delete a suffix: %v", cycle, err)
			}
			acked = last - 5
		}
		s.Close()
	}
	t.Logf("%d kills, %d entries acknowledged, %d segment files", killCycles(t), acked, len(segmentsOf(dir)))
}

// A segment whose last batch sealed it (an index frame) while the
// metadata still lists it unsealed: the appender stopped between the two.
// raft-wal alone refuses every append after that; the store goes on, with
// every entry of that batch.
func TestSealNotRecordedIsUndone(t *testing.T) {
	dir := t.TempDir()
	s := openUnmarked(t, dir)
	var last uint64
	for len(segmentsOf(dir)) < 2 {
		appendBatches(t, s, last+1, last+5, 5)
		last += 5
	}
	s.crash()
	// Undo the rotation in the metadata, as if it never happened. (Entries
	// appended to the second segment are gone with it.)
	var sealedLast uint64
	db, err := bbolt.Open(filepath.Join(dir, MetaFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.MetaBucket))
		var st types.PersistentState
		if err := json.Unmarshal(b.Get([]byte(metadb.MetaKey)), &st); err != nil {
			return err
		}
		if len(st.Segments) != 2 {
			return fmt.Errorf("%d segments in the metadata", len(st.Segments))
		}
		st.Segments, sealedLast = st.Segments[:1], st.Segments[0].MaxIndex
		st.Segments[0].SealTime, st.Segments[0].MaxIndex, st.Segments[0].IndexStart = time.Time{}, 0, 0
		st.NextSegmentID--
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		return b.Put([]byte(metadb.MetaKey), raw)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sealedLast == 0 {
		t.Fatal("the first segment was not sealed")
	}
	s = open(t, dir)
	checkEntries(t, s, 1, sealedLast)
	appendBatches(t, s, sealedLast+1, sealedLast+40, 4)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	checkEntries(t, s, 1, sealedLast+40)
}
