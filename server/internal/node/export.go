package node

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"github.com/ticketing-io/ticketing/server/internal/fsm"

	"github.com/ticketing-io/ticketing/server/internal/logstore"
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
	if !logstore.Exists(dbPath) && !logstore.Pending(dir) {
		return info, fmt.Errorf("%s holds no Raft log: is %s the data directory's raft subdirectory of a server that has run?", dir, dir)
	}
	_, newest, err := openSnapshots(dir, 1, hclog.NewNullLogger())
	if err != nil {
		return info, err
	}
	// The newest snapshot, then every entry of the log after it, committed
	// or not, applied as the log store's check reads them.
	st := newest.state
	if st == nil {
		st = fsm.New()
	}
	store, err := openLogStore(dir, snapshotIndex(newest.meta), slog.New(slog.DiscardHandler), func(b fsm.Batch) { st.Apply(b) })
	if err != nil {
		return info, err
	}
	defer func() { _ = store.Close() }()
	if err := checkLogFollowsSnapshot(store, newest.meta); err != nil {
		return info, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return info, damaged(dbPath, err)
	}
	last = max(last, snapshotIndex(newest.meta))
	info.LastIndex = last
	if err := st.WriteSnapshot(w); err != nil {
		return info, err
	}
	info.Cluster, info.LastToken, info.Held = st.Cluster(), st.LastToken(), st.Len()
	return info, nil
}
