package node

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// testBeforeApply, set only by tests, is called with every batch before a
// server applies it: a test holds one server back there (F7).
var testBeforeApply atomic.Pointer[func(nodeID string, b fsm.Batch)]

// stateMachine adapts fsm.State to raft.FSM.
type stateMachine struct {
	nodeID string
	mu     sync.RWMutex
	state  *fsm.State
	held   atomic.Int64
	mark   func() // records the data directory as a member's (see memberMarker)
	// onCluster is called (outside the lock) when the cluster ID in the
	// state changes: first set, or replaced by a restore.
	onCluster   func(fsm.ClusterID)
	lastCluster fsm.ClusterID
	marked      sync.Once // a joining server's first entry or snapshot

	// Raft counts entries towards a snapshot, but one entry carries up to
	// thousands of operations; these count operations, so that the log a
	// restart replays stays short however the operations were batched.
	snapshotEvery uint64
	opsSince      atomic.Uint64
	snapshotting  atomic.Bool
	snapshotNow   func()
	// incarnation is this data directory's. Once this server applies the
	// admission of its own directory it takes a snapshot (ownAdmission
	// asks for one): after a restart its applied state, the newest
	// snapshot, then holds the admission it states in the handshake
	// (identity.ownAdmission) without waiting for Raft to apply the log.
	incarnation  uint64
	ownAdmission atomic.Bool
	// heldAtSnapshot is the number of tickets the last snapshot (taken or
	// restored) held: a snapshot is due after that many operations, at
	// least snapshotEvery.
	heldAtSnapshot atomic.Uint64
}

func (m *stateMachine) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	m.marked.Do(m.mark)
	b, err := fsm.DecodeBatch(l.Data)
	b.Index = l.Index // recorded with admissions
	if err != nil {
		// A committed entry that does not decode: this replica can no longer
		// follow the log faithfully, so it stops rather than diverge.
		panic(fmt.Sprintf("ticketd: Raft log entry %d is damaged (%v); this server stops to avoid serving a wrong state", l.Index, err))
	}
	if h := testBeforeApply.Load(); h != nil {
		(*h)(m.nodeID, b)
	}
	m.mu.Lock()
	res := m.state.Apply(b)
	m.held.Store(int64(m.state.Len()))
	cluster := m.state.Cluster()
	m.mu.Unlock()
	m.clusterChanged(cluster)
	// At least as many operations as the last snapshot held tickets: a
	// snapshot copies the whole state, so this keeps its cost per operation
	// constant. Counting from the last snapshot rather than from the
	// tickets held now matters while the state grows: against the tickets
	// held now, operations that each add a ticket would never catch up, and
	// a restart would replay every one of them (replaying the log costs
	// several times more per ticket than reading a snapshot).
	limit := max(m.snapshotEvery, m.heldAtSnapshot.Load())
	due := m.snapshotEvery > 0 && m.opsSince.Add(uint64(len(b.Ops))) >= limit
	if m.admitsSelf(b) {
		m.ownAdmission.Store(true)
		due = true
	}
	if due && m.snapshotting.CompareAndSwap(false, true) {
		go m.snapshotNow() // not here: Raft takes the snapshot through this goroutine
	}
	return &Applied{Index: l.Index, Results: res}
}

// admitsSelf: b records this data directory as a participant.
func (m *stateMachine) admitsSelf(b fsm.Batch) bool {
	for _, op := range b.Ops {
		if op.Kind == fsm.OpAdmit && op.NodeID == m.nodeID && op.Incarnation != 0 && op.Incarnation == m.incarnation {
			return true
		}
	}
	return false
}

func (m *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	m.opsSince.Store(0)
	m.mu.RLock()
	c := m.state.Clone()
	m.mu.RUnlock()
	m.heldAtSnapshot.Store(uint64(c.Len()))
	return &snapshot{state: c}, nil
}

func (m *stateMachine) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	m.marked.Do(m.mark)
	snapshotStateReads.Add(1)
	s, err := fsm.ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	m.install(s)
	return nil
}

// startFrom is Restore of a snapshot that startup has already read and
// checked (Raft is then told not to restore it again).
func (m *stateMachine) startFrom(s *fsm.State) {
	m.marked.Do(m.mark)
	m.install(s)
}

// install replaces the state with s, restored from a snapshot.
func (m *stateMachine) install(s *fsm.State) {
	m.mu.Lock()
	m.state = s
	m.held.Store(int64(s.Len()))
	m.mu.Unlock()
	m.heldAtSnapshot.Store(uint64(s.Len()))
	m.clusterChanged(s.Cluster())
}

func (m *stateMachine) clusterChanged(id fsm.ClusterID) {
	if id != m.lastCluster && id != (fsm.ClusterID{}) {
		m.lastCluster = id
		if m.onCluster != nil {
			m.onCluster(id)
		}
	}
}

type snapshot struct{ state *fsm.State }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.state.WriteSnapshot(sink); err != nil {
		_ = sink.Cancel() // the write's error is the one to report
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
