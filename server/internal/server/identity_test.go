package server_test

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestSnapshotSaveOnlyOnLeader: a follower does not serve snapshot.save
// (its state may lag); it answers not-leader with the leader's address, as
// the other admin operations do, so that the backup is the leader's.
func TestSnapshotSaveOnlyOnLeader(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.LeaderIndex(t)
	follower := (leader + 1) % 3
	// (the follower learns the leader's client address from the takeover entry)
	testcluster.WaitFor(t, 10*time.Second, "snapshot.save on a follower answered not-leader naming the leader", func() bool {
		code, out := admin(t, c.Addr(follower), `{"op":"snapshot.save"}`)
		if code != 1 {
			t.Fatalf("snapshot.save on a follower: code %d %v; want 1 (not leader)", code, out)
		}
		return out["leader_addr"] == c.Addr(leader)
	})
	// The status shows the cluster ID, the same on every server.
	_, s0 := admin(t, c.Addr(0), `{"op":"status"}`)
	testcluster.WaitFor(t, 10*time.Second, "one cluster ID", func() bool {
		_, s1 := admin(t, c.Addr(1), `{"op":"status"}`)
		_, s2 := admin(t, c.Addr(2), `{"op":"status"}`)
		_, s0 = admin(t, c.Addr(0), `{"op":"status"}`)
		id, _ := s0["cluster_id"].(string)
		return len(id) == 32 && s1["cluster_id"] == id && s2["cluster_id"] == id
	})
}

// Two of three members lose their data directories and are started again
// with the configuration they had (bootstrap list, initial cluster state
// new), while the third, which holds the cluster's history, runs. Together
// they are a majority: had they bootstrapped, they would form a new cluster
// and grant tokens from 1 again. A server with an empty data directory asks
// the peers of its bootstrap list first, and when one of them already
// belongs to a cluster it does not bootstrap: it waits to be added, as with
// initial cluster state existing (its cluster refuses it, since it took
// part and lost its data; docs/deployment.md, Cluster identity).
func TestWipedMajorityDoesNotBootstrapBesideItsCluster(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	h := testcluster.Hello(t, c.Addr(l), "")
	var last uint64
	for i := range 5 {
		last = expect(t, h.Final(h.Acquire(fmt.Sprint("wiped/", i), testcluster.Owner(i), 0, 200)), wire.TypeGranted).Token
	}
	// Every server has applied the grants (and the cluster ID) before the stop.
	testcluster.WaitFor(t, 10*time.Second, "every server applied the grants", func() bool {
		for i := range 3 {
			if st := c.Server(i).Status(); st.LastToken != last || len(st.ClusterID) != 32 {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		c.Kill(i)
	}
	for i := range 2 {
		if err := os.RemoveAll(c.Config(i).DataDir); err != nil {
			t.Fatal(err)
		}
	}
	c.Restart(2)
	var started []*server.Server
	defer func() {
		for _, s := range started {
			s.Close()
		}
	}()
	bootstrapped := 0
	for i := range 2 {
		s, err := server.New(c.Config(i))
		if err != nil {
			t.Fatalf("wiped %s did not start (it should wait to be added): %v", c.Config(i).NodeID, err)
		}
		started = append(started, s)
		f := s.Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if n := len(f.Configuration().Servers); n > 0 {
			bootstrapped++
		}
	}
	if bootstrapped == 0 {
		return
	}
	// Show the harm: the wiped servers elect a leader of their own.
	var leader *server.Server
	testcluster.WaitFor(t, 30*time.Second, "a wiped server serves", func() bool {
		for _, s := range started {
			if s.IsServing() {
				leader = s
				return true
			}
		}
		return false
	})
	r := testcluster.Hello(t, leader.ClientAddr().String(), "")
	g := expect(t, r.Final(r.Acquire("wiped/0", testcluster.Owner(100), 0, 200)), wire.TypeGranted)
	t.Fatalf("%d wiped members bootstrapped beside their running cluster and serve: wiped/0 granted again with token %d (%d tokens were granted before)", bootstrapped, g.Token, last)
}

// A new cluster is founded once every server of its bootstrap list has
// answered: two of three do not form it without the third, which might be
// the one holding a history they do not know of (docs/design.md, Cluster
// identity). When the third starts, all three found it together.
func TestNewClusterFormsOnceEveryBootstrapServerAnswers(t *testing.T) {
	base := t.TempDir()
	var cfgs []server.Config
	var peers []server.Peer
	logs := make([]*logBuf, 3)
	for i := range 3 {
		id := fmt.Sprint("n", i+1)
		cfg := testcluster.Config(t, id, base+"/"+id)
		logs[i] = &logBuf{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
		cfgs = append(cfgs, cfg)
		peers = append(peers, server.Peer{ID: id, RaftAddr: cfg.RaftAddr})
	}
	start := func(i int) *server.Server {
		cfgs[i].Bootstrap = peers
		s, err := server.New(cfgs[i])
		if err != nil {
			t.Fatalf("start %s: %v", cfgs[i].NodeID, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2 := start(0), start(1)
	testcluster.WaitFor(t, 30*time.Second, "n1 and n2 wait for n3 before founding", func() bool {
		return strings.Contains(logs[0].String(), "waiting_for=n3") && strings.Contains(logs[1].String(), "waiting_for=n3")
	})
	for _, s := range []*server.Server{s1, s2} {
		if s.IsServing() || s.Status().ClusterID != "none" {
			t.Fatalf("a cluster formed without n3: %+v", s.Status())
		}
	}
	s3 := start(2)
	var addr string
	testcluster.WaitFor(t, 30*time.Second, "the cluster serves", func() bool {
		for _, s := range []*server.Server{s1, s2, s3} {
			if s.IsServing() {
				addr = s.ClientAddr().String()
				return true
			}
		}
		return false
	})
	h := testcluster.Hello(t, addr, "")
	g := expect(t, h.Final(h.Acquire("founded", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	testcluster.WaitFor(t, 30*time.Second, "all three in one cluster", func() bool {
		st1, st2, st3 := s1.Status(), s2.Status(), s3.Status()
		return st1.ClusterID != "none" && st1.ClusterID == st2.ClusterID && st2.ClusterID == st3.ClusterID && st3.LastToken >= g.Token
	})
}
