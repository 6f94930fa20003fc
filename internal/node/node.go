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

	"github.com/ticketing-io/ticketing/internal/fsm"
)

// Peer is one voter of a cluster bootstrapped from configuration.
type Peer struct{ ID, RaftAddr string }

// Config configures one Raft node.
type Config struct {
	ID        string
	RaftAddr  string // listen address for Raft traffic
	Advertise string // address peers use to reach this node; defaults to RaftAddr
	Dir       string // data directory: raft.db and snapshots/
	// Bootstrap lists the voters of a new cluster; empty means this node
	// alone. Ignored when Dir already holds Raft state.
	Bootstrap []Peer
	// Join skips bootstrapping: the node waits to be added by a leader.
	Join bool
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
	fresh     bool
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
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	n := &Node{cfg: cfg, fsm: &stateMachine{state: fsm.New()}}
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
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	if err := verifyLog(dbPath, n.store, n.snaps); err != nil {
		return nil, err
	}
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
	stream := &streamLayer{ln: ln, adv: adv, tls: cfg.TLS}
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
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

	existing, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("read Raft state: %w", err)
	}
	n.fresh = !existing
	if existing {
		if err := writeMarker(cfg.Dir, cfg.ID); err != nil {
			return nil, fmt.Errorf("write %s: %w", markerPath(cfg.Dir), err)
		}
	}
	n.fsm.mark = func() { writeMarker(cfg.Dir, cfg.ID) }
	n.fsm.snapshotEvery = cfg.SnapshotThreshold
	n.fsm.snapshotNow = func() {
		defer n.fsm.snapshotting.Store(false)
		if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			cfg.Logger.Warn("snapshot failed", "err", err)
		}
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, n.store, n.store, n.snaps, n.transport)
	if err != nil {
		return nil, fmt.Errorf("start Raft: %w", err)
	}
	if !existing && !cfg.Join {
		peers := cfg.Bootstrap
		if len(peers) == 0 {
			peers = []Peer{{ID: cfg.ID, RaftAddr: string(n.transport.LocalAddr())}}
		}
		var conf raft.Configuration
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown()
			return nil, fmt.Errorf("bootstrap cluster: %w", err)
		}
		if err := writeMarker(cfg.Dir, cfg.ID); err != nil {
			n.raft.Shutdown()
			return nil, fmt.Errorf("write %s: %w", markerPath(cfg.Dir), err)
		}
	}
	ok = true
	return n, nil
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

// RestoreFrom replaces the whole state with a snapshot file's content. It
// must run on the leader; the restored state is then replicated as a
// snapshot. The file is checked before anything changes.
func (n *Node) RestoreFrom(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read backup: %w", err)
	}
	st, err := fsm.ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("backup is not a valid Ticketing snapshot: %w", err)
	}
	// The old cluster may have granted tokens after this backup was taken.
	// Skip past every token it could have granted since, so that tokens keep
	// growing after the restore (see RestoreTokenRate).
	floor := RestoreTokenFloor(st.LastToken(), st.LastTime(), time.Now().UnixMilli())
	st.RaiseTokenFloor(floor)
	n.cfg.Logger.Info("restoring backup", "held", st.Len(), "backup_last_token", st.LastToken(), "tokens_resume_above", floor)
	var buf bytes.Buffer
	if err := st.WriteSnapshot(&buf); err != nil {
		return err
	}
	data = buf.Bytes()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(data))}
	return n.raft.Restore(meta, bytes.NewReader(data), 0)
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
	err := n.raft.Shutdown().Error()
	n.closeStores()
	return err
}

func (n *Node) closeStores() {
	if n.transport != nil {
		n.transport.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
}

// stateMachine adapts fsm.State to raft.FSM.
type stateMachine struct {
	mu     sync.RWMutex
	state  *fsm.State
	held   atomic.Int64
	mark   func()    // records the data directory as a member's (see memberMarker)
	marked sync.Once // a joining server's first entry or snapshot

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
	m.mu.Lock()
	res := m.state.Apply(b)
	m.held.Store(int64(m.state.Len()))
	m.mu.Unlock()
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
	defer rc.Close()
	m.marked.Do(m.mark)
	s, err := fsm.ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	m.mu.Lock()
	m.state = s
	m.held.Store(int64(s.Len()))
	m.mu.Unlock()
	return nil
}

type snapshot struct{ state *fsm.State }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.state.WriteSnapshot(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// streamLayer is raft.StreamLayer over TCP, optionally TLS on both sides.
type streamLayer struct {
	ln  net.Listener
	adv net.Addr
	tls *tls.Config
}

func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil || s.tls == nil {
		return c, err
	}
	return tls.Server(c, s.tls), nil
}

func (s *streamLayer) Close() error   { return s.ln.Close() }
func (s *streamLayer) Addr() net.Addr { return s.adv }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.tls == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), s.tls)
}

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
