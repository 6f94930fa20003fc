package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// OpenSnapshot takes a snapshot now (or, when nothing changed since the last
// one, uses that) and opens it for reading: the bytes are the state machine's
// snapshot format, which RestoreFrom accepts.
func (n *Node) OpenSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	f := n.raft.Snapshot()
	if err := f.Error(); err == nil {
		return f.Open()
	} else if !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, nil, fmt.Errorf("take snapshot: %w", err)
	}
	list, err := n.snaps.List()
	if err != nil || len(list) == 0 {
		return nil, nil, fmt.Errorf("no snapshot to open: %v", err)
	}
	return n.snaps.Open(list[0].ID)
}

// RestoreState replaces the whole state with a backup's (already read and
// checked with fsm.ReadSnapshot) as a new cluster: a new cluster ID, and a
// token floor above every token the old cluster may have granted. It must
// run on the leader of a new single-node cluster opened with Restoring; the
// state is then replicated as a snapshot. minToken, when not zero, replaces
// the time-based floor: tokens resume above max(minToken, the backup's last
// token). It returns the token after which grants resume.
func (n *Node) RestoreState(st *fsm.State, minToken uint64) (uint64, error) {
	backupLast := st.LastToken()
	floor := RestoreTokenFloor(backupLast, st.LastTime(), time.Now().UnixMilli())
	if minToken > 0 {
		floor = max(minToken, backupLast)
	}
	st.RaiseTokenFloor(floor)
	st.SetCluster(NewClusterID())
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: n.cfg.ID, Incarnation: n.id.incarnation}}}
	st.Apply(b)
	n.cfg.Logger.Info("restoring backup", "held", st.Len(), "backup_last_token", backupLast, "tokens_resume_above", floor,
		"cluster", FormatClusterID(st.Cluster()))
	var buf bytes.Buffer
	if err := st.WriteSnapshot(&buf); err != nil {
		return 0, err
	}
	data := buf.Bytes()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(data))}
	if err := n.raft.Restore(meta, bytes.NewReader(data), 0); err != nil {
		return 0, err
	}
	return floor, nil
}

// RestoreTokenRate bounds how many tokens per millisecond a cluster can
// grant: far above what one cluster does (at most about 30 per ms in the
// measurements of docs/benchmarks.md). A restore skips RestoreTokenRate tokens for every millisecond between the
// backup's last entry and the restore, plus one day's worth as a margin for
// clock differences, so no token granted after the backup is granted again.
const RestoreTokenRate = 1000

// RestoreTokenFloor is the token after which a restored cluster resumes.
func RestoreTokenFloor(lastToken uint64, lastTimeMs, nowMs int64) uint64 {
	const dayMs = 24 * 60 * 60 * 1000
	gap := max(nowMs-lastTimeMs, 0) + dayMs
	return lastToken + uint64(gap)*RestoreTokenRate
}
