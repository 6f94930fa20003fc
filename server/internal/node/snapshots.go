package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// snapshotState is the newest snapshot of a data directory, checked and
// decoded: the state Raft starts from.
type snapshotState struct {
	meta  *raft.SnapshotMeta // nil when there is no snapshot
	state *fsm.State         // nil when there is no snapshot
}

// openSnapshots opens the snapshot store in dir (keeping retain snapshots)
// and reads its newest snapshot, checked, once: its state is the one Raft
// starts from (Open seeds the state machine with it instead of letting Raft
// read the snapshot again).
func openSnapshots(dir string, retain int, logger hclog.Logger) (*raft.FileSnapshotStore, snapshotState, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, logger)
	if err != nil {
		return nil, snapshotState{}, accessOr(dir, fmt.Errorf("open snapshot store: %w", err))
	}
	newest, err := readNewestSnapshot(dir, snaps)
	if err != nil {
		return nil, snapshotState{}, err
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

// readNewestSnapshot reads the newest snapshot before Raft would: it must
// pass Raft's checksum and decode (with the state's own checksum). Raft
// would otherwise fall back to an older snapshot, whose following entries
// were compacted away, and panic with "log not found".
func readNewestSnapshot(dir string, snaps *raft.FileSnapshotStore) (snapshotState, error) {
	snapDir := filepath.Join(dir, "snapshots")
	entries, _ := os.ReadDir(snapDir)
	list, err := snaps.List()
	if err != nil {
		return snapshotState{}, accessOr(dir, damaged(snapDir, err))
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
		return snapshotState{}, fmt.Errorf("%w: %s: snapshot %s has no readable metadata (meta.json); Raft would fall back to an older snapshot that the log no longer continues. %s",
			ErrDamaged, snapDir, newest, snapshotFix)
	}
	if len(list) == 0 {
		return snapshotState{}, nil
	}
	st, err := readSnapshot(filepath.Join(snapDir, list[0].ID))
	if err != nil {
		if isAccess(err) {
			return snapshotState{}, accessOr(dir, err)
		}
		return snapshotState{}, fmt.Errorf("%w: snapshot %s: %v. %s", ErrDamaged, filepath.Join(snapDir, list[0].ID), err, snapshotFix)
	}
	return snapshotState{meta: list[0], state: st}, nil
}

// snapshotStateReads counts reads of a snapshot's state file by startup and
// by Restore, so that a test sees a restart read the snapshot once.
var snapshotStateReads atomic.Int64

// errSnapshotCRC is a snapshot whose state file does not match the CRC-64
// that Raft recorded in its metadata (Raft's own words for it).
var errSnapshotCRC = errors.New("CRC mismatch")

// readSnapshot decodes the snapshot in the directory path of Raft's file
// snapshot store in one read of its state file. Both checksums are
// verified, as Raft's Open and fsm.ReadSnapshot would one after the other:
// the CRC-64 (ECMA) of the file that Raft keeps in meta.json is computed as
// the state is decoded, and a state that decodes but whose file does not
// match it is refused all the same.
func readSnapshot(path string) (*fsm.State, error) {
	snapshotStateReads.Add(1)
	raw, err := os.ReadFile(filepath.Join(path, "meta.json"))
	if err != nil {
		return nil, err
	}
	var meta struct{ CRC []byte } // the field of Raft's fileSnapshotMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(path, "meta.json"), err)
	}
	f, err := os.Open(filepath.Join(path, "state.bin"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sum := crc64.New(crc64.MakeTable(crc64.ECMA))
	st, decodeErr := fsm.ReadSnapshot(io.TeeReader(f, sum))
	if _, err := io.Copy(sum, f); err != nil { // what decoding left unread
		return nil, err
	}
	if !bytes.Equal(sum.Sum(nil), meta.CRC) {
		return nil, errSnapshotCRC
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	return st, nil
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
