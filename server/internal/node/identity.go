package node

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Cluster identity.
//
// Every cluster has an ID (16 random bytes): set by the first leader of a
// new cluster, replaced by every restore. It lives in the replicated state
// (so it is in snapshots and reaches servers that join) and in the CLUSTER
// file of each member's data directory. Every Raft connection starts with a
// handshake in which both ends state their node id, their cluster ID and
// whether their data directory is empty; a server refuses a peer of another
// cluster, and a server that holds the cluster's state refuses a peer that
// should hold it but does not (a member that lost its data directory).
//
// A server is in one of three states:
//   - empty: no Raft state; it waits until a leader adds it;
//   - provisional: Raft state but no cluster ID yet (a new cluster before its
//     first leader set the ID, or a data directory from before cluster IDs);
//   - settled: it knows its cluster's ID.
//
// Only a settled server decides about empty or provisional peers, and only
// a leader admits one: it first commits OpAdmit for it (the peer is then a
// participant), so that if that peer later shows up empty again the cluster
// knows it has lost data the cluster counted on. An empty server deals only
// with settled peers and never votes (voteGate); a node id that is neither
// in the configuration nor a participant is refused; a provisional server
// that met a settled member never sets an ID. docs/design.md ("Cluster
// identity: the protocol") has the state machine and why it is safe.
//
// Every data directory also has an incarnation: a random number created
// with its Raft state (the INCARNATION file), stated in the handshake and
// recorded with each participant. A provisional participant with the
// recorded incarnation is the same directory, lagging behind: it took part
// before the first leader set the ID and has not applied that entry yet (a
// young cluster whose first leader failed, F7). It is accepted and catches
// up through Raft. A different incarnation is a directory that lost its
// data and started again: refused.
//
// A settled peer whose incarnation is not the one recorded for its node id
// is either the directory from before that id was removed and added back
// (refused: it lacks what was committed since), or the directory that
// replaced it, met by a server that has not read the re-admission yet (a
// server that was down, or catches up by replaying the log or from an
// older snapshot; often that peer is its leader, and refusing it keeps the
// server behind for as long as it leads). The order of the admissions
// tells them apart: each record keeps the log index of its entry, and
// every server states in the handshake (version 4) the index of its own
// admission in its applied state. Applied entries are committed, and
// committed entries form one history in which the old directory's
// admission comes before its removal, which comes before the re-admission:
// a peer admitted after the record this server holds is newer than that
// record, one admitted at or before it is the old directory. An index of 0
// (not applied yet, or recorded by an earlier version) proves nothing and
// the peer is refused as before; it tries again at its next connection. A
// server snapshots once it has applied its own admission (statemachine.go),
// so a restart does not take the index away until Raft applies the log.

// identity is this server's side of the handshake.
type identity struct {
	nodeID      string
	dir         string
	log         *slog.Logger
	incarnation uint64 // of this data directory (INCARNATION)
	release     string // this ticketd's version, stated in the handshake

	// Set once Raft runs (the handshake needs the leader state, the
	// configuration and the participants).
	r   atomic.Pointer[raft.Raft]
	fsm *stateMachine

	mu        sync.Mutex
	cluster   fsm.ClusterID
	hasState  bool
	settling  bool              // a new leader is committing the cluster ID
	admitting map[string]uint64 // peers this leader admitted (their incarnations), accepted until they settle
	seen      map[string]uint64 // peers met while provisional (participants of the new cluster): their incarnations
	// settledPeer is a member of the configuration met with a cluster ID
	// while this server had none: this server then never sets one.
	settledPeer    string
	settledCluster fsm.ClusterID
	known          map[string]fsm.Admission // participants in this directory's log at start (applied or not): their records
	knownUpTo      uint64                   // the last index of that log
	conns          map[*hsConn]fsm.ClusterID
	logged         map[string]time.Time // refusal messages, at most one per peer and reason a minute
	// releases are the peers' ticketd versions, as their last accepted
	// handshake stated them ("" from a handshake older than version 4).
	releases map[string]string
	// floodLogged: when the line saying that refusals went unlogged was logged.
	floodLogged time.Time
}

func (m *identity) self() peerInfo {
	m.mu.Lock()
	me := m.selfLocked()
	m.mu.Unlock()
	me.Admitted = m.ownAdmission()
	return me
}

// ownAdmission is the log index of the admission that recorded this data
// directory's incarnation for this node id, in the applied state (entries
// committed, so in the one history every member shares), or 0 if the
// applied state has none yet. After a restart the applied state is the
// newest snapshot, taken once that admission was applied (statemachine.go).
func (m *identity) ownAdmission() uint64 {
	if m.fsm == nil {
		return 0
	}
	m.fsm.mu.RLock()
	a := m.fsm.state.AdmissionOf(m.nodeID)
	m.fsm.mu.RUnlock()
	if a.Incarnation == 0 || a.Incarnation != m.incarnation {
		return 0
	}
	return a.Index
}

func (m *identity) selfLocked() peerInfo {
	st := byte(stateEmpty)
	switch {
	case m.cluster != (fsm.ClusterID{}):
		st = stateSettled
	case m.hasState:
		st = stateProvisional
	}
	return peerInfo{ID: m.nodeID, Cluster: m.cluster, State: st, Incarnation: m.incarnation, Release: m.release}
}

// metRelease records the release a peer stated in a handshake that passed
// the checks: at most maxTracked peers (anyone who proves the cluster's
// credentials may name itself), the latest kept.
func (m *identity) metRelease(p peerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.releases[p.ID]; ok || len(m.releases) < maxTracked {
		m.releases[p.ID] = p.Release
	}
}

// PeerRelease is the ticketd version member id stated in its last Raft
// handshake with this server; known is false when none was accepted since
// this server started, and release is "" when the peer's handshake is
// older than the one that states it.
func (n *Node) PeerRelease(id string) (release string, known bool) {
	n.id.mu.Lock()
	defer n.id.mu.Unlock()
	release, known = n.id.releases[id]
	return release, known
}

// Cluster returns the ID this server knows (zero if none).
func (m *identity) Cluster() fsm.ClusterID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cluster
}

// settle records a new cluster ID (applied from the log or a snapshot) and
// writes the CLUSTER file.
func (m *identity) settle(id fsm.ClusterID) {
	m.mu.Lock()
	if id == m.cluster || id == (fsm.ClusterID{}) {
		m.mu.Unlock()
		return
	}
	old := m.cluster
	m.cluster, m.hasState, m.settling = id, true, false
	if old != (fsm.ClusterID{}) {
		clear(m.known) // a restore: the old cluster's participants are not this one's
	}
	// A new ID replacing another (a restore) ends every connection made
	// under the old one. The first ID of a new cluster does not: those
	// connections are with the servers that formed it, and ending them
	// would cost the new cluster an election.
	var stale []*hsConn
	for c, cid := range m.conns {
		if old != (fsm.ClusterID{}) && cid != id {
			stale = append(stale, c)
		}
	}
	m.mu.Unlock()
	if err := writeClusterFile(m.dir, id); err != nil {
		// The ID is in the replicated state; the file is what a restart
		// checks first. Without it this server would start provisional and
		// be refused by its cluster, so stop rather than run half-identified.
		panic(fmt.Sprintf("ticketd: cannot write %s: %v", clusterPath(m.dir), err))
	}
	if old == (fsm.ClusterID{}) {
		m.log.Info("cluster ID set", "cluster", FormatClusterID(id))
	} else {
		m.log.Warn("cluster ID replaced (restore)", "cluster", FormatClusterID(id), "previous", FormatClusterID(old))
	}
	for _, c := range stale {
		_ = c.Close()
	}
}

// check decides whether a handshaked connection may carry Raft traffic.
// dialed is the address dialled (empty on the accepting side). It returns
// the refusal reason, or "" to accept. The rules are the identity protocol
// of docs/design.md: an empty data directory deals only with a settled
// cluster, whose leader admits it; an unknown node id is refused; a server
// without a cluster ID never founds a second history beside a settled one.
func (m *identity) check(p peerInfo, dialed string) string {
	me := m.self()
	if p.ID == me.ID {
		return fmt.Sprintf("the peer at %s also has node_id %q: every server needs its own node_id", dialed, p.ID)
	}
	if dialed != "" && m.r.Load() != nil {
		if want := m.configIDAt(dialed); want != "" && want != p.ID {
			return fmt.Sprintf("this cluster's configuration has %s at %s, but the server there is %s: fix the address (ticketctl members remove %s, then members add with the right address) or the server's node_id", want, dialed, p.ID, want)
		}
	}
	if me.State == stateEmpty {
		// Nothing here to lose, nothing to vouch for: this server takes
		// part only in a cluster that has an identity, and only once that
		// cluster's leader admits it (the leader's end of this handshake
		// checks the incarnation). A peer without a cluster ID could use
		// it to found a second history.
		if p.State != stateSettled {
			return fmt.Sprintf("this server's data directory is empty: it takes part only in a cluster with an ID, once its leader admits it, and %s is %s", p.ID, stateName(p.State))
		}
		return ""
	}
	if me.State == stateSettled && p.State == stateSettled && p.Cluster != me.Cluster {
		return fmt.Sprintf("%s belongs to cluster %s, this server to cluster %s: they hold different histories and must not be mixed. "+
			"If %s should be a member here, stop it, empty its data directory, start it with --join and run ticketctl members add %s RAFTADDR on this cluster (after ticketctl members remove %s if it is listed)",
			p.ID, FormatClusterID(p.Cluster), FormatClusterID(me.Cluster), p.ID, p.ID, p.ID)
	}
	if m.r.Load() == nil {
		return "this server is starting; try again in a moment"
	}
	if !m.member(p.ID) {
		// Participants come only from the bootstrap list and members add,
		// never from a handshake: anyone who reaches the Raft port can
		// make up a node id.
		return fmt.Sprintf("%s is not a member of this cluster (neither in its configuration nor being added): add it with ticketctl members add %s RAFTADDR", p.ID, p.ID)
	}
	if me.State != stateSettled {
		if p.State == stateSettled {
			// A server of this configuration already belongs to a cluster:
			// this server catches up from it or is refused by it, and
			// never sets an ID of its own.
			m.metSettled(p)
			if m.isLeader() {
				return fmt.Sprintf("this server leads a cluster without an ID yet, and %s belongs to cluster %s", p.ID, FormatClusterID(p.Cluster))
			}
			return "" // the settled end decides
		}
		// Provisional peers of one bootstrap list form a new cluster together.
		m.mu.Lock()
		_, met := m.seen[p.ID]
		if me.State == stateProvisional && m.settling && m.seen != nil && !met {
			m.mu.Unlock()
			return "this cluster's first leader is setting the cluster ID; try again in a moment"
		}
		if m.seen != nil && (met || len(m.seen) < maxTracked) {
			m.seen[p.ID] = p.Incarnation
		}
		m.mu.Unlock()
		return ""
	}
	if p.State == stateSettled {
		if rec := m.recordOf(p.ID); rec.Incarnation != 0 && p.Incarnation != 0 && rec.Incarnation != p.Incarnation && !newerAdmission(p, rec) {
			// The cluster recorded another data directory for this node id:
			// the id was removed and added back, and this is a directory
			// from before (put back, or a server never stopped). It lacks
			// what the cluster committed since, and its vote could elect a
			// leader without it.
			return fmt.Sprintf("%s shows data directory incarnation %016x, but cluster %s recorded %016x for %s: it is an older data directory of a node id that was removed and added back, a lost disk that must not vote or count towards a majority. "+
				"Stop it and never start that directory again. To bring %s back: ticketctl members remove %s; empty its data directory and start it with --join; ticketctl members add %s RAFTADDR",
				p.ID, p.Incarnation, FormatClusterID(me.Cluster), rec.Incarnation, p.ID, p.ID, p.ID, p.ID)
		}
		m.mu.Lock()
		delete(m.admitting, p.ID) // caught up: from now on it is an ordinary member
		m.mu.Unlock()
		if m.isLeader() && !m.participant(p.ID) {
			go func() { // a voter of the configuration from before participants were recorded
				// On failure the next handshake of that peer tries again.
				if err := m.admit(p.ID, p.Incarnation); err != nil {
					m.log.Warn("recording a participant failed; retried at its next handshake", "node", p.ID, "err", err)
				}
			}()
		}
		return ""
	}
	// An empty or provisional peer: accepted only by the leader admitting
	// that very data directory (same incarnation), or as a participant's
	// own directory that has not applied the cluster ID yet.
	m.mu.Lock()
	inc, admitting := m.admitting[p.ID]
	m.mu.Unlock()
	if admitting && inc == p.Incarnation && m.isLeader() {
		return ""
	}
	if m.isLeader() && m.resumesJoin(p) {
		return "" // a learner whose members add a leader change interrupted (learners.go)
	}
	if m.participant(p.ID) {
		if rec := m.incarnationOf(p.ID); p.State == stateProvisional && rec != 0 && rec == p.Incarnation {
			// The same data directory that took part, without the cluster
			// ID yet: it has not applied the entry that set it (F7). It
			// holds what it acknowledged and catches up through Raft.
			return ""
		}
		return fmt.Sprintf("%s has been a member of cluster %s but its data directory is now %s: it has lost data the cluster counted on and must not vote or count towards a majority. "+
			"Remove it and add it back empty: ticketctl members remove %s; start it with an empty data directory and --join; ticketctl members add %s RAFTADDR",
			p.ID, FormatClusterID(me.Cluster), stateName(p.State), p.ID, p.ID)
	}
	if dialed != "" && m.isLeader() {
		// A voter of this cluster's configuration that has never been
		// connected (started after the cluster formed): admit it, durably,
		// before it receives anything.
		if err := m.admit(p.ID, p.Incarnation); err != nil {
			return fmt.Sprintf("could not record %s as a participant: %v", p.ID, err)
		}
		return ""
	}
	return fmt.Sprintf("%s is %s and only the leader of cluster %s admits it", p.ID, stateName(p.State), FormatClusterID(me.Cluster))
}

// metSettled records that a server of this configuration holds a cluster
// ID while this one has none: from then on this server never sets an ID.
func (m *identity) metSettled(p peerInfo) {
	m.mu.Lock()
	first := m.settledPeer == ""
	if first {
		m.settledPeer, m.settledCluster = p.ID, p.Cluster
	}
	m.mu.Unlock()
	if first {
		m.log.Warn("a member of this cluster's configuration already holds a cluster ID: this server catches up from it and will not set an ID of its own",
			"peer", p.ID, "cluster", FormatClusterID(p.Cluster))
	}
}

// member reports whether id is in the Raft configuration, a participant,
// being admitted by this leader, or the leader this server follows.
func (m *identity) member(id string) bool {
	m.mu.Lock()
	_, adm := m.admitting[id]
	m.mu.Unlock()
	if adm || m.participant(id) {
		return true
	}
	r := m.r.Load()
	if r == nil {
		return false
	}
	if _, leader := r.LeaderWithID(); string(leader) == id {
		// The leader this server follows (it spoke over a connection of a
		// member): this server may be behind the entries that made it a
		// member, as after installing an older snapshot when it joined.
		return true
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// mayVote says why this server must not grant votes, or "" if it may: an
// empty data directory has nothing to vouch for (it may have lost what it
// acknowledged), so it never votes.
func (m *identity) mayVote() string {
	if m.self().State == stateEmpty {
		return "this server's data directory is empty (waiting to be added): it does not vote"
	}
	return ""
}

func (m *identity) isLeader() bool { r := m.r.Load(); return r != nil && r.State() == raft.Leader }

func (m *identity) participant(id string) bool {
	m.mu.Lock()
	_, k := m.known[id]
	m.mu.Unlock()
	if k || m.fsm == nil {
		return k
	}
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.state.Admitted(id)
}

// incarnationOf returns the incarnation recorded with participant id; 0 if
// none.
func (m *identity) incarnationOf(id string) uint64 { return m.recordOf(id).Incarnation }

// recordOf returns participant id's record as this server knows it (zero
// if none). Until Raft has applied the whole log this directory held at
// start, the log is newer than the applied state (the newest snapshot, at
// first): a member removed and added back since has its new record there.
func (m *identity) recordOf(id string) fsm.Admission {
	m.mu.Lock()
	rec := m.known[id]
	upTo := m.knownUpTo
	m.mu.Unlock()
	if r := m.r.Load(); upTo > 0 && (r == nil || r.AppliedIndex() < upTo) {
		return rec
	}
	if m.fsm != nil {
		m.fsm.mu.RLock()
		ok, applied := m.fsm.state.Admitted(id), m.fsm.state.AdmissionOf(id)
		m.fsm.mu.RUnlock()
		if ok {
			return applied
		}
	}
	return rec
}

// newerAdmission: settled peer p, whose incarnation is not the one this
// server recorded for its node id (rec), was admitted after that record,
// so this server is behind: it has not applied the entry that re-added p
// yet (a server catching up, from an older snapshot or by replaying the
// log). p then holds that entry and everything before it, and this server
// catches up from it. A directory from before a re-add was admitted before
// the record of the directory that replaced it, so it is still refused.
// Both indexes are of committed entries of the one history (p states its
// own from its applied state); an unknown index (0) proves nothing.
func newerAdmission(p peerInfo, rec fsm.Admission) bool {
	return rec.Index != 0 && p.Admitted > rec.Index
}

func (m *identity) configIDAt(addr string) string {
	f := m.r.Load().GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}

// admit commits OpAdmit for id (leader only), with the incarnation of its
// data directory, and accepts it while it catches up.
func (m *identity) admit(id string, inc uint64) error {
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: id, Incarnation: inc}}}
	if err := m.r.Load().Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error(); err != nil {
		return err
	}
	m.mu.Lock()
	m.admitting[id] = inc
	m.mu.Unlock()
	m.log.Info("participant admitted", "node", id, "cluster", FormatClusterID(m.Cluster()))
	return nil
}

// expectJoin marks id's data directory (incarnation inc) as being added by
// this leader (members add).
func (m *identity) expectJoin(id string, inc uint64) {
	m.mu.Lock()
	m.admitting[id] = inc
	m.mu.Unlock()
}

// refused logs a refusal, at most once a minute per peer and reason.
func (m *identity) refused(side, addr string, p peerInfo, reason string) {
	m.refusedKey(side, addr, p, reason, p.ID+"|"+reason)
}

func (m *identity) refusedKey(side, addr string, p peerInfo, reason, key string) {
	m.mu.Lock()
	last, ok := m.logged[key]
	if ok && time.Since(last) < time.Minute {
		m.mu.Unlock()
		return
	}
	if !ok && len(m.logged) >= maxTracked {
		for k, at := range m.logged {
			if time.Since(at) >= time.Minute {
				delete(m.logged, k)
			}
		}
		if len(m.logged) >= maxTracked {
			// Made-up node ids, most likely: the lines of this minute say
			// enough, and the memory stays bounded.
			flood := time.Since(m.floodLogged) >= time.Minute
			if flood {
				m.floodLogged = time.Now()
			}
			m.mu.Unlock()
			if flood {
				m.log.Error("Raft connections refused from too many distinct node ids or reasons within a minute; no more refusals are logged this minute. Is the Raft port reachable from outside the cluster?", "limit", maxTracked)
			}
			return
		}
	}
	m.logged[key] = time.Now()
	me := m.selfLocked()
	m.mu.Unlock()
	m.log.Error("Raft connection refused", "side", side, "peer", p.ID, "peer_addr", addr,
		"peer_cluster", FormatClusterID(p.Cluster), "peer_state", stateName(p.State),
		"cluster", FormatClusterID(me.Cluster), "state", stateName(me.State), "reason", reason)
}
