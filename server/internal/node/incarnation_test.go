package node

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// reserveAddrs returns n free loopback addresses for a bootstrap list.
func reserveAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// TestYoungClusterSurvivesFirstLeaderBeforeFollowerAppliedID reproduces F7:
// the first leader (n2) commits the entry that sets the cluster ID and
// records n1 and itself as participants; n1 stores the entry but has not
// applied it yet (held before it applies) when n2 stops. n3 has the ID. Without incarnations n3 refused n1 ("has been a member ...
// without a cluster ID yet") and the two were left without a leader. With
// them n3 recognises n1's data directory: the two elect a leader and serve.
func TestYoungClusterSurvivesFirstLeaderBeforeFollowerAppliedID(t *testing.T) {
	addrs := reserveAddrs(t, 3)
	peers := []Peer{{ID: "n1", RaftAddr: addrs[0]}, {ID: "n2", RaftAddr: addrs[1]}, {ID: "n3", RaftAddr: addrs[2]}}
	held, release := make(chan struct{}), make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	hook := func(id string, b fsm.Batch) {
		if id != "n1" {
			return
		}
		for _, op := range b.Ops {
			if op.Kind == fsm.OpSetCluster {
				holdOnce.Do(func() { close(held) })
				<-release
			}
		}
	}
	testBeforeApply.Store(&hook)
	t.Cleanup(func() { testBeforeApply.Store(nil) })
	releaseHold := func() { releaseOnce.Do(func() { close(release) }) }

	logs := map[string]*syncBuf{}
	open := func(id string, timeout time.Duration) *Node {
		t.Helper()
		logs[id] = &syncBuf{}
		var addr string
		for _, p := range peers {
			if p.ID == id {
				addr = p.RaftAddr
			}
		}
		n, err := Open(Config{ID: id, RaftAddr: addr, Dir: filepath.Join(t.TempDir(), id), InitialState: "new", Bootstrap: peers,
			HeartbeatTimeout: timeout, ElectionTimeout: timeout, Logger: slog.New(slog.NewTextHandler(logs[id], nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	// n2 first: it campaigns and wins with n1's vote, long before n1 (with
	// a longer timeout) would campaign itself.
	n2 := open("n2", 100*time.Millisecond)
	n1 := open("n1", time.Second)
	n3 := open("n3", time.Second) // a founder too: a new cluster forms once all have started
	t.Cleanup(releaseHold)        // before n1 closes (cleanups run last first)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("n1 never received the entry that sets the cluster ID; n1 log:\n%s", logs["n1"])
	}
	if n2.Raft().State() != raft.Leader {
		t.Fatalf("the first leader is not n2 (n2 is %v)", n2.Raft().State())
	}
	waitUntil(t, "n2 has the cluster ID", func() bool { return n2.Cluster() != (fsm.ClusterID{}) })
	var rec uint64
	n2.Read(func(s *fsm.State) { rec = s.Incarnation("n1") })
	if rec == 0 || rec != n1.id.incarnation {
		t.Fatalf("n2 recorded n1 with incarnation %x; n1's is %x", rec, n1.id.incarnation)
	}
	if b, err := os.ReadFile(filepath.Join(n1.cfg.Dir, incarnationFile)); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Fatalf("n1's %s: %q, %v", incarnationFile, b, err)
	}

	waitUntil(t, "n3 caught up with n2", func() bool {
		return n3.Cluster() == n2.Cluster() && n3.Raft().AppliedIndex() >= n2.Raft().LastIndex()
	})
	if n1.Cluster() != (fsm.ClusterID{}) {
		t.Fatal("n1 applied the cluster ID although held")
	}
	n2.Read(func(s *fsm.State) { rec = s.Incarnation("n3") })
	if rec == 0 || rec != n3.id.incarnation {
		t.Fatalf("n2 admitted n3 with incarnation %x; n3's is %x", rec, n3.id.incarnation)
	}

	n2.Close() // the first leader fails
	deadline := time.Now().Add(20 * time.Second)
	var leader *Node
	for leader == nil {
		for _, n := range []*Node{n1, n3} {
			if n.Raft().State() == raft.Leader {
				leader = n
			}
		}
		if leader == nil && time.Now().After(deadline) {
			t.Fatalf("no leader among n1 and n3 within 20 s after the first leader stopped (F7).\nn3 log:\n%s\nn1 log:\n%s", logs["n3"], logs["n1"])
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	releaseHold()
	b := fsm.Batch{Time: time.Now().UnixMilli()}
	if err := leader.Raft().Apply(fsm.AppendBatch(nil, &b), 10*time.Second).Error(); err != nil {
		t.Fatalf("the new leader %s does not commit: %v", leader.ID(), err)
	}
	waitUntil(t, "n1 has the cluster ID", func() bool { return n1.Cluster() == n3.Cluster() })
}

// TestLaggingParticipantNeedsItsIncarnation: a settled leader accepts a
// provisional participant only with the incarnation recorded for it; a
// participant without the ID and with another incarnation (its directory
// lost its data and started again) or none (an older ticketd) is refused.
// A settled participant with another incarnation is refused as well.
func TestLaggingParticipantNeedsItsIncarnation(t *testing.T) {
	var l syncBuf
	n := openSingle(t, "s1", &l)
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: "p1", Incarnation: 42}}}
	if err := n.Raft().Apply(fsm.AppendBatch(nil, &b), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		state byte
		inc   uint64
		ok    bool
	}{{stateProvisional, 42, true}, {stateProvisional, 43, false}, {stateProvisional, 0, false}, {stateEmpty, 42, false}} {
		reason := n.id.check(peerInfo{ID: "p1", State: c.state, Incarnation: c.inc}, "")
		if (reason == "") != c.ok {
			t.Errorf("participant p1 (recorded incarnation 42) %s with incarnation %d: refusal %q, want accepted %v", stateName(c.state), c.inc, reason, c.ok)
		}
		if !c.ok && !strings.Contains(reason, "lost data") {
			t.Errorf("refusal without the reason: %q", reason)
		}
	}
	// A settled participant too: another incarnation is an older directory
	// of a node id that was removed and added back. None (an older ticketd)
	// is not compared.
	for inc, ok := range map[uint64]bool{42: true, 43: false, 0: true} {
		reason := n.id.check(peerInfo{ID: "p1", State: stateSettled, Cluster: n.Cluster(), Incarnation: inc}, "")
		if (reason == "") != ok {
			t.Errorf("settled participant p1 (recorded incarnation 42) with incarnation %d: refusal %q, want accepted %v", inc, reason, ok)
		}
		if !ok && !strings.Contains(reason, "ticketctl members remove p1") {
			t.Errorf("refusal without the fix: %q", reason)
		}
	}
}

// TestIncarnationFile: a new data directory gets an incarnation, a restart
// keeps it (also while the directory is empty), and a directory that lost
// its data gets a new one.
func TestIncarnationFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	var l syncBuf
	cfg := Config{ID: "i1", RaftAddr: "127.0.0.1:0", Dir: dir, InitialState: "new",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&l, nil))}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := n.id.incarnation
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	n.Close()
	if got, err := readIncarnationFile(dir); err != nil || got != first || first == 0 {
		t.Fatalf("file %x, %v; in memory %x", got, err, first)
	}
	if n, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	if n.id.incarnation != first {
		t.Fatalf("a restart changed the incarnation: %x, was %x", n.id.incarnation, first)
	}
	n.Close()
	// The directory lost (everything in it): a new incarnation.
	os.RemoveAll(dir)
	if n, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	second := n.id.incarnation
	n.Close()
	if second == first {
		t.Fatal("a directory that lost its data kept its old incarnation")
	}
	// An empty directory waiting to be added keeps its incarnation across
	// restarts: it is still the directory a leader may be admitting.
	empty := filepath.Join(t.TempDir(), "e")
	ecfg := cfg
	ecfg.Dir, ecfg.InitialState = empty, "existing"
	if n, err = Open(ecfg); err != nil {
		t.Fatal(err)
	}
	waiting := n.id.incarnation
	n.Close()
	if n, err = Open(ecfg); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.id.incarnation != waiting {
		t.Fatalf("an empty directory changed its incarnation across a restart: %x, was %x", n.id.incarnation, waiting)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.MkdirAll(bad, 0o750)
	os.WriteFile(incarnationPath(bad), []byte("zz\n"), 0o640)
	if _, err := readIncarnationFile(bad); err == nil || !strings.Contains(err.Error(), "does not hold an incarnation") {
		t.Fatalf("garbled INCARNATION: %v", err)
	}
}

// TestHandshakeVersion1Peers: an older ticketd (handshake version 1, no
// incarnation) still connects both ways. Its hello is answered in version 1;
// when it refuses a version 3 hello and then a version 2 hello by closing
// the connection, the dialer says hello again in version 1. Its incarnation reads as 0 (unknown).
func TestHandshakeVersion1Peers(t *testing.T) {
	var l syncBuf
	n := openSingle(t, "s1", &l)

	// An old dialer.
	c, err := net.DialTimeout("tcp", n.RaftAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(appendHello(nil, kindProbe, peerInfo{ID: "old", Version: handshakeVersionV1})); err != nil {
		t.Fatal(err)
	}
	p, _, _, err := readHandshake(c, true)
	if err != nil || p.Version != handshakeVersionV1 || p.ID != "s1" || p.Cluster != n.Cluster() {
		t.Fatalf("reply to a version 1 hello: %+v, %v", p, err)
	}

	// An old acceptor: it reads the fixed part of the hello and closes the
	// connection unless the version is 1, as ticketd before version 2 did.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	versions := make(chan byte, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var head [24]byte
			if _, err := io.ReadFull(c, head[:]); err != nil {
				c.Close()
				continue
			}
			versions <- head[4]
			if head[4] != handshakeVersionV1 {
				c.Close()
				continue
			}
			io.ReadFull(c, make([]byte, head[23]))
			c.Write(appendReply(nil, false, peerInfo{ID: "old", State: stateEmpty, Version: handshakeVersionV1}, ""))
			c.Close()
		}
	}()
	ps, err := n.Probe(ln.Addr().String(), 5*time.Second)
	if err != nil || ps.NodeID != "old" || !ps.Empty || ps.Incarnation != 0 {
		t.Fatalf("probe of an older ticketd: %+v, %v", ps, err)
	}
	if v4, v3, v2, v1 := <-versions, <-versions, <-versions, <-versions; v4 != handshakeVersion || v3 != handshakeVersionV3 || v2 != handshakeVersionV2 || v1 != handshakeVersionV1 {
		t.Fatalf("hello versions sent: %d, %d, %d, %d; want %d, %d, %d, %d", v4, v3, v2, v1, handshakeVersion, handshakeVersionV3, handshakeVersionV2, handshakeVersionV1)
	}
}

// TestLeadsNeedsTheClusterID: a Raft leader whose cluster has no ID yet
// does not lead for serving (Leads is false): grants are made only under
// the cluster's identity. A restoring server's cluster gets its ID only
// from the restore, so it stays without one here.
func TestLeadsNeedsTheClusterID(t *testing.T) {
	var l syncBuf
	n, err := Open(Config{ID: "r1", RaftAddr: "127.0.0.1:0", Dir: filepath.Join(t.TempDir(), "r1"), InitialState: "new", Restoring: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&l, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitUntil(t, "r1 is the Raft leader", func() bool { return n.Raft().State() == raft.Leader })
	if n.Leads() || n.Cluster() != (fsm.ClusterID{}) {
		t.Fatalf("a leader without a cluster ID leads: Leads %v, cluster %s", n.Leads(), FormatClusterID(n.Cluster()))
	}
	s := openSingle(t, "s1", &l)
	if !s.Leads() {
		t.Fatal("the leader of a cluster with its ID does not lead")
	}
}
