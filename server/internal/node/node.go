package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Peer is one voter of a cluster bootstrapped from configuration (the
// server's --bootstrap flag and bootstrap table, hence the toml tags).
type Peer struct {
	ID       string `toml:"id"`
	RaftAddr string `toml:"raft_addr"`
}

// Config configures one Raft node.
type Config struct {
	ID        string
	Release   string // this ticketd's version, stated to peers in the handshake
	RaftAddr  string // listen address for Raft traffic
	Advertise string // address peers use to reach this node; defaults to RaftAddr
	Dir       string // data directory: the Raft log (wal/) and snapshots/
	// Bootstrap lists the voters of a new cluster; empty means this node
	// alone. Used only with InitialState "new" and an empty Dir.
	Bootstrap []Peer
	// BootstrapAbsent names servers of Bootstrap that will never start:
	// founding does not wait for their answer (they stay voters).
	BootstrapAbsent []string
	// InitialState says what an empty Dir means: "new" bootstraps a new
	// cluster, "existing" waits to be added by a leader (ticketctl members
	// add). Empty means "new" unless Join is set.
	InitialState string
	// Join is InitialState "existing", and also refuses a Dir that already
	// holds state (a server that has state is restarted without join).
	Join bool
	// Restoring: the caller restores a backup into this new cluster, which
	// sets the cluster ID; the first leader does not set one of its own.
	Restoring bool
	// DirMoved: the operator confirms that Dir, found away from where it
	// was created (LOCATION), is the directory itself moved whole while
	// ticketd was stopped, not a copy (see place.go).
	DirMoved bool
	// TLS, when set, secures Raft traffic (server and client side).
	TLS *tls.Config
	// ClusterName, with TLS, is the cluster a peer's certificate must name
	// (URI SAN ticketing://NAME/node/ID).
	ClusterName string
	// RaftSecrets are the cluster secrets (at most MaxRaftSecrets: the
	// current one and, while it is replaced, the previous one): every peer
	// proves one of them before any Raft message, and so does this server.
	RaftSecrets [][]byte
	// Insecure accepts peers that prove no secret (raft_insecure).
	Insecure bool
	// NoRaftListener: this server runs alone, without peer
	// authentication: it opens no Raft listener and dials no peer, and a
	// data directory whose configuration lists other servers is refused.
	NoRaftListener bool

	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	SnapshotRetain    int
	HeartbeatTimeout  time.Duration
	ElectionTimeout   time.Duration
	Logger            *slog.Logger
}

// Applied is the response of one committed batch.
type Applied struct {
	Index   uint64
	Results []fsm.Result
}

// Node is a running Raft member with its state machine.
type Node struct {
	cfg       Config
	raft      *raft.Raft
	fsm       *stateMachine
	transport *raft.NetworkTransport
	store     logStore
	snaps     *raft.FileSnapshotStore
	stream    *clusterStream
	id        *identity
	rep       *replication // followers' acknowledgements; learners' promotions
	fresh     bool
	obsCh     chan raft.Observation
	obs       *raft.Observer
	done      chan struct{}
	closeOnce sync.Once
}

// Open opens (or creates) the node's data directory, starts Raft, and
// bootstraps a new cluster when the directory is empty and Join is false.
//
// Each step has one responsibility, in this order: everything on disk is
// checked (snapshots, then the log that continues them, then the identity
// files against both) before anything listens or Raft starts, so a damaged
// directory is refused before it can take part in a cluster. Startup reads
// the newest snapshot and the log once each: the checks keep what they
// decoded (the snapshot's state, which Raft then starts from, and the
// cluster's participants from the log), and Raft replays the log after.
func Open(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := openDataDir(cfg.Dir); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fsm: &stateMachine{nodeID: cfg.ID, state: fsm.New()}, rep: newReplication(), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			n.closeStores()
		}
	}()
	hlog := newHCLog(cfg.Logger)
	var newest snapshotState
	if n.snaps, newest, err = openSnapshots(cfg.Dir, max(cfg.SnapshotRetain, 1), hlog); err != nil {
		return nil, err
	}
	ids := newIdentityReplay(newest.state)
	if n.store, err = openLogStore(cfg.Dir, snapshotIndex(newest.meta), cfg.Logger, ids.apply); err != nil {
		return nil, err
	}
	if err := checkLogFollowsSnapshot(n.store, newest.meta); err != nil {
		return nil, err
	}
	existing, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read Raft state: %w", err)
	}
	if n.id, err = openIdentity(cfg, existing, n.fsm); err != nil {
		return nil, err
	}
	if existing {
		if err := n.learnParticipants(ids.state); err != nil {
			return nil, err
		}
	}
	n.fsm.onCluster = n.id.settle
	if n.stream, n.transport, err = openTransport(cfg, n.id, hlog); err != nil {
		return nil, err
	}
	rc, err := raftConfig(cfg, hlog)
	if err != nil {
		return nil, err
	}
	n.fresh = !existing
	if err := n.startRaft(rc, newest.state); err != nil {
		return nil, err
	}
	if err := n.checkAlone(); err != nil {
		n.raft.Shutdown()
		return nil, err
	}
	if err := n.foundOrJoin(); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// Fresh reports whether the data directory held no Raft state when opened.
func (n *Node) Fresh() bool { return n.fresh }

// Raft returns the underlying Raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address peers reach this node at.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// Read calls fn with the current state under a read lock. fn must not keep
// references to the state or block.
func (n *Node) Read(fn func(*fsm.State)) {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	fn(n.fsm.state)
}

// Held returns the number of held tickets, without locking.
func (n *Node) Held() int { return int(n.fsm.held.Load()) }

// Close shuts Raft down and closes the stores.
func (n *Node) Close() error {
	n.raft.DeregisterObserver(n.obs)
	n.closeOnce.Do(func() { close(n.done) })
	f := n.raft.Shutdown()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		n.closeStores()
		return err
	case <-time.After(shutdownGrace):
		// A stuck Raft must not hold the process forever: every append was
		// fsynced, so exiting now loses nothing that was acknowledged.
		n.cfg.Logger.Error("raft did not shut down in time; giving up on it", "after", shutdownGrace)
		return fmt.Errorf("raft did not shut down within %v", shutdownGrace)
	}
}

// logCacheSize is how many of the newest Raft entries are kept in memory
// (at most MaxAppendEntries are sent per AppendEntries; 1024 covers several
// rounds of them).
const logCacheSize = 1024

// shutdownGrace bounds how long Close waits for Raft to shut down.
const shutdownGrace = 10 * time.Second

func (n *Node) closeStores() {
	if n.transport != nil {
		_ = n.transport.Close()
	}
	if n.store != nil {
		_ = n.store.Close()
	}
}
