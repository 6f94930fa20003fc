package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// memberMarker is a file written into the data directory once this server
// holds Raft state. If it is there but raft.db is missing or empty, the log
// was lost: starting anyway would serve an empty state and grant old tokens
// again, so Open refuses.
const memberMarker = "MEMBER"

// ErrDamaged reports a data directory that cannot be trusted.
var ErrDamaged = errors.New("data directory damaged")

func damaged(path string, cause error) error {
	return fmt.Errorf("%w: %s: %v. This server's state cannot be trusted and it will not start; "+
		"restore it from a backup (ticketd --restore), or remove its data directory and add it back "+
		"to its cluster as a new member (ticketctl members remove/add)", ErrDamaged, path, cause)
}

// ErrAccess reports a data directory this process may not read or write
// (permissions, a read-only file system). That says nothing about damage.
var ErrAccess = errors.New("data directory not accessible")

func isAccess(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// accessOr turns a permission or read-only error into ErrAccess with the
// fix; other errors are returned unchanged.
func accessOr(dir string, err error) error {
	if err == nil || !isAccess(err) {
		return err
	}
	return fmt.Errorf("%w: %v. The data is not known to be damaged: give the user ticketd runs as "+
		"read and write access to %s and everything in it (for example chown -R ticketd:ticketd %s), "+
		"or mount its file system read-write, then start again", ErrAccess, err, dir, dir)
}

// checkWritable creates, syncs and removes a file in dir, so that a
// read-only or foreign-owned directory is reported as such before any
// store is opened.
func checkWritable(dir string) error {
	p := filepath.Join(dir, ".ticketd-write-check")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Sync()
		_ = f.Close()
		os.Remove(p)
	}
	if err != nil {
		if isAccess(err) {
			return accessOr(dir, err)
		}
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	for _, name := range []string{"raft.db", memberMarker, clusterFile, incarnationFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err == nil {
			_ = f.Close()
		} else if isAccess(err) {
			return accessOr(dir, err)
		}
	}
	return nil
}

func markerPath(dir string) string { return filepath.Join(dir, memberMarker) }

func hasMarker(dir string) bool {
	_, err := os.Stat(markerPath(dir))
	return err == nil
}

// writeMarker records that this directory holds a member's state.
func writeMarker(dir, id string) error {
	p := markerPath(dir)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "ticketd member %s, data since %s\n", id, time.Now().UTC().Format(time.RFC3339)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// guard turns a panic or a memory fault (a truncated, memory-mapped file)
// in the calling goroutine into an error about path.
func guard(path string, err *error) {
	if r := recover(); r != nil {
		*err = damaged(path, fmt.Errorf("reading it failed: %v", r))
	}
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

// verifyLog reads every entry of the log before Raft does: each must decode,
// sit at its own index, and (for commands) be an intact batch whose checksum
// matches. Raft would otherwise panic on an undecodable entry, or apply a
// damaged one as some other operation.
func verifyLog(path string, s *raftboltdb.BoltStore, snaps raft.SnapshotStore) (err error) {
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
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		first = max(first, list[0].Index+1)
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
			if _, err := fsm.DecodeBatch(l.Data); err != nil {
				return damaged(path, fmt.Errorf("log entry %d: %w", i, err))
			}
		}
	}
	return nil
}

// verifySnapshots checks the newest snapshot before Raft reads it: it must
// open (Raft's checksum) and decode. Raft would otherwise fall back to an
// older snapshot, whose following entries were compacted away, and panic
// with "log not found". It also checks that the log continues where the
// newest snapshot ends.
func verifySnapshots(dir string, s *raftboltdb.BoltStore, snaps *raft.FileSnapshotStore) error {
	snapDir := filepath.Join(dir, "snapshots")
	entries, _ := os.ReadDir(snapDir)
	list, err := snaps.List()
	if err != nil {
		return accessOr(dir, damaged(snapDir, err))
	}
	// Snapshot directories whose metadata does not read are left out of
	// List; a newer one than the newest listed means the newest is damaged.
	// Names are TERM-INDEX-MILLIS; Raft orders by term, then index.
	var newest string
	var nt, ni, nm uint64
	for _, e := range entries {
		var term, index, ms uint64
		if !e.IsDir() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		if n, _ := fmt.Sscanf(e.Name(), "%d-%d-%d", &term, &index, &ms); n != 3 {
			continue
		}
		if newest == "" || term > nt || (term == nt && (index > ni || (index == ni && ms > nm))) {
			newest, nt, ni, nm = e.Name(), term, index, ms
		}
	}
	fix := "Restore this server's state: if its cluster still has a majority, stop this server, run ticketctl members remove on the cluster, " +
		"empty this data directory, start it with --join and run ticketctl members add; otherwise restore from a backup (ticketd --restore) " +
		"or export this directory's log first (see docs/deployment.md, Losing a majority)"
	if newest != "" && (len(list) == 0 || list[0].ID != newest) {
		return fmt.Errorf("%w: %s: snapshot %s has no readable metadata (meta.json); Raft would fall back to an older snapshot that the log no longer continues. %s",
			ErrDamaged, snapDir, newest, fix)
	}
	if len(list) == 0 {
		return nil
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		if isAccess(err) {
			return accessOr(dir, err)
		}
		return fmt.Errorf("%w: snapshot %s: %v. %s", ErrDamaged, filepath.Join(snapDir, list[0].ID), err, fix)
	}
	_, err = fsm.ReadSnapshot(rc)
	_ = rc.Close()
	if err != nil {
		return fmt.Errorf("%w: snapshot %s: %v. %s", ErrDamaged, filepath.Join(snapDir, list[0].ID), err, fix)
	}
	first, err1 := s.FirstIndex()
	last, err2 := s.LastIndex()
	if err1 == nil && err2 == nil && last > meta.Index && first > meta.Index+1 {
		return fmt.Errorf("%w: the newest snapshot ends at entry %d but the Raft log starts at %d: entries are missing. %s",
			ErrDamaged, meta.Index, first, fix)
	}
	return nil
}
