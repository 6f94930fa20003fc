package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// openSnapshots opens the snapshot store in dir (keeping retain snapshots)
// and checks its newest snapshot, which it returns (nil when there is none).
func openSnapshots(dir string, retain int, logger hclog.Logger) (*raft.FileSnapshotStore, *raft.SnapshotMeta, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, logger)
	if err != nil {
		return nil, nil, accessOr(dir, fmt.Errorf("open snapshot store: %w", err))
	}
	newest, err := verifySnapshots(dir, snaps)
	if err != nil {
		return nil, nil, err
	}
	return snaps, newest, nil
}

// snapshotIndex is the last entry a snapshot holds; 0 for none.
func snapshotIndex(meta *raft.SnapshotMeta) uint64 {
	if meta == nil {
		return 0
	}
	return meta.Index
}

// snapshotFix is the operator's way out of a damaged snapshot.
const snapshotFix = "Restore this server's state: if its cluster still has a majority, stop this server, run ticketctl members remove on the cluster, " +
	"empty this data directory, start it with --join and run ticketctl members add; otherwise restore from a backup (ticketd --restore) " +
	"or export this directory's log first (see docs/deployment.md, Losing a majority)"

// verifySnapshots checks the newest snapshot before Raft reads it: it must
// open (Raft's checksum) and decode. Raft would otherwise fall back to an
// older snapshot, whose following entries were compacted away, and panic
// with "log not found". It returns the newest snapshot's metadata (nil when
// there is none).
func verifySnapshots(dir string, snaps *raft.FileSnapshotStore) (*raft.SnapshotMeta, error) {
	snapDir := filepath.Join(dir, "snapshots")
	entries, _ := os.ReadDir(snapDir)
	list, err := snaps.List()
	if err != nil {
		return nil, accessOr(dir, damaged(snapDir, err))
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
	if newest != "" && (len(list) == 0 || list[0].ID != newest) {
		return nil, fmt.Errorf("%w: %s: snapshot %s has no readable metadata (meta.json); Raft would fall back to an older snapshot that the log no longer continues. %s",
			ErrDamaged, snapDir, newest, snapshotFix)
	}
	if len(list) == 0 {
		return nil, nil
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		if isAccess(err) {
			return nil, accessOr(dir, err)
		}
		return nil, fmt.Errorf("%w: snapshot %s: %v. %s", ErrDamaged, filepath.Join(snapDir, list[0].ID), err, snapshotFix)
	}
	_, err = fsm.ReadSnapshot(rc)
	_ = rc.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot %s: %v. %s", ErrDamaged, filepath.Join(snapDir, list[0].ID), err, snapshotFix)
	}
	return meta, nil
}

// checkLogFollowsSnapshot checks that the log continues where the newest
// snapshot (nil when there is none) ends.
func checkLogFollowsSnapshot(s raft.LogStore, newest *raft.SnapshotMeta) error {
	if newest == nil {
		return nil
	}
	first, err1 := s.FirstIndex()
	last, err2 := s.LastIndex()
	if err1 == nil && err2 == nil && last > newest.Index && first > newest.Index+1 {
		return fmt.Errorf("%w: the newest snapshot ends at entry %d but the Raft log starts at %d: entries are missing. %s",
			ErrDamaged, newest.Index, first, snapshotFix)
	}
	return nil
}
