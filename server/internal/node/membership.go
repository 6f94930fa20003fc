package node

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// PeerState is what a server at a Raft address says about itself.
type PeerState struct {
	NodeID      string
	Cluster     fsm.ClusterID
	Empty       bool   // no Raft state: waiting to be added
	Settled     bool   // knows its cluster ID
	Incarnation uint64 // of its data directory; 0 if unknown (an older ticketd)
}

// Probe asks the server at addr who it is, without opening a Raft connection.
func (n *Node) Probe(addr string, timeout time.Duration) (PeerState, error) {
	c, p, _, _, err := n.stream.hello(addr, kindProbe, timeout)
	if err != nil {
		return PeerState{}, err
	}
	c.Close()
	return PeerState{NodeID: p.ID, Cluster: p.Cluster, Empty: p.State == stateEmpty, Settled: p.State == stateSettled, Incarnation: p.Incarnation}, nil
}

// watchLeadership gives a new cluster its ID as soon as it has a leader.
func (n *Node) watchLeadership() {
	go n.promoteLearners()
	for {
		select {
		case <-n.done:
			return
		case o := <-n.obsCh:
			if st, _ := o.Data.(raft.RaftState); st == raft.Leader {
				go n.ensureClusterID()
				n.rep.kick() // learners left by an earlier leader
			}
		}
	}
}

// ensureClusterID: the leader of a cluster without an ID (a new cluster, or
// a data directory from before cluster IDs) sets one, and records as
// participants itself and the voters it has been connected to.
func (n *Node) ensureClusterID() {
	if n.cfg.Restoring || n.id.Cluster() != (fsm.ClusterID{}) {
		return
	}
	// Apply everything committed first: the log may already hold an ID.
	if err := n.raft.Barrier(10 * time.Second).Error(); err != nil || n.raft.State() != raft.Leader {
		return
	}
	n.fsm.mu.RLock()
	has := n.fsm.state.Cluster() != (fsm.ClusterID{})
	n.fsm.mu.RUnlock()
	if has {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	ops := []fsm.Op{{Kind: fsm.OpSetCluster, Cluster: NewClusterID()}, {Kind: fsm.OpAdmit, NodeID: n.cfg.ID, Incarnation: n.id.incarnation}}
	n.id.mu.Lock()
	if n.id.settledPeer != "" {
		peer, cluster := n.id.settledPeer, n.id.settledCluster
		n.id.mu.Unlock()
		// Setting an ID now would found a second history beside the one
		// that member holds, with tokens starting again from 1.
		n.cfg.Logger.Error("not setting a cluster ID: a member of this configuration already belongs to a cluster; this server waits to catch up from it",
			"peer", peer, "cluster", FormatClusterID(cluster))
		return
	}
	n.id.settling = true
	for _, s := range f.Configuration().Servers {
		if id := string(s.ID); id != n.cfg.ID {
			inc, met := n.id.seen[id]
			if !met {
				continue
			}
			// With its incarnation: should this leader fail before id
			// applied the ID, the next leader still recognises it (F7).
			ops = append(ops, fsm.Op{Kind: fsm.OpAdmit, NodeID: id, Incarnation: inc})
			n.id.admitting[id] = inc // accepted while they catch up with the ID
		}
	}
	n.id.mu.Unlock()
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: ops}
	if err := n.raft.Apply(fsm.AppendBatch(nil, &b), 10*time.Second).Error(); err != nil {
		n.id.mu.Lock()
		n.id.settling = false
		n.id.mu.Unlock()
		n.cfg.Logger.Warn("could not set the cluster ID; the next leader will", "err", err)
	}
}

// Cluster returns this server's cluster ID (zero while it has none).
func (n *Node) Cluster() fsm.ClusterID { return n.id.Cluster() }

// Leads reports whether this server is the Raft leader of a cluster that
// has its ID. A leader without one (a new cluster's first moments, or a
// server that met a member of an established cluster and so never sets an
// ID) does not serve: grants are made only under the cluster's identity.
func (n *Node) Leads() bool {
	return n.raft.State() == raft.Leader && n.id.Cluster() != (fsm.ClusterID{})
}

// ErrJoinRefused reports a members add that would harm the cluster.
var ErrJoinRefused = errors.New("members add refused")

// ErrRemoveRefused reports a members remove that would leave the cluster
// without a majority of voters it can reach.
var ErrRemoveRefused = errors.New("members remove refused")

// Joined is what AddMember did, or found done.
type Joined struct {
	// Voter: the server is a voter (promoted now, or earlier).
	Voter bool
	// LearnerIndex is the index of the configuration that made it a
	// learner; 0 when this call found it a member already.
	LearnerIndex uint64
	// PromotedIndex is the index of the configuration that made it a
	// voter, when this leader promoted it (0 for one promoted by an
	// earlier leader).
	PromotedIndex uint64
	// Match is the last log index the learner acknowledged to this leader
	// and Commit the leader's commit index: how far it has to go.
	Match, Commit uint64
}

// configuration returns the latest configuration. (Raft does not say at
// which index it was made: the changes below pass prevIndex 0, and each
// check reads the configuration again.)
func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

func findServer(c raft.Configuration, id string) (raft.Server, bool) {
	for _, s := range c.Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// AddMember adds the server id at addr as a learner (leader only), then
// waits up to wait for the leader to promote it to voter once it has caught
// up (promoteLearners). It is idempotent: for a learner already added it
// only waits, for a voter it reports that. A learner that has not caught up
// within wait stays one, and is promoted later by whichever server leads.
func (n *Node) AddMember(id, addr string, wait time.Duration) (Joined, error) {
	if err := n.checkMayGrow(); err != nil {
		return Joined{}, err
	}
	if n.raft.State() != raft.Leader {
		return Joined{}, raft.ErrNotLeader
	}
	conf, err := n.configuration()
	if err != nil {
		return Joined{}, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var res Joined
	if s, ok := findServer(conf, id); ok {
		if string(s.Address) != addr {
			return Joined{}, fmt.Errorf("%w: %s is already a member, at %s, not %s. If it moved, remove it first (ticketctl members remove %s), then add it back", ErrJoinRefused, id, s.Address, addr, id)
		}
		if s.Suffrage == raft.Voter {
			// Promoted by this leader (the index is known once the
			// promotion is committed) or by an earlier one (index 0).
			for {
				idx, promoting, changed := n.rep.promotion(id)
				if !promoting {
					return Joined{Voter: true, PromotedIndex: idx, Commit: n.raft.CommitIndex()}, nil
				}
				select {
				case <-changed:
				case <-deadline.C:
					return Joined{Voter: true, Commit: n.raft.CommitIndex()}, nil
				case <-n.done:
					return Joined{}, raft.ErrRaftShutdown
				}
			}
		}
		// A learner: added by an earlier members add, maybe under an
		// earlier leader. This leader promotes it once it has caught up.
	} else {
		if err := n.prepareJoin(conf, id, addr); err != nil {
			return Joined{}, err
		}
		n.rep.reset(id) // what was heard from an earlier member under this id counts for nothing
		f := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, joinTimeout)
		if err := f.Error(); err != nil {
			return Joined{}, fmt.Errorf("add %s at %s as a learner: %w", id, addr, err)
		}
		res.LearnerIndex = f.Index()
		n.cfg.Logger.Info("learner added; it becomes a voter once it has caught up", "node", id, "raft_addr", addr, "index", res.LearnerIndex)
	}
	n.rep.kick()
	for {
		idx, _, changed := n.rep.promotion(id)
		if idx != 0 {
			res.Voter, res.PromotedIndex = true, idx
			res.Match = n.rep.ack(raft.ServerID(id), n.raft.CurrentTerm()).match
			res.Commit = n.raft.CommitIndex()
			return res, nil
		}
		select {
		case <-changed:
			continue
		case <-deadline.C:
		case <-n.done:
		}
		res.Match = n.rep.ack(raft.ServerID(id), n.raft.CurrentTerm()).match
		res.Commit = n.raft.CommitIndex()
		return res, nil
	}
}

// joinTimeout bounds one configuration change.
const joinTimeout = 10 * time.Second

// prepareJoin checks, on the leader, that the server at addr is id and is
// waiting with an empty data directory, then records it as a participant
// (with its directory's incarnation) so that it is accepted while it
// catches up, by this leader and, should this one fail, by the next.
func (n *Node) prepareJoin(conf raft.Configuration, id, addr string) error {
	for _, s := range conf.Servers {
		if string(s.Address) == addr {
			return fmt.Errorf("%w: %s is already the address of member %s", ErrJoinRefused, addr, s.ID)
		}
	}
	p, err := n.Probe(addr, handshakeTimeout)
	if err != nil {
		return fmt.Errorf("%w: no ticketd answers at %s (%v): start %s first with an empty data directory and --join, and check the address (it is the server's raft_advertise address)", ErrJoinRefused, addr, err, id)
	}
	me := n.id.Cluster()
	switch {
	case p.NodeID != id:
		return fmt.Errorf("%w: the server at %s is %q, not %q: check the address, or add it under its own id", ErrJoinRefused, addr, p.NodeID, id)
	case p.Settled && p.Cluster != me:
		return fmt.Errorf("%w: %s at %s holds the data of cluster %s, and this is cluster %s: it must not bring another history in. "+
			"Stop it, empty its data directory, start it with --join, then run members add again", ErrJoinRefused, id, addr, FormatClusterID(p.Cluster), FormatClusterID(me))
	case !p.Empty:
		return fmt.Errorf("%w: %s at %s already holds Raft state (%s): a server is added with an empty data directory. "+
			"Stop it, empty its data directory, start it with --join, then run members add again", ErrJoinRefused, id, addr, FormatClusterID(p.Cluster))
	}
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: id, Incarnation: p.Incarnation}}}
	if err := n.raft.Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error(); err != nil {
		return fmt.Errorf("record %s as a participant: %w", id, err)
	}
	n.id.expectJoin(id, p.Incarnation)
	return nil
}

// promoteLearners runs for the life of the node: while it leads a
// configuration with learners, it checks them every promoteCheck and
// promotes each one that has caught up (see "Learners before voters").
func (n *Node) promoteLearners() {
	tick := time.NewTimer(promoteCheck)
	defer tick.Stop()
	var prevTerm, prevCommit uint64
	for {
		select {
		case <-n.done:
			return
		case <-n.rep.wake:
		case <-tick.C:
		}
		if n.raft.State() != raft.Leader {
			prevCommit = 0
			continue // woken again when this server next leads
		}
		conf, err := n.configuration()
		if err != nil {
			continue
		}
		var learners []raft.Server
		for _, s := range conf.Servers {
			if s.Suffrage != raft.Voter {
				learners = append(learners, s)
			}
		}
		if len(learners) == 0 {
			prevCommit = 0
			continue // woken by the next members add
		}
		term, commit := n.raft.CurrentTerm(), n.raft.CommitIndex()
		if term != prevTerm {
			prevTerm, prevCommit = term, 0
		}
		recent := n.raft.ReloadableConfig().ElectionTimeout
		if prevCommit != 0 {
			for _, s := range learners {
				if !n.rep.caughtUp(s.ID, term, prevCommit, recent) {
					continue
				}
				n.rep.startPromotion(string(s.ID))
				f := n.raft.AddVoter(s.ID, s.Address, 0, joinTimeout)
				if err := f.Error(); err != nil {
					n.rep.endPromotion(string(s.ID), 0)
					n.cfg.Logger.Warn("promoting a caught-up learner failed; retried at the next check", "node", s.ID, "err", err)
					break
				}
				n.rep.endPromotion(string(s.ID), f.Index())
				n.cfg.Logger.Info("learner caught up, promoted to voter", "node", s.ID, "index", f.Index(), "caught_up_to", prevCommit)
				break // one change at a time: the next check reads the new configuration
			}
		}
		prevCommit = commit
		tick.Reset(promoteCheck)
	}
}

// CheckRemove says why removing id now would leave the cluster without a
// majority of voters this leader can reach, or nil: etcd's strict
// reconfiguration check. A learner's removal changes no majority.
func (n *Node) CheckRemove(id string) error {
	conf, err := n.configuration()
	if err != nil {
		return err
	}
	target, ok := findServer(conf, id)
	if !ok || target.Suffrage != raft.Voter {
		return nil
	}
	term := n.raft.CurrentTerm()
	recent := n.raft.ReloadableConfig().ElectionTimeout
	var remaining, reachable int
	var unreachable []string
	for _, s := range conf.Servers {
		if s.Suffrage != raft.Voter || s.ID == target.ID {
			continue
		}
		remaining++
		if string(s.ID) == n.cfg.ID || n.rep.heardFrom(s.ID, term, recent) {
			reachable++
		} else {
			unreachable = append(unreachable, string(s.ID))
		}
	}
	if need := remaining/2 + 1; reachable < need {
		return fmt.Errorf("%w: without %s the cluster has %d voters, of which this leader hears from %d (not from %s), and a majority needs %d: "+
			"removing it would stop the cluster. Bring the silent voters back, or remove them first, or add a server (ticketctl members add) before removing %s",
			ErrRemoveRefused, id, remaining, reachable, strings.Join(unreachable, ", "), need, id)
	}
	return nil
}

// Forget drops a removed member from the participants (leader only).
func (n *Node) Forget(id string) error {
	n.rep.reset(id)
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpForget, NodeID: id}}}
	return n.raft.Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error()
}
