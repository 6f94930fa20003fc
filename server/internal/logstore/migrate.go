package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// The files of a raft directory during and after a migration from
// raft-boltdb: raft.db is the old log and stable store; the new store is
// built in wal.migrating, raft.db is renamed to raft.db.migrated, and then
// wal.migrating to wal. Each rename is atomic and followed by an fsync of
// the directory, so after a crash at any point the directory is in one of
// these states, and MigrateBolt finishes the job from it:
//
//	raft.db (and perhaps a partial wal.migrating)  -> migrate from raft.db
//	raft.db.migrated and MIGRATING, no wal         -> migrate again from raft.db.migrated
//	wal (and raft.db.migrated)                     -> done
//
// MIGRATING is the migration's own marker: written before raft.db is
// renamed, removed only once wal is in place. raft.db.migrated is read
// only while it is there (or, from a version before the marker, while
// wal.migrating is): once the migration finished, raft.db.migrated is the
// log as it was before the upgrade, and a directory that has it but not
// wal lost its log store. Reading the old file then would bring back the
// pre-upgrade log, and with it tokens granted again; MigrateBolt refuses,
// naming both (a *DamageError).
//
// raft.db and wal never both exist by MigrateBolt's doing; if they do, the
// directory was changed by hand (or by an older ticketd) and it refuses.
const (
	BoltFile      = "raft.db"
	RetiredBolt   = "raft.db.migrated"
	StoreDir      = "wal"
	migratingDir  = "wal.migrating"
	MigratingMark = "MIGRATING"
)

// stableKeys are the stable-store keys hashicorp/raft uses (its
// keyCurrentTerm, keyLastVoteTerm and keyLastVoteCand).
var (
	stableUint64Keys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	stableBytesKeys  = [][]byte{[]byte("LastVoteCand")}
)

// Legacy is the old store being migrated (raft-boltdb's BoltStore).
type Legacy interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// migration names the files of one raft directory.
type migration struct {
	raftDir string
}

func (m migration) path(name string) string { return filepath.Join(m.raftDir, name) }

// Pending reports whether raftDir holds a raft-boltdb log that is not
// migrated yet (or whose migration a crash interrupted): MigrateBolt has
// work to do. The store path is StorePath(raftDir) afterwards.
func Pending(raftDir string) bool {
	m := migration{raftDir}
	return nonEmpty(m.path(BoltFile)) || (exists(m.path(RetiredBolt)) && !Exists(m.path(StoreDir)))
}

// StorePath is where the store of raftDir lives.
func StorePath(raftDir string) string { return filepath.Join(raftDir, StoreDir) }

// MigrateBolt moves a raft-boltdb log and its stable values in raftDir into
// a new store at StorePath(raftDir). open opens the old store (and checks
// it: a damaged raft.db must be refused there, naming it); its path is
// raft.db, or raft.db.migrated when a crash interrupted an earlier run.
// Every entry and value is copied, the new store is closed, opened again
// (with every check of Open) and compared with the old one entry by entry;
// only then is raft.db retired. It does nothing when there is nothing to
// migrate, and is safe to run again after a crash at any point.
func MigrateBolt(raftDir string, open func(path string) (Legacy, error), opts Options) (migrated bool, err error) {
	m := migration{raftDir}
	db, retired, store, tmp := m.path(BoltFile), m.path(RetiredBolt), m.path(StoreDir), m.path(migratingDir)
	var src string
	switch {
	case nonEmpty(db) && Exists(store):
		return false, fmt.Errorf("%s and %s are both present: this directory was migrated to the new log store, and %s was put back since "+
			"(by hand, or by an older ticketd). The log in %s is the one this server used last unless you know otherwise: "+
			"move %s out of the directory and start again, or, if %s is the right one, move %s away instead",
			db, store, BoltFile, store, db, db, store)
	case nonEmpty(db):
		src = db
	case exists(retired) && !Exists(store) && (exists(m.path(MigratingMark)) || exists(tmp)):
		src = retired
	case exists(retired) && !Exists(store):
		return false, damage(store, fmt.Errorf("the Raft log store is missing, and %s is the log from before the upgrade that migrated it (that migration finished): "+
			"it lacks every entry written since and is never read again. This directory lost its log: rebuild the server as a new member "+
			"(ticketctl members remove, an empty data directory, --join, ticketctl members add); do not rename %s back",
			retired, RetiredBolt))
	default:
		// Nothing to migrate; a crash may have left the marker after wal
		// was in place (the migration had finished) or an unused store.
		if err := os.Remove(m.path(MigratingMark)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := os.RemoveAll(tmp); err != nil {
			return false, err
		}
		return false, nil
	}
	old, err := open(src)
	if err != nil {
		return false, err
	}
	defer func() {
		if old != nil {
			_ = old.Close()
		}
	}()
	// The marker first: from here on a crash leaves raft.db.migrated to be
	// read again only while the marker says the migration is unfinished.
	if err := writeMark(m.path(MigratingMark)); err != nil {
		return false, err
	}
	if err := syncDir(raftDir); err != nil {
		return false, err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return false, err
	}
	first, last, err := copyInto(tmp, old, opts)
	if err != nil {
		return false, err
	}
	if err := compare(tmp, old, first, last, opts); err != nil {
		return false, err
	}
	if err := syncDir(tmp); err != nil {
		return false, err
	}
	_ = old.Close()
	old = nil
	if src == db {
		if err := os.Rename(db, retired); err != nil {
			return false, err
		}
		if err := syncDir(raftDir); err != nil {
			return false, err
		}
	}
	if err := os.Rename(tmp, store); err != nil {
		return false, err
	}
	if err := syncDir(raftDir); err != nil {
		return false, err
	}
	if err := os.Remove(m.path(MigratingMark)); err != nil {
		return false, err
	}
	return true, syncDir(raftDir)
}

// writeMark creates the file path, empty, and fsyncs it.
func writeMark(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyInto copies old's entries (from the first after the last gap: a
// restore can leave one before the snapshot, and the new store holds one
// run of entries) and stable values into a new store at dir.
func copyInto(dir string, old Legacy, opts Options) (first, last uint64, err error) {
	first, err = old.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	last, err = old.LastIndex()
	if err != nil {
		return 0, 0, err
	}
	var l raft.Log
	if last > 0 {
		for i := last; i >= first && i > 0; i-- {
			if err := old.GetLog(i, &l); errors.Is(err, raft.ErrLogNotFound) {
				first = i + 1
				break
			} else if err != nil {
				return 0, 0, fmt.Errorf("read log entry %d: %w", i, err)
			}
		}
	}
	s, err := Open(dir, opts)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	const batch = 256
	for i := first; last > 0 && i <= last; i += batch {
		logs := make([]*raft.Log, 0, batch)
		for j := i; j <= last && j < i+batch; j++ {
			l := new(raft.Log)
			if err := old.GetLog(j, l); err != nil {
				return 0, 0, fmt.Errorf("read log entry %d: %w", j, err)
			}
			logs = append(logs, l)
		}
		if err := s.StoreLogs(logs); err != nil {
			return 0, 0, fmt.Errorf("write log entries %d to %d: %w", i, logs[len(logs)-1].Index, err)
		}
	}
	for _, k := range stableUint64Keys {
		if v, err := old.GetUint64(k); err == nil && v != 0 {
			if err := s.SetUint64(k, v); err != nil {
				return 0, 0, err
			}
		}
	}
	for _, k := range stableBytesKeys {
		if v, err := old.Get(k); err == nil && len(v) > 0 {
			if err := s.Set(k, v); err != nil {
				return 0, 0, err
			}
		}
	}
	return first, last, nil
}

// compare opens the new store again and checks it holds exactly what old
// holds from first to last, and the same stable values.
func compare(dir string, old Legacy, first, last uint64, opts Options) (err error) {
	s, err := Open(dir, opts)
	if err != nil {
		return fmt.Errorf("the migrated log does not open: %w", err)
	}
	defer func() { _ = s.Close() }()
	differs := func(what string, args ...any) error {
		return fmt.Errorf("the migrated log differs from the old one: "+what, args...)
	}
	gotLast, err := s.LastIndex()
	if err != nil {
		return err
	}
	if last == 0 {
		if gotLast != 0 {
			return differs("it holds entries up to %d, the old one none", gotLast)
		}
	} else if gotFirst, _ := s.FirstIndex(); gotFirst != first || gotLast != last {
		return differs("it holds entries %d to %d, the old one %d to %d", gotFirst, gotLast, first, last)
	}
	var a, b raft.Log
	for i := first; last > 0 && i <= last; i++ {
		if err := old.GetLog(i, &a); err != nil {
			return err
		}
		if err := s.GetLog(i, &b); err != nil {
			return differs("entry %d: %v", i, err)
		}
		if a.Index != b.Index || a.Term != b.Term || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) || !bytes.Equal(a.Extensions, b.Extensions) {
			return differs("entry %d", i)
		}
	}
	for _, k := range stableUint64Keys {
		want, _ := old.GetUint64(k)
		if got, _ := s.GetUint64(k); got != want {
			return differs("%s is %d, the old one %d", k, got, want)
		}
	}
	for _, k := range stableBytesKeys {
		want, _ := old.Get(k)
		if got, _ := s.Get(k); !bytes.Equal(got, want) {
			return differs("%s is %q, the old one %q", k, got, want)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func nonEmpty(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Size() > 0
}

// syncDir makes renames and new files in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, fs.ErrInvalid) {
		return nil
	}
	return err
}
