package node

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Learners before voters.
//
// members add makes a server a learner first (a Raft non-voter): it
// receives the log and the snapshots but counts towards no majority. The
// leader promotes it to voter once it has caught up. A voter that has
// received nothing would count towards every majority while it cannot take
// part in one (a server that holds the cluster's state refuses an empty
// member as a lost disk): a three-server cluster grown to four that way
// loses its majority when its leader fails before the new server catches
// up. A learner never changes the majority, so nothing a learner does or
// fails to do costs the cluster its availability.
//
// Caught up means: acknowledged, in the leader's current term, a log that
// reaches the commit index the leader had at its previous check (at most
// promoteCheck earlier), with its last acknowledgement no older than the
// election timeout. It then holds the cluster's identity and everything
// committed a moment ago, and answers as a voter must. The leader checks
// every learner of the configuration, not only those it added itself: a
// join interrupted by a leader change is resumed by the next leader, which
// takes the learner's empty data directory back (the incarnation recorded
// when it was added) and promotes it once it has caught up.

// promoteCheck is how often a leader with learners checks their progress.
const promoteCheck = 250 * time.Millisecond

// replicaAck is what the leader last heard from one server: the highest
// log index it acknowledged as matching the leader's log, in term, and when.
type replicaAck struct {
	term  uint64
	match uint64
	at    time.Time
}

// replication records the acknowledgements of this server's followers and
// learners while it leads, and the learners it promoted. Raft keeps each
// follower's match index to itself; the transport sees every successful
// AppendEntries and InstallSnapshot, which is the same information.
type replication struct {
	mu   sync.Mutex
	acks map[raft.ServerID]replicaAck
	// epochs: bumped when a server id is added or removed, so that an
	// answer to a request sent to an earlier member under that id (one
	// removed since) never counts for the new one.
	epochs   map[raft.ServerID]uint64
	promoted map[string]uint64 // learner id -> index of the configuration that made it a voter
	// promoting: the learner whose promotion this leader has proposed and
	// not yet seen committed ("" when none).
	promoting string
	changed   chan struct{} // closed (and replaced) when a promotion ends
	wake      chan struct{} // a check is wanted now (leadership gained, learner added)
}

func newReplication() *replication {
	return &replication{acks: map[raft.ServerID]replicaAck{}, epochs: map[raft.ServerID]uint64{}, promoted: map[string]uint64{},
		changed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// epoch is id's epoch now: taken before a request is sent, passed to
// acked with its answer.
func (p *replication) epoch(id raft.ServerID) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epochs[id]
}

// reset forgets everything about id: it is being added anew, or removed.
func (p *replication) reset(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epochs[raft.ServerID(id)]++
	delete(p.acks, raft.ServerID(id))
	delete(p.promoted, id)
}

// acked records that id's log matches the leader's up to match (in term),
// answering a request sent in epoch.
func (p *replication) acked(id raft.ServerID, epoch, term, match uint64) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epochs[id] != epoch {
		return // sent to a member removed since
	}
	a := p.acks[id]
	switch {
	case term > a.term:
		a = replicaAck{term: term, match: match, at: now}
	case term == a.term:
		a.match, a.at = max(a.match, match), now
	default:
		return // an answer to a request of an earlier leadership
	}
	p.acks[id] = a
}

// ack returns what id last acknowledged in term (zero if nothing).
func (p *replication) ack(id raft.ServerID, term uint64) replicaAck {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.acks[id]; a.term == term {
		return a
	}
	return replicaAck{}
}

// caughtUp: id acknowledged, in term, a log reaching target, within the
// last recent.
func (p *replication) caughtUp(id raft.ServerID, term, target uint64, recent time.Duration) bool {
	a := p.ack(id, term)
	return a.term == term && a.match >= target && time.Since(a.at) <= recent
}

// heardFrom: id acknowledged anything in term within the last recent.
func (p *replication) heardFrom(id raft.ServerID, term uint64, recent time.Duration) bool {
	a := p.ack(id, term)
	return a.term == term && time.Since(a.at) <= recent
}

func (p *replication) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *replication) startPromotion(id string) {
	p.mu.Lock()
	p.promoting = id
	p.mu.Unlock()
}

// endPromotion records how a promotion ended: at index, or failed (0).
func (p *replication) endPromotion(id string, index uint64) {
	p.mu.Lock()
	if index != 0 {
		p.promoted[id] = index
	}
	p.promoting = ""
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// promotion returns the index at which this leader promoted id (0: it did
// not), whether its promotion is under way, and a channel closed when a
// promotion ends.
func (p *replication) promotion(id string) (uint64, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.promoted[id], p.promoting == id, p.changed
}

// ackingTransport is Raft's transport with every successful replication
// answer recorded (replication.acked). Raft's pipelined replication is
// off (openTransport), so every AppendEntries passes through here.
type ackingTransport struct {
	*voteGate
	rep *replication
}

func (t ackingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	epoch := t.rep.epoch(id)
	err := t.voteGate.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success {
		// A heartbeat (no previous entry, no entries) proves only that the
		// server answers: match 0 never lowers what was recorded.
		t.rep.acked(id, epoch, args.Term, args.PrevLogEntry+uint64(len(args.Entries)))
	}
	return err
}

func (t ackingTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	epoch := t.rep.epoch(id)
	err := t.voteGate.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.rep.acked(id, epoch, args.Term, args.LastLogIndex)
	}
	return err
}

// Progress is what this leader last heard from member id in its term: the
// log index it acknowledged, and whether that was within the election
// timeout. ok is false when this server does not lead.
func (n *Node) Progress(id string) (match uint64, reachable, ok bool) {
	if n.raft.State() != raft.Leader {
		return 0, false, false
	}
	term := n.raft.CurrentTerm()
	a := n.rep.ack(raft.ServerID(id), term)
	return a.match, n.rep.heardFrom(raft.ServerID(id), term, n.raft.ReloadableConfig().ElectionTimeout), true
}

// resumesJoin (leader only): p is the empty data directory of a learner of
// the configuration, the very directory (incarnation) recorded when
// members add admitted it. The leader that added it failed before it caught
// up; this leader takes over the join. A learner counts towards no
// majority, so taking back its empty directory loses nothing the cluster
// counted on; it becomes a voter only once it has caught up.
func (m *identity) resumesJoin(p peerInfo) bool {
	if p.State != stateEmpty || p.Incarnation == 0 || !m.participant(p.ID) || m.incarnationOf(p.ID) != p.Incarnation {
		return false
	}
	f := m.r.Load().GetConfiguration()
	if f.Error() != nil {
		return false
	}
	s, ok := findServer(f.Configuration(), p.ID)
	if !ok || s.Suffrage == raft.Voter {
		return false
	}
	m.mu.Lock()
	m.admitting[p.ID] = p.Incarnation
	m.mu.Unlock()
	m.log.Info("resuming the addition of a learner whose join an earlier leader began", "node", p.ID)
	return true
}
