package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

func (n *Node) hasOtherBootstrapPeers() bool {
	for _, p := range n.cfg.Bootstrap {
		if p.ID != n.cfg.ID {
			return true
		}
	}
	return false
}

func (n *Node) waitingToBeAdded() {
	n.cfg.Logger.Info("data directory empty and initial cluster state existing: waiting to be added to a cluster",
		"fix", fmt.Sprintf("on the cluster run: ticketctl members add %s %s", n.cfg.ID, n.RaftAddr()))
}

// bootstrap founds a new cluster from the bootstrap list (or of this server
// alone): its configuration becomes the first entry of the log.
func (n *Node) bootstrap() error {
	n.id.mu.Lock()
	n.id.hasState = true
	n.id.mu.Unlock()
	peers := n.cfg.Bootstrap
	if len(peers) == 0 {
		peers = []Peer{{ID: n.cfg.ID, RaftAddr: string(n.transport.LocalAddr())}}
	}
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap cluster: %w", err)
	}
	if err := writeMarker(n.cfg.Dir, n.cfg.ID); err != nil {
		return fmt.Errorf("write %s: %w", markerPath(n.cfg.Dir), err)
	}
	return nil
}

// foundRetry is how often found asks the bootstrap list again, and
// foundReport how often it says whom it still waits for.
const (
	foundRetry  = 200 * time.Millisecond
	foundReport = 10 * time.Second
)

// found founds a new cluster once every other server of the bootstrap list
// has answered and none of them holds a cluster ID. A server of the list
// that holds one means the cluster formed long ago and this directory was
// emptied (or never used): bootstrapping would found a second history
// beside it, which this server and a stalled or emptied peer could elect.
// It waits to be added instead; the cluster admits a voter that never took
// part and refuses one that lost its data. A server of the list that does
// not answer (stalled, down, not started yet) may be the one that holds the
// history, so founding waits for it: a new cluster forms once all its
// servers have started. The operator may name servers that will never
// start (BootstrapAbsent): their answer is not waited for, but one that
// does answer is heard (a settled one still means waiting to be added).
// The configuration keeps every server of the list, so founders given
// different absent lists still write the same first entry.
func (n *Node) found() {
	var lastReport time.Time
	for {
		type answer struct {
			peer Peer
			ps   PeerState
			err  error
		}
		var others []Peer
		for _, p := range n.cfg.Bootstrap {
			if p.ID != n.cfg.ID {
				others = append(others, p)
			}
		}
		answers := make(chan answer, len(others))
		for _, p := range others {
			go func() {
				ps, err := n.Probe(p.RaftAddr, time.Second)
				answers <- answer{p, ps, err}
			}()
		}
		var missing, skipped []string
		incs := map[string]uint64{}
		for range others {
			a := <-answers
			switch {
			case a.err != nil && slices.Contains(n.cfg.BootstrapAbsent, a.peer.ID):
				skipped = append(skipped, a.peer.ID)
			case a.err != nil:
				missing = append(missing, a.peer.ID)
			case a.ps.Settled:
				n.cfg.Logger.Warn("data directory empty, but a server of the bootstrap list already belongs to a cluster: not bootstrapping, waiting to be added",
					"peer", a.ps.NodeID, "cluster", FormatClusterID(a.ps.Cluster),
					"fix", fmt.Sprintf("if this server was a member and lost its data: ticketctl members remove %s, then ticketctl members add %s %s; set initial_cluster_state = \"existing\"", n.cfg.ID, n.cfg.ID, n.RaftAddr()))
				n.waitingToBeAdded()
				return
			default:
				incs[a.peer.ID] = a.ps.Incarnation
			}
		}
		if len(missing) == 0 {
			if len(skipped) > 0 {
				n.cfg.Logger.Warn("founding a new cluster without the servers of the bootstrap list named absent: they stay voters, and count as failed until they start",
					"absent", strings.Join(skipped, ","))
			}
			// Every founder is recorded as a participant with the
			// incarnation it answered with, when the first leader sets the
			// ID: a founder that stalls before it learns the ID is still
			// recognised and catches up (docs/design.md).
			n.id.mu.Lock()
			for id, inc := range incs {
				if _, met := n.id.seen[id]; !met && inc != 0 {
					n.id.seen[id] = inc
				}
			}
			n.id.mu.Unlock()
			select {
			case <-n.done:
				return
			default:
			}
			if err := n.bootstrap(); err != nil {
				n.cfg.Logger.Error("founding the cluster failed", "err", err)
			}
			return
		}
		if time.Since(lastReport) >= foundReport {
			lastReport = time.Now()
			n.cfg.Logger.Info("data directory empty: founding a new cluster once every server of the bootstrap list answers",
				"waiting_for", strings.Join(missing, ","))
		}
		select {
		case <-n.done:
			return
		case <-time.After(foundRetry):
		}
	}
}
