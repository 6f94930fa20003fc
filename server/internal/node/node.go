package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

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
	RaftAddr  string // listen address for Raft traffic
	Advertise string // address peers use to reach this node; defaults to RaftAddr
	Dir       string // data directory: raft.db and snapshots/
	// Bootstrap lists the voters of a new cluster; empty means this node
	// alone. Used only with InitialState "new" and an empty Dir.
	Bootstrap []Peer
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
	// TLS, when set, secures Raft traffic (server and client side).
	TLS *tls.Config

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
	store     *raftboltdb.BoltStore
	snaps     *raft.FileSnapshotStore
	stream    *clusterStream
	id        *identity
	fresh     bool
	obsCh     chan raft.Observation
	obs       *raft.Observer
	done      chan struct{}
	closeOnce sync.Once
}

// Open opens (or creates) the node's data directory, starts Raft, and
// bootstraps a new cluster when the directory is empty and Join is false.
func Open(cfg Config) (*Node, error) {
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
		return nil, fmt.Errorf("initial cluster state %q: want new or existing", cfg.InitialState)
	}
	if cfg.Join && cfg.InitialState == "new" {
		return nil, fmt.Errorf("join and initial cluster state new are exclusive: a joining server waits to be added")
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, accessOr(cfg.Dir, fmt.Errorf("create data directory: %w", err))
	}
	if err := checkWritable(cfg.Dir); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fsm: &stateMachine{nodeID: cfg.ID, state: fsm.New()}, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			n.closeStores()
		}
	}()

	dbPath := filepath.Join(cfg.Dir, "raft.db")
	info, err := os.Stat(dbPath)
	dbExisted := err == nil && info.Size() > 0
	if !dbExisted && hasMarker(cfg.Dir) {
		return nil, damaged(dbPath, fmt.Errorf("the Raft log is missing or empty, but %s says this directory held a member's state", markerPath(cfg.Dir)))
	}
	if err := checkBoltFile(dbPath); err != nil {
		return nil, err
	}
	if n.store, err = openStore(dbPath); err != nil {
		return nil, err
	}
	hlog := newHCLog(cfg.Logger)
	n.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, max(cfg.SnapshotRetain, 1), hlog)
	if err != nil {
		return nil, accessOr(cfg.Dir, fmt.Errorf("open snapshot store: %w", err))
	}
	if err := verifySnapshots(cfg.Dir, n.store, n.snaps); err != nil {
		return nil, err
	}
	if err := verifyLog(dbPath, n.store, n.snaps); err != nil {
		return nil, err
	}
	existing, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read Raft state: %w", err)
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
	n.id = &identity{nodeID: cfg.ID, dir: cfg.Dir, log: cfg.Logger, fsm: n.fsm, cluster: cluster, hasState: existing, incarnation: inc,
		admitting: map[string]uint64{}, seen: map[string]uint64{}, conns: map[*hsConn]fsm.ClusterID{}, logged: map[string]time.Time{},
		known: map[string]uint64{}}
	if existing {
		// Raft applies the log after a restart only once it learns the
		// commit index from a leader; the participants must be known
		// before that, from everything this directory holds.
		local, _, err := replayLocal(dbPath, n.store, n.snaps)
		if err != nil {
			return nil, err
		}
		if cluster == (fsm.ClusterID{}) && local.Cluster() != (fsm.ClusterID{}) {
			// The log holds the ID but the file was not written yet (a crash
			// between the two): this server has the data, so it is settled.
			cluster = local.Cluster()
			if err := writeClusterFile(cfg.Dir, cluster); err != nil {
				return nil, accessOr(cfg.Dir, fmt.Errorf("write %s: %w", clusterPath(cfg.Dir), err))
			}
			n.id.cluster = cluster
		}
		if local.Cluster() == cluster {
			for _, id := range local.Participants() {
				n.id.known[id] = local.Incarnation(id)
			}
		}
	}
	n.fsm.onCluster = n.id.settle
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", cfg.Advertise, err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for Raft on %s: %w", cfg.RaftAddr, err)
	}
	if cfg.Advertise == cfg.RaftAddr && adv.Port == 0 {
		adv = ln.Addr().(*net.TCPAddr) // tests listen on :0
	}
	n.stream = newClusterStream(ln, adv, cfg.TLS, n.id)
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: n.stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
		// 1 turns off hashicorp/raft's pipelined replication: after a
		// partition of the leader healed, its pipeline could block for good
		// (a send into an unbuffered in-progress channel whose reader waits
		// on the done channel), and Shutdown then never returned. Found by
		// the nemesis test TestShutdownAfterLeaderPartitions. Each
		// AppendEntries still carries up to MaxAppendEntries entries.
		MaxRPCsInFlight: 1,
	})

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

	n.fresh = !existing
	if existing {
		if err := writeMarker(cfg.Dir, cfg.ID); err != nil {
			return nil, accessOr(cfg.Dir, fmt.Errorf("write %s: %w", markerPath(cfg.Dir), err))
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
	n.fsm.snapshotNow = func() {
		defer n.fsm.snapshotting.Store(false)
		if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			cfg.Logger.Warn("snapshot failed", "err", err)
		}
	}
	// A server that cannot write its log stands aside from elections for a
	// while (F2): long enough for the others to elect one of themselves.
	health := &logHealth{hold: max(2*time.Second, 4*rc.ElectionTimeout), logger: cfg.Logger}
	// The newest entries stay in memory: replicating an entry (leader) and
	// applying it (followers) then read it from there instead of a bbolt
	// read transaction and a msgpack decode per entry. Every append still
	// goes to raft.db (through the health check) and is fsynced before it
	// is cached.
	logs, err := raft.NewLogCache(logCacheSize, healthLogStore{n.store, health})
	if err != nil {
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	gate := newVoteGate(healthTransport{n.transport, health}, n.id.mayVote, n.done)
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.store, n.snaps, gate)
	if err != nil {
		return nil, fmt.Errorf("start Raft: %w", err)
	}
	n.id.r.Store(n.raft)
	n.obsCh = make(chan raft.Observation, 16)
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool { _, ok := o.Data.(raft.RaftState); return ok })
	n.raft.RegisterObserver(n.obs)
	go n.watchLeadership()
	founding := !existing && cfg.InitialState == "new"
	if founding && n.hasOtherBootstrapPeers() {
		// Founded in the background, once every server of the bootstrap
		// list has answered (see found); meanwhile this server is empty.
		go n.found()
	} else if founding {
		if err := n.bootstrap(); err != nil {
			n.raft.Shutdown()
			return nil, err
		}
	} else if !existing {
		n.waitingToBeAdded()
	}
	if n.raft.State() == raft.Leader { // before the observer was registered
		go n.ensureClusterID()
	}
	ok = true
	return n, nil
}

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
// servers have started.
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
		var missing []string
		incs := map[string]uint64{}
		for range others {
			a := <-answers
			switch {
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

// Fresh reports whether the data directory held no Raft state when opened.
func (n *Node) Fresh() bool { return n.fresh }

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

// stateMachine adapts fsm.State to raft.FSM.
// testBeforeApply, set only by tests, is called with every batch before a
// server applies it: a test holds one server back there (F7).
var testBeforeApply atomic.Pointer[func(nodeID string, b fsm.Batch)]

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
}

func (m *stateMachine) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	m.marked.Do(m.mark)
	b, err := fsm.DecodeBatch(l.Data)
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
	// At least as many operations as tickets held: a snapshot copies the
	// whole state, so this keeps its cost per operation constant.
	limit := max(m.snapshotEvery, uint64(m.held.Load()))
	if m.snapshotEvery > 0 && m.opsSince.Add(uint64(len(b.Ops))) >= limit && m.snapshotting.CompareAndSwap(false, true) {
		go m.snapshotNow() // not here: Raft takes the snapshot through this goroutine
	}
	return &Applied{Index: l.Index, Results: res}
}

func (m *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	m.opsSince.Store(0)
	m.mu.RLock()
	c := m.state.Clone()
	m.mu.RUnlock()
	return &snapshot{state: c}, nil
}

func (m *stateMachine) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	m.marked.Do(m.mark)
	s, err := fsm.ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	m.mu.Lock()
	m.state = s
	m.held.Store(int64(s.Len()))
	m.mu.Unlock()
	m.clusterChanged(s.Cluster())
	return nil
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

// newHCLog routes Raft's logs into slog: warnings and errors only, since
// Raft is chatty at info level.
func newHCLog(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Warn,
		Output:      &slogWriter{l: l},
		DisableTime: true, // slog stamps the line
	})
}

type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if rest, ok := strings.CutPrefix(msg, "[ERROR]"); ok {
		level, msg = slog.LevelError, rest
	} else {
		msg = strings.TrimPrefix(msg, "[WARN]")
	}
	msg = strings.TrimPrefix(strings.TrimSpace(msg), "raft: ")
	w.l.Log(context.Background(), level, msg, "component", "raft")
	return len(p), nil
}
