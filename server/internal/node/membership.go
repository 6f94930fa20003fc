package node

import (
	"errors"
	"fmt"
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
	for {
		select {
		case <-n.done:
			return
		case o := <-n.obsCh:
			if st, _ := o.Data.(raft.RaftState); st == raft.Leader {
				go n.ensureClusterID()
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

// PrepareJoin checks, on the leader, that the server at addr is id and is
// waiting with an empty data directory, then records it as a participant
// so that it is accepted while it catches up. Call it before AddVoter.
func (n *Node) PrepareJoin(id, addr string) error {
	if err := n.checkMayGrow(); err != nil {
		return err
	}
	if n.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return fmt.Errorf("%w: %s is already a member (at %s). If it lost its data, remove it first (ticketctl members remove %s), then add it back", ErrJoinRefused, id, s.Address, id)
		}
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

// Forget drops a removed member from the participants (leader only).
func (n *Node) Forget(id string) error {
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpForget, NodeID: id}}}
	return n.raft.Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error()
}
