package logstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// boltDir makes a raft directory with a raft-boltdb raft.db holding
// entries first..last and a term and vote.
func boltDir(t *testing.T, first, last uint64) string {
	t.Helper()
	dir := t.TempDir()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, BoltFile))
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := first; i <= last; i++ {
		logs = append(logs, newLog(i))
	}
	if err := b.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	b.Close()
	return dir
}

func openBolt(path string) (Legacy, error) {
	return raftboltdb.NewBoltStore(path)
}

func checkMigrated(t *testing.T, dir string, first, last uint64) {
	t.Helper()
	if exists(filepath.Join(dir, BoltFile)) || !exists(filepath.Join(dir, RetiredBolt)) || exists(filepath.Join(dir, migratingDir)) || exists(filepath.Join(dir, MigratingMark)) {
		t.Fatalf("after the migration: %v", ls(dir))
	}
	s := open(t, StorePath(dir))
	defer s.Close()
	checkEntries(t, s, first, last)
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 7 {
		t.Fatalf("CurrentTerm %d", v)
	}
	if v, _ := s.Get([]byte("LastVoteCand")); string(v) != "n3" {
		t.Fatalf("LastVoteCand %q", v)
	}
}

func ls(dir string) string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

func migrate(t *testing.T, dir string) bool {
	t.Helper()
	done, err := MigrateBolt(dir, openBolt, Options{SegmentSize: testSegment})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return done
}

func TestMigrateBolt(t *testing.T) {
	dir := boltDir(t, 1, 700)
	if !Pending(dir) || !migrate(t, dir) {
		t.Fatal("nothing migrated")
	}
	checkMigrated(t, dir, 1, 700)
	if Pending(dir) || migrate(t, dir) {
		t.Fatal("migrated twice")
	}
	checkMigrated(t, dir, 1, 700)
}

// A log compacted after a snapshot starts late; a restore can leave a gap
// before the snapshot: the entries after the last gap are migrated.
func TestMigrateBoltWithGap(t *testing.T) {
	dir := boltDir(t, 50, 300)
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, BoltFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteRange(100, 120); err != nil {
		t.Fatal(err)
	}
	b.Close()
	migrate(t, dir)
	checkMigrated(t, dir, 121, 300)
}

func TestMigrateEmptyDirectoryDoesNothing(t *testing.T) {
	dir := t.TempDir()
	if Pending(dir) || migrate(t, dir) {
		t.Fatal("migrated an empty directory")
	}
}

// A crash at each point of a migration leaves a directory that the next
// start migrates (again) to the same result.
func TestMigrateBoltAfterACrash(t *testing.T) {
	t.Run("while copying", func(t *testing.T) {
		dir := boltDir(t, 1, 300)
		// A partial new store: half the entries.
		s := open(t, filepath.Join(dir, migratingDir))
		appendBatches(t, s, 1, 150, 10)
		s.Close()
		migrate(t, dir)
		checkMigrated(t, dir, 1, 300)
	})
	t.Run("between the renames", func(t *testing.T) {
		dir := boltDir(t, 1, 300)
		migrate(t, dir)
		// Undo the last rename: raft.db is retired, the new store not in place.
		if err := os.Rename(StorePath(dir), filepath.Join(dir, migratingDir)); err != nil {
			t.Fatal(err)
		}
		if !Pending(dir) {
			t.Fatal("an interrupted migration is not pending")
		}
		migrate(t, dir)
		checkMigrated(t, dir, 1, 300)
	})
	t.Run("retrying, before the new copy began", func(t *testing.T) {
		dir := boltDir(t, 1, 300)
		migrate(t, dir)
		// raft.db retired, the marker still there, nothing copied yet.
		if err := os.RemoveAll(StorePath(dir)); err != nil {
			t.Fatal(err)
		}
		if err := writeMark(filepath.Join(dir, MigratingMark)); err != nil {
			t.Fatal(err)
		}
		migrate(t, dir)
		checkMigrated(t, dir, 1, 300)
	})
	t.Run("after wal was in place", func(t *testing.T) {
		dir := boltDir(t, 1, 300)
		migrate(t, dir)
		if err := writeMark(filepath.Join(dir, MigratingMark)); err != nil {
			t.Fatal(err)
		}
		if migrate(t, dir) {
			t.Fatal("migrated again after the migration finished")
		}
		checkMigrated(t, dir, 1, 300)
	})
}

// TestMigrationSourceNeverReadAgain: once the migration finished, a
// directory whose log store is gone is refused, naming raft.db.migrated,
// rather than migrated again from the log as it was before the upgrade.
func TestMigrationSourceNeverReadAgain(t *testing.T) {
	dir := boltDir(t, 1, 100)
	migrate(t, dir)
	if err := os.RemoveAll(StorePath(dir)); err != nil {
		t.Fatal(err)
	}
	_, err := MigrateBolt(dir, openBolt, Options{SegmentSize: testSegment})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), RetiredBolt) || !strings.Contains(err.Error(), "lost its log") {
		t.Fatalf("a lost log store beside the migrated raft.db: %v", err)
	}
	if exists(StorePath(dir)) || !exists(filepath.Join(dir, RetiredBolt)) {
		t.Fatalf("the refusal changed the directory: %s", ls(dir))
	}
	t.Logf("refused: %v", err)
}

// raft.db next to a migrated store: put back by hand or by an older
// ticketd. Neither is taken silently.
func TestMigrateBoltRefusesBothLogs(t *testing.T) {
	dir := boltDir(t, 1, 100)
	migrate(t, dir)
	if err := os.Rename(filepath.Join(dir, RetiredBolt), filepath.Join(dir, BoltFile)); err != nil {
		t.Fatal(err)
	}
	_, err := MigrateBolt(dir, openBolt, Options{SegmentSize: testSegment})
	if err == nil || !strings.Contains(err.Error(), "both present") {
		t.Fatalf("migrating with raft.db and the new store both present: %v", err)
	}
	t.Logf("refused: %v", err)
}
