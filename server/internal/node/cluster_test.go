package node

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// openSingle starts a new single-node cluster and waits until it has its ID.
func openSingle(t *testing.T, id string, log *syncBuf) *Node {
	t.Helper()
	n, err := Open(Config{ID: id, RaftAddr: "127.0.0.1:0", Dir: filepath.Join(t.TempDir(), id), InitialState: "new",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	waitUntil(t, id+" has a cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	return n
}

// TestHandshakeRefusesOtherCluster: a leader told (bypassing members add)
// to replicate to a server of another cluster is refused on both sides,
// with both IDs in the log; the other server's state is untouched.
func TestHandshakeRefusesOtherCluster(t *testing.T) {
	var la, lb syncBuf
	a := openSingle(t, "a1", &la)
	b := openSingle(t, "b1", &lb)
	idB := b.Cluster()
	var lc syncBuf
	c := openSingle(t, "c1", &lc)
	if _, err := a.AddMember("c2", c.RaftAddr(), 0); err == nil || !strings.Contains(err.Error(), `is "c1", not "c2"`) {
		t.Fatalf("AddMember of a misnamed server: %v", err)
	}
	if _, err := a.AddMember("c1", c.RaftAddr(), 0); err == nil || !strings.Contains(err.Error(), "holds the data of cluster") {
		t.Fatalf("AddMember of another cluster's server: %v", err)
	}
	a.Raft().AddVoter("b1", raft.ServerAddress(b.RaftAddr()), 0, 0) // not committed: b never acks
	waitUntil(t, "refusals logged", func() bool {
		return strings.Contains(la.String(), "Raft connection refused") && strings.Contains(lb.String(), "Raft connection refused")
	})
	for _, s := range []string{FormatClusterID(a.Cluster()), FormatClusterID(idB), "must not be mixed"} {
		if !strings.Contains(la.String(), s) {
			t.Errorf("a's log lacks %q:\n%s", s, la.String())
		}
	}
	if b.Cluster() != idB || b.Raft().State() != raft.Leader {
		t.Fatalf("b changed: cluster %s state %v", FormatClusterID(b.Cluster()), b.Raft().State())
	}
	if p, err := a.Probe(b.RaftAddr(), time.Second); err != nil || p.NodeID != "b1" || p.Cluster != idB || !p.Settled || p.Empty {
		t.Fatalf("probe: %+v %v", p, err)
	}
}

// TestHandshakeRefusesDuplicateNodeID: a peer with this server's own
// node_id is refused.
func TestHandshakeRefusesDuplicateNodeID(t *testing.T) {
	var la, lb syncBuf
	a := openSingle(t, "x", &la)
	b := openSingle(t, "x", &lb)
	// Force a connection: a leader replicating to a peer named like itself.
	a.Raft().AddVoter("y", raft.ServerAddress(b.RaftAddr()), 0, 0)
	waitUntil(t, "duplicate refused", func() bool { return strings.Contains(la.String(), `also has node_id \"x\"`) })
}

// TestRestoreStateNewIDAndFloor: a restore gets a new cluster ID, records
// the backup's own last token in its log line, and takes an explicit floor.
func TestRestoreStateNewIDAndFloor(t *testing.T) {
	var l syncBuf
	n, err := Open(Config{ID: "r1", RaftAddr: "127.0.0.1:0", Dir: t.TempDir(), InitialState: "new", Restoring: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&l, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitUntil(t, "leader", func() bool { return n.Raft().State() == raft.Leader })
	if err := n.Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if n.Cluster() != (fsm.ClusterID{}) {
		t.Fatal("a restoring node set a cluster ID of its own")
	}
	st := fsm.New()
	old := fsm.ClusterID{7}
	st.Apply(fsm.Batch{Time: 1, Ops: []fsm.Op{{Kind: fsm.OpSetCluster, Cluster: old}, {Kind: fsm.OpAdmit, NodeID: "n2"},
		{Kind: fsm.OpAcquire, Key: "k", Owner: fsm.Owner{1}, LeaseMs: 1000}}})
	floor, err := n.RestoreState(st, 500)
	if err != nil || floor != 500 {
		t.Fatalf("floor %d, %v", floor, err)
	}
	waitUntil(t, "new cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	if n.Cluster() == old {
		t.Fatal("the restore kept the backup's cluster ID")
	}
	if !strings.Contains(l.String(), "backup_last_token=1 ") || !strings.Contains(l.String(), "tokens_resume_above=500 ") {
		t.Fatalf("log: %s", l.String())
	}
	var parts []string
	n.Read(func(s *fsm.State) { parts = s.Participants() })
	if len(parts) != 1 || parts[0] != "r1" {
		t.Fatalf("participants after restore: %v (the old cluster's must be forgotten)", parts)
	}
	var inc uint64
	n.Read(func(s *fsm.State) { inc = s.Incarnation("r1") })
	if inc == 0 || inc != n.id.incarnation {
		t.Fatalf("the restored server is recorded with incarnation %x; its directory's is %x", inc, n.id.incarnation)
	}
}

// TestOpenChecksIdentity: the CLUSTER file is rebuilt from the log when a
// crash lost it, a CLUSTER file without Raft state is a lost log, and join
// refuses a directory that holds state.
func TestOpenChecksIdentity(t *testing.T) {
	var l syncBuf
	dir := filepath.Join(t.TempDir(), "n")
	cfg := Config{ID: "n", RaftAddr: "127.0.0.1:0", Dir: dir, InitialState: "new",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&l, nil))}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	id := n.Cluster()
	n.Close()

	os.Remove(clusterPath(dir))
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.Cluster() != id { // before any leader: from the local log
		t.Fatalf("cluster %s after losing the CLUSTER file, want %s", FormatClusterID(n.Cluster()), FormatClusterID(id))
	}
	if got, _ := readClusterFile(dir); got != id {
		t.Fatalf("CLUSTER file not rewritten: %s", FormatClusterID(got))
	}
	n.Close()

	cfg.Join, cfg.InitialState = true, ""
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "already holds Raft state") {
		t.Fatalf("join on a directory with state: %v", err)
	}

	empty := filepath.Join(t.TempDir(), "e")
	os.MkdirAll(empty, 0o750)
	writeClusterFile(empty, id)
	cfg = Config{ID: "e", RaftAddr: "127.0.0.1:0", Dir: empty, InitialState: "new", Logger: cfg.Logger}
	if _, err := Open(cfg); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "ticketctl members remove e") {
		t.Fatalf("CLUSTER file without Raft state: %v", err)
	}
}

// TestAccessErrorsAreNotDamage: permission and read-only errors become
// ErrAccess with the fix; other errors pass through unchanged.
func TestAccessErrorsAreNotDamage(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS} {
		err := accessOr("/d", &fs.PathError{Op: "open", Path: "/d/raft.db", Err: errno})
		if !errors.Is(err, ErrAccess) || errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "chown -R ticketd:ticketd /d") {
			t.Errorf("%v: %v", errno, err)
		}
	}
	other := &fs.PathError{Op: "open", Path: "/d/raft.db", Err: syscall.EIO}
	if err := accessOr("/d", other); err != other {
		t.Errorf("EIO changed: %v", err)
	}
}

// handshakeAs dials addr and sends a Raft handshake as the server id of
// cluster cid, then waits for the answer (or the close).
func handshakeAs(t *testing.T, addr, id string, cid fsm.ClusterID, state byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(appendHello(nil, kindRaft, peerInfo{ID: id, Cluster: cid, State: state})); err != nil {
		t.Fatal(err)
	}
	readHandshake(c, true)
}

// TestHostileHandshakesKeepMemoryBounded: whoever reaches the Raft port can
// send handshakes under ever new node ids. What the server keeps about them
// (refusals already logged, peers seen while it has no cluster ID) stays
// bounded, and so does the number of refusal lines logged.
func TestHostileHandshakesKeepMemoryBounded(t *testing.T) {
	const n = 3000
	var ls, le syncBuf
	settled := openSingle(t, "s1", &ls)
	empty, err := Open(Config{ID: "e1", RaftAddr: "127.0.0.1:0", Dir: filepath.Join(t.TempDir(), "e1"), InitialState: "existing",
		Logger: slog.New(slog.NewTextHandler(&le, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { empty.Close() })
	other := NewClusterID()
	for i := range n {
		handshakeAs(t, settled.RaftAddr(), fmt.Sprintf("hostile-%d", i), other, stateSettled)
		handshakeAs(t, empty.RaftAddr(), fmt.Sprintf("hostile-%d", i), fsm.ClusterID{}, stateProvisional)
	}
	for _, nd := range []*Node{settled, empty} {
		nd.id.mu.Lock()
		logged, seen := len(nd.id.logged), len(nd.id.seen)
		nd.id.mu.Unlock()
		if logged > maxTracked || seen > maxTracked {
			t.Errorf("%s keeps %d refusal keys and %d seen peers after %d hostile handshakes; want at most %d each", nd.ID(), logged, seen, n, maxTracked)
		}
	}
	if lines := strings.Count(ls.String(), "Raft connection refused"); lines > maxTracked {
		t.Errorf("%d refusal lines logged for %d hostile handshakes within a minute; want at most %d", lines, n, maxTracked)
	}
}
