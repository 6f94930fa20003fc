package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/logstore"
)

// The Raft log store: its boundary with the rest of the node is logStore
// and the one step that opens and checks it, openLogStore.

// logStore is what the node needs of its Raft log: the entries
// (raft.LogStore) and Raft's term and vote (raft.StableStore), closed with
// the node.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// logStorePath is the directory of the Raft log in the data directory dir.
func logStorePath(dir string) string { return logstore.StorePath(dir) }

// boltPath is the Raft log of versions before the log store (raft-boltdb),
// migrated at the first start of this one.
func boltPath(dir string) string { return filepath.Join(dir, logstore.BoltFile) }

// openLogStore opens the Raft log in dir and checks it before Raft reads
// it: a raft.db of an earlier version is checked as before and migrated
// into the log store first; a directory whose marker says it held a
// member's state must still have its log; the log store checks every
// entry's checksum and cuts a torn tail back to the last batch that was
// fsynced whole (logstore.Open); and every entry after the newest snapshot
// (index after; 0 when there is none) must be a command that decodes.
// Entries up to after may be missing: Raft does not replay them (a restore
// leaves a gap).
//
// The check reads each of those entries once; each command batch, committed
// or not, is passed to each (when not nil) in log order as it is decoded, so
// that what startup learns from the log costs no second read.
func openLogStore(dir string, after uint64, logger *slog.Logger, each func(fsm.Batch)) (logStore, error) {
	opts := logstore.Options{Logger: newHCLog(logger)}
	if logstore.Pending(dir) {
		migrated, err := logstore.MigrateBolt(dir, func(path string) (logstore.Legacy, error) { return openBolt(path, after) }, opts)
		if err != nil {
			return nil, accessOr(dir, storeError(boltPath(dir), err))
		}
		if migrated {
			logger.Info("the Raft log was migrated from raft.db to the log store", "store", logStorePath(dir),
				"old", filepath.Join(dir, logstore.RetiredBolt), "note", "the old file is kept; delete it once the upgrade is settled")
		}
	}
	path := logStorePath(dir)
	if !logstore.Exists(path) && hasMarker(dir) {
		return nil, damaged(path, fmt.Errorf("the Raft log (%s, or %s of an earlier version) is missing or empty, but %s says this directory held a member's state",
			logstore.StoreDir, logstore.BoltFile, markerPath(dir)))
	}
	s, err := logstore.Open(path, opts)
	if err != nil {
		return nil, accessOr(dir, storeError(path, err))
	}
	if s.Cut.Bytes > 0 {
		logger.Warn("the Raft log ended in a torn write (the server stopped while writing it): cut back to the last batch written whole; "+
			"nothing cut was acknowledged", "file", s.Cut.File, "bytes", s.Cut.Bytes, "last_entry", s.Cut.LastIndex)
	}
	if err := verifyLog(path, s, after, each); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// storeError gives the log store's errors the node's guidance: damage
// names the file, with the fix (damaged).
func storeError(path string, err error) error {
	var d *logstore.DamageError
	switch {
	case errors.Is(err, ErrDamaged), errors.Is(err, ErrAccess):
		return err
	case errors.As(err, &d):
		return damaged(d.Path, d.Err)
	case errors.Is(err, logstore.ErrLocked):
		return fmt.Errorf("open Raft log %s: it is locked by another process (is another ticketd using this data directory?)", path)
	}
	return err
}

// openBolt opens an earlier version's raft.db (at path, or where a
// migration interrupted by a crash left it) with the checks it always had,
// for the migration to read.
func openBolt(path string, after uint64) (logstore.Legacy, error) {
	if err := checkBoltFile(path); err != nil {
		return nil, err
	}
	s, err := openStore(path)
	if err != nil {
		return nil, err
	}
	if err := verifyLog(path, s, after, nil); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// checkBoltFile opens raft.db read-only and checks that the file is as
// long as BoltDB's own high-water mark says: a truncated file would
// otherwise crash the process with SIGBUS when a missing page is read.
func checkBoltFile(path string) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(path, &err)
	info, err := os.Stat(path)
	if err != nil || info.Size() == 0 {
		return nil // new: nothing to check
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("open Raft log %s: it is locked by another process (is another ticketd using this data directory?)", path)
	}
	if err != nil {
		if isAccess(err) {
			return accessOr(filepath.Dir(path), err)
		}
		return damaged(path, err)
	}
	defer func() { _ = db.Close() }()
	var want int64
	if err := db.View(func(tx *bbolt.Tx) error { want = tx.Size(); return nil }); err != nil {
		return damaged(path, err)
	}
	if info.Size() < want {
		return damaged(path, fmt.Errorf("the file is %d bytes but its pages reach %d: it was truncated", info.Size(), want))
	}
	return nil
}

// openStore opens the BoltDB log and stable store, with faults turned into errors.
func openStore(path string) (s *raftboltdb.BoltStore, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(path, &err)
	s, err = raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: 2 * time.Second}})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("open Raft log %s: it is locked by another process (is another ticketd using this data directory?)", path)
	}
	if err != nil {
		if isAccess(err) {
			return nil, accessOr(filepath.Dir(path), err)
		}
		return nil, damaged(path, err)
	}
	return s, nil
}

// verifyLog reads every entry of the log after index after before Raft
// does: each must decode, sit at its own index, and (for commands) be an
// intact batch whose checksum matches. Raft would otherwise panic on an
// undecodable entry, or apply a damaged one as some other operation. Each
// intact command batch is passed to each (when not nil).
func verifyLog(path string, s raft.LogStore, after uint64, each func(fsm.Batch)) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(path, &err)
	first, err := s.FirstIndex()
	if err != nil {
		return damaged(path, err)
	}
	last, err := s.LastIndex()
	if err != nil {
		return damaged(path, err)
	}
	if last == 0 {
		return nil
	}
	// Raft replays only what follows the latest snapshot; entries before it
	// may have gaps (a restore leaves one).
	if after > 0 {
		first = max(first, after+1)
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := s.GetLog(i, &l); err != nil {
			return damaged(path, fmt.Errorf("log entry %d: %w", i, err))
		}
		if l.Index != i {
			return damaged(path, fmt.Errorf("log entry %d is stored as entry %d", i, l.Index))
		}
		if l.Type == raft.LogCommand {
			b, err := fsm.DecodeBatch(l.Data)
			if err != nil {
				return damaged(path, fmt.Errorf("log entry %d: %w", i, err))
			}
			if each != nil {
				b.Index = i
				each(b)
			}
		}
	}
	return nil
}
