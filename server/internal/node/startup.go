package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// The steps of Open other than the stores (logstore.go, snapshots.go).

// withDefaults fills in the defaults of cfg and checks what a server was
// asked to be: a founder of a new cluster or a server waiting to be added.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.RaftAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch cfg.InitialState {
	case "":
		cfg.InitialState = "new"
		if cfg.Join {
			cfg.InitialState = "existing"
		}
	case "new", "existing":
	default:
		return cfg, fmt.Errorf("initial cluster state %q: want new or existing", cfg.InitialState)
	}
	if cfg.Join && cfg.InitialState == "new" {
		return cfg, fmt.Errorf("join and initial cluster state new are exclusive: a joining server waits to be added")
	}
	return cfg, nil
}

// openDataDir creates the data directory if needed and checks that this
// process may write it and every file of it, so that a permission problem
// is reported as one before any store is opened.
func openDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return accessOr(dir, fmt.Errorf("create data directory: %w", err))
	}
	return checkWritable(dir)
}

// openIdentity reads who this data directory is, its place (LOCATION), its
// cluster ID (CLUSTER) and its incarnation (INCARNATION), and checks them
// against whether it holds Raft state (existing) and against the
// configuration.
func openIdentity(cfg Config, existing bool, m *stateMachine) (*identity, error) {
	if err := checkLocation(cfg.Dir, existing, cfg.DirMoved, cfg.Logger); err != nil {
		return nil, err
	}
	cluster, err := readClusterFile(cfg.Dir)
	if err != nil {
		return nil, accessOr(cfg.Dir, damaged(clusterPath(cfg.Dir), err))
	}
	switch {
	case existing && cfg.Join:
		return nil, fmt.Errorf("--join (join = true) is given, but the data directory %s already holds Raft state (cluster %s): "+
			"a server that holds state is restarted without join. To add this server to a cluster as a new member, "+
			"stop it, empty its data directory, and start it again with join", cfg.Dir, FormatClusterID(cluster))
	case !existing && cluster != (fsm.ClusterID{}):
		return nil, damaged(cfg.Dir, fmt.Errorf("%s says this directory held the state of cluster %s, but its Raft state is gone. "+
			"Do not start it as a new cluster: run ticketctl members remove %s on the cluster, empty this directory, "+
			"start this server with --join and run ticketctl members add %s RAFTADDR", clusterPath(cfg.Dir), FormatClusterID(cluster), cfg.ID, cfg.ID))
	}
	// The incarnation is created with the directory: a directory that lost
	// its data (the INCARNATION file with the rest) gets a new one when it
	// starts again, so it never shows the old one. An empty directory that
	// never held Raft state keeps its own across restarts: a founder or a
	// server being added that restarts before it has state is still the
	// directory the cluster recorded. (A directory that held state and lost
	// only part of it is refused above as damaged.) A directory from before
	// incarnations gets one now; the cluster has none recorded for it, so
	// nothing is accepted on its strength.
	inc, err := readIncarnationFile(cfg.Dir)
	if err != nil {
		return nil, accessOr(cfg.Dir, damaged(incarnationPath(cfg.Dir), err))
	}
	if inc == 0 {
		inc = newIncarnation()
		if err := writeIncarnationFile(cfg.Dir, inc); err != nil {
			return nil, accessOr(cfg.Dir, fmt.Errorf("write %s: %w", incarnationPath(cfg.Dir), err))
		}
	}
	return &identity{nodeID: cfg.ID, dir: cfg.Dir, log: cfg.Logger, fsm: m, cluster: cluster, hasState: existing, incarnation: inc, release: cfg.Release,
		admitting: map[string]uint64{}, seen: map[string]uint64{}, conns: map[*hsConn]fsm.ClusterID{}, logged: map[string]time.Time{},
		known: map[string]fsm.Admission{}, releases: map[string]string{}}, nil
}

// identityReplay follows the cluster ID and the participants from the
// newest snapshot through every command of the log after it, committed or
// not, without the rest of the state. Only OpSetCluster, OpAdmit and
// OpForget change them, and those depend on nothing else of the state
// (fsm.State.Apply), so applying just them to a state that starts with the
// snapshot's ID and participants gives what a replay of everything would.
type identityReplay struct{ state *fsm.State }

func newIdentityReplay(snapshot *fsm.State) *identityReplay {
	st := fsm.New()
	if snapshot != nil {
		if id := snapshot.Cluster(); id != (fsm.ClusterID{}) {
			st.SetCluster(id)
		}
		for _, id := range snapshot.Participants() {
			a := snapshot.AdmissionOf(id)
			st.Apply(fsm.Batch{Index: a.Index, Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: id, Incarnation: a.Incarnation}}})
		}
	}
	return &identityReplay{state: st}
}

func (r *identityReplay) apply(b fsm.Batch) {
	var ops []fsm.Op
	for _, op := range b.Ops {
		switch op.Kind {
		case fsm.OpSetCluster, fsm.OpAdmit, fsm.OpForget:
			ops = append(ops, op)
		}
	}
	if len(ops) > 0 {
		r.state.Apply(fsm.Batch{Time: b.Time, Index: b.Index, Ops: ops})
	}
}

// learnParticipants tells the identity which servers took part in the
// cluster, from everything this directory holds (local: its identity
// replay). Raft applies the log after a restart only once it learns the
// commit index from a leader; the participants must be known before that,
// to answer handshakes.
func (n *Node) learnParticipants(local *fsm.State) error {
	cluster := n.id.cluster
	if cluster == (fsm.ClusterID{}) && local.Cluster() != (fsm.ClusterID{}) {
		// The log holds the ID but the file was not written yet (a crash
		// between the two): this server has the data, so it is settled.
		cluster = local.Cluster()
		if err := writeClusterFile(n.cfg.Dir, cluster); err != nil {
			return accessOr(n.cfg.Dir, fmt.Errorf("write %s: %w", clusterPath(n.cfg.Dir), err))
		}
		n.id.cluster = cluster
	}
	if local.Cluster() == cluster {
		for _, id := range local.Participants() {
			n.id.known[id] = local.AdmissionOf(id)
		}
		last, err := n.store.LastIndex()
		if err != nil {
			return damaged(logStorePath(n.cfg.Dir), err)
		}
		n.id.knownUpTo = last
	}
	return nil
}

// openTransport listens for Raft traffic and returns the transport over it,
// every connection of which starts with the identity handshake.
func openTransport(cfg Config, id *identity, hlog hclog.Logger) (*clusterStream, *raft.NetworkTransport, error) {
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		return nil, nil, fmt.Errorf("raft advertise address %q: %w", cfg.Advertise, err)
	}
	var ln net.Listener
	if !cfg.NoRaftListener {
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return nil, nil, fmt.Errorf("listen for Raft on %s: %w", cfg.RaftAddr, err)
		}
		if cfg.Advertise == cfg.RaftAddr && adv.Port == 0 {
			adv = ln.Addr().(*net.TCPAddr) // tests listen on :0
		}
	}
	if len(cfg.RaftSecrets) > MaxRaftSecrets {
		return nil, nil, fmt.Errorf("%d Raft secrets given: at most %d (the current one and the previous one)", len(cfg.RaftSecrets), MaxRaftSecrets)
	}
	stream := newClusterStream(ln, adv, cfg.TLS, id, peerAuth{secrets: cfg.RaftSecrets, insecure: cfg.Insecure}, cfg.ClusterName)
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
		// 1 turns off hashicorp/raft's pipelined replication: after a
		// partition of the leader healed, its pipeline could block for good
		// (a send into an unbuffered in-progress channel whose reader waits
		// on the done channel), and Shutdown then never returned. Found by
		// the nemesis test TestShutdownAfterLeaderPartitions. Each
		// AppendEntries still carries up to MaxAppendEntries entries.
		MaxRPCsInFlight: 1,
	})
	return stream, transport, nil
}

// raftConfig is Raft's configuration for cfg.
func raftConfig(cfg Config, hlog hclog.Logger) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.BatchApplyCh = true // many Apply calls share one disk write
	rc.MaxAppendEntries = 256
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
		rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
		rc.TrailingLogs = min(rc.TrailingLogs, cfg.SnapshotThreshold)
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	return rc, nil
}

// startRaft starts Raft over the checked stores: the state machine with
// its hooks, starting from the newest snapshot's state (start, nil when
// there is none), the log behind its health check and an in-memory cache,
// the transport behind the vote gate.
func (n *Node) startRaft(rc *raft.Config, start *fsm.State) error {
	cfg := n.cfg
	if !n.fresh {
		if err := writeMarker(cfg.Dir, cfg.ID); err != nil {
			return accessOr(cfg.Dir, fmt.Errorf("write %s: %w", markerPath(cfg.Dir), err))
		}
	}
	n.fsm.mark = func() {
		// Checked at start: a data directory without its marker is refused
		// as damaged, so a failure to write it now must be visible.
		if err := writeMarker(cfg.Dir, cfg.ID); err != nil {
			cfg.Logger.Error("writing the member marker failed", "path", markerPath(cfg.Dir), "err", err)
		}
	}
	n.fsm.snapshotEvery = cfg.SnapshotThreshold
	n.fsm.incarnation = n.id.incarnation
	n.fsm.snapshotNow = func() {
		for {
			n.fsm.ownAdmission.Store(false)
			if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
				cfg.Logger.Warn("snapshot failed", "err", err)
			}
			n.fsm.snapshotting.Store(false)
			// This server's own admission, applied while this snapshot was
			// under way (it may not be in it): one more.
			if !n.fsm.ownAdmission.Load() || !n.fsm.snapshotting.CompareAndSwap(false, true) {
				return
			}
		}
	}
	if start != nil {
		// Read and checked by openSnapshots: Raft takes the newest
		// snapshot's index, term and configuration from its metadata but
		// does not read its state a second time.
		rc.NoSnapshotRestoreOnStart = true
		n.fsm.startFrom(start)
	}
	// A server that cannot write its log stands aside from elections for a
	// while (F2): long enough for the others to elect one of themselves.
	health := &logHealth{hold: max(2*time.Second, 4*rc.ElectionTimeout), logger: cfg.Logger}
	// The newest entries stay in memory: replicating an entry (leader) and
	// applying it (followers) then read it from there instead of a store
	// read and a decode per entry. Every append still goes to the log store
	// (through the health check) and is fsynced before it is cached.
	logs, err := raft.NewLogCache(logCacheSize, healthLogStore{n.store, health})
	if err != nil {
		return fmt.Errorf("raft log cache: %w", err)
	}
	gate := newVoteGate(healthTransport{n.transport, health}, n.id.mayVote, n.done)
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.store, n.snaps, ackingTransport{gate, n.rep})
	if err != nil {
		return fmt.Errorf("start Raft: %w", err)
	}
	n.id.r.Store(n.raft)
	n.obsCh = make(chan raft.Observation, 16)
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool { _, ok := o.Data.(raft.RaftState); return ok })
	n.raft.RegisterObserver(n.obs)
	go n.watchLeadership()
	return nil
}

// foundOrJoin decides what a running Raft does next: a directory that held
// state carries on; an empty one founds a new cluster (at once when alone,
// in the background once the whole bootstrap list answers) or waits to be
// added.
func (n *Node) foundOrJoin() error {
	founding := n.fresh && n.cfg.InitialState == "new"
	if founding && n.hasOtherBootstrapPeers() {
		// Founded in the background, once every server of the bootstrap
		// list has answered (see found); meanwhile this server is empty.
		go n.found()
	} else if founding {
		if err := n.bootstrap(); err != nil {
			n.raft.Shutdown()
			return err
		}
	} else if n.fresh {
		n.waitingToBeAdded()
	}
	if n.raft.State() == raft.Leader { // before the observer was registered
		go n.ensureClusterID()
	}
	return nil
}
