package node

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// ExportInfo describes a backup read out of a data directory.
type ExportInfo struct {
	Cluster   fsm.ClusterID
	LastIndex uint64 // the last Raft entry included
	LastToken uint64
	Held      int
}

// Export reads the state of a stopped server's data directory (its newest
// snapshot followed by every entry of its log) and writes it to w in the
// backup format that RestoreState and ticketd --restore take. It is the way
// out when a cluster has lost its majority for good: the survivors' data
// directories are the only copies left.
//
// Entries at the end of the log may never have been committed; they are
// included, so that the export holds every grant this server knew of.
// Grants the lost servers committed without this one are not in it: the
// restore's token floor keeps their tokens from being granted again.
func Export(dir string, w io.Writer) (info ExportInfo, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	dbPath := logStorePath(dir)
	if st, err := os.Stat(dbPath); err != nil || st.Size() == 0 {
		return info, fmt.Errorf("%s holds no Raft log: is %s the data directory's raft subdirectory of a server that has run?", dbPath, dir)
	}
	snaps, newest, err := openSnapshots(dir, 1, hclog.NewNullLogger())
	if err != nil {
		return info, err
	}
	store, err := openLogStore(dir, snapshotIndex(newest))
	if err != nil {
		return info, err
	}
	defer func() { _ = store.Close() }()
	if err := checkLogFollowsSnapshot(store, newest); err != nil {
		return info, err
	}
	st, last, err := replayLocal(dbPath, store, snaps)
	if err != nil {
		return info, err
	}
	info.LastIndex = last
	if err := st.WriteSnapshot(w); err != nil {
		return info, err
	}
	info.Cluster, info.LastToken, info.Held = st.Cluster(), st.LastToken(), st.Len()
	return info, nil
}

// replayLocal rebuilds the state this data directory holds: the newest
// snapshot, then every entry of the log after it, committed or not. It
// returns the state and the last entry's index.
func replayLocal(dbPath string, store raft.LogStore, snaps raft.SnapshotStore) (st *fsm.State, lastIndex uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer guard(dbPath, &err)
	st = fsm.New()
	var from uint64 = 1
	if list, _ := snaps.List(); len(list) > 0 {
		_, rc, err := snaps.Open(list[0].ID)
		if err != nil {
			return nil, 0, err
		}
		st, err = fsm.ReadSnapshot(rc)
		_ = rc.Close()
		if err != nil {
			return nil, 0, err
		}
		from = list[0].Index + 1
		lastIndex = list[0].Index
	}
	first, err := store.FirstIndex()
	if err != nil {
		return nil, 0, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, 0, err
	}
	from = max(from, first)
	var l raft.Log
	for i := from; i <= last && last > 0; i++ {
		if err := store.GetLog(i, &l); err != nil {
			return nil, 0, damaged(dbPath, fmt.Errorf("log entry %d: %w", i, err))
		}
		lastIndex = i
		if l.Type != raft.LogCommand {
			continue
		}
		b, err := fsm.DecodeBatch(l.Data)
		if err != nil {
			return nil, 0, damaged(dbPath, fmt.Errorf("log entry %d: %w", i, err))
		}
		st.Apply(b)
	}
	return st, lastIndex, nil
}
