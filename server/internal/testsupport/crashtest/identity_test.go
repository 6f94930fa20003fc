package crashtest

// Tokens never go backwards when a young cluster loses a disk: a server
// that stalled before it learned the cluster ID, and a server whose data
// directory was wiped and restarted with its original config, must not
// form a second history together (docs/design.md, Cluster identity).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// startYoung starts n1..n3 together from one config file and bootstrap
// list, as docs/deployment.md has it, without waiting for them.
func startYoung(t *testing.T) []*proc {
	t.Helper()
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		ps = append(ps, newProc(t, fmt.Sprintf("n%d", i), base, "--config", cfgFile))
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
	}
	for _, p := range ps {
		p.start()
	}
	t.Cleanup(func() {
		for _, p := range ps {
			if p.running() {
				_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot take SIGKILL's exit path otherwise
			}
			if t.Failed() {
				t.Logf("%s", p.logTail(30))
			}
		}
	})
	return ps
}

func (p *proc) raftDir() string { return filepath.Join(p.dataDir, "raft") }

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// servingLeader waits until one of ps serves clients as leader.
func servingLeader(t *testing.T, ps ...*proc) *proc {
	t.Helper()
	var l *proc
	waitFor(t, startTimeout, "a serving leader", func() bool {
		for _, p := range ps {
			if !p.running() {
				continue
			}
			if st, err := adminStatus(p.client); err == nil && st.Role == "leader" && serves(p.client) {
				l = p
				return true
			}
		}
		return false
	}, ps...)
	return l
}

// TestStalledThenWipedLeaderNeverFoundsSecondHistory: n1 stalls (SIGSTOP,
// or kill -9 and a later restart) right after it founded the cluster with
// the others and before it learned the cluster ID. n2 and n3 form the
// cluster and grant 21 tokens. Their leader loses its disk and restarts
// with its original config (initial state new, or existing). When n1 comes
// back, the wiped server must not vote for it: n1 catches up from the
// surviving member, and tokens continue above the 21 granted.
func TestStalledThenWipedLeaderNeverFoundsSecondHistory(t *testing.T) {
	for _, stall := range []string{"sigstop", "kill"} {
		for _, mode := range []string{"new", "existing"} {
			t.Run(stall+"/"+mode, func(t *testing.T) {
				ps := startYoung(t)
				n1 := ps[0]
				// The founding writes MEMBER; the cluster ID comes only
				// with the first leader, an election timeout later.
				waitFor(t, startTimeout, "all three founded the cluster", func() bool {
					return exists(filepath.Join(ps[0].raftDir(), "MEMBER")) && exists(filepath.Join(ps[1].raftDir(), "MEMBER")) && exists(filepath.Join(ps[2].raftDir(), "MEMBER"))
				}, ps...)
				if stall == "sigstop" {
					if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
				} else {
					n1.kill()
				}
				if exists(filepath.Join(n1.raftDir(), "CLUSTER")) {
					t.Fatalf("n1 learned the cluster ID before it stalled: the scenario needs it to stall first")
				}
				leader := servingLeader(t, ps[1], ps[2])
				addrs := []string{ps[1].client, ps[2].client}
				var last uint64
				for i := 0; i < 21; i++ {
					last = grantKey(t, addrs, fmt.Sprintf("young/%d", i), byte(i))
				}
				survivor := ps[1]
				if leader == ps[1] {
					survivor = ps[2]
				}
				// The leader loses its disk and restarts with its config.
				leader.kill()
				if err := os.RemoveAll(leader.dataDir); err != nil {
					t.Fatal(err)
				}
				if mode == "existing" {
					leader.extra = append(leader.extra, "--initial-cluster-state", "existing")
				}
				leader.start()
				waitFor(t, startTimeout, leader.id+" waits to be added", func() bool { return strings.Contains(leader.log(), "waiting to be added") }, leader)
				if stall == "sigstop" {
					if err := n1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
						t.Fatal(err)
					}
				} else {
					n1.start()
				}
				l := servingLeader(t, n1, survivor, leader)
				if l == leader {
					t.Fatalf("the wiped server %s leads", leader.id)
				}
				all := []string{n1.client, survivor.client, leader.client}
				if tok := grantKey(t, all, "young/after", 77); tok <= last {
					t.Fatalf("token %d granted after %d tokens were granted: tokens went backwards (a second history was founded)", tok, last)
				}
				for i := 0; i < 21; i++ {
					if tok := holder(t, all, fmt.Sprintf("young/%d", i)); tok == 0 {
						t.Fatalf("young/%d lost its grant", i)
					}
				}
				if exists(filepath.Join(leader.raftDir(), "CLUSTER")) {
					t.Fatalf("the wiped server %s took part again without being removed and added", leader.id)
				}
			})
		}
	}
}

// TestWipedIdleFollowerIsNotReadmitted: in a fresh, idle cluster a
// follower loses its disk and restarts with its original config. The
// leader must refuse it (it has lost data the cluster counted on) rather
// than take it back as a voter.
func TestWipedIdleFollowerIsNotReadmitted(t *testing.T) {
	ps := startYoung(t)
	for _, p := range ps {
		p.mustReady()
	}
	leader := servingLeader(t, ps...)
	waitFor(t, startTimeout, "every server has the cluster ID", func() bool {
		for _, p := range ps {
			if !exists(filepath.Join(p.raftDir(), "CLUSTER")) {
				return false
			}
		}
		return true
	}, ps...)
	f := ps[0]
	if f == leader {
		f = ps[1]
	}
	f.kill()
	if err := os.RemoveAll(f.dataDir); err != nil {
		t.Fatal(err)
	}
	f.start()
	waitFor(t, startTimeout, "the leader refuses the wiped follower", func() bool {
		return strings.Contains(leader.log(), f.id+" has been a member of cluster") && strings.Contains(leader.log(), "has lost data the cluster counted on")
	}, leader, f)
	if exists(filepath.Join(f.raftDir(), "CLUSTER")) {
		t.Fatalf("the wiped follower %s was taken back into the cluster\n%s", f.id, f.logTail(20))
	}
	if st, err := adminStatus(f.client); err == nil && st.ClusterID != "" && st.ClusterID != "none" {
		t.Fatalf("the wiped follower %s has the cluster ID %s", f.id, st.ClusterID)
	}
}

// replaceDisk follows docs/deployment.md "Replace a failed disk" for p:
// members remove, an empty data directory, a start with join and without
// the bootstrap list, members add.
func replaceDisk(t *testing.T, p *proc, all string) {
	t.Helper()
	if code, out, errs := ctl(t, "--addr", all, "members", "remove", p.id); code != 0 {
		t.Fatalf("members remove %s: %d %s %s", p.id, code, out, errs)
	}
	if p.running() {
		p.stop()
	}
	if err := os.RemoveAll(p.dataDir); err != nil {
		t.Fatal(err)
	}
	p.extra = []string{p.extra[0], p.extra[1], "--join"} // the config file, no bootstrap
	p.start()
	waitFor(t, startTimeout, p.id+" waits to be added", func() bool { return strings.Contains(p.log(), "waiting to be added") }, p)
	if code, out, errs := ctl(t, "--addr", all, "members", "add", p.id, p.raftAddr); code != 0 {
		t.Fatalf("members add %s: %d %s %s", p.id, code, out, errs)
	}
	// The next restart uses the configuration without join.
	p.extra = p.extra[:2]
}

// TestReplaceFailedDiskAsDocumented: docs/deployment.md "Replace a failed
// disk", twice: n2's disk is replaced while grants compact the log (so n2
// installs a snapshot taken while it was not a member), n2 then leads, and
// n3's disk is replaced from it. Each comes back with the cluster's ID and
// every grant, and tokens keep rising.
func TestReplaceFailedDiskAsDocumented(t *testing.T) {
	c, id := threeNodes(t)
	n1, n2, n3 := c.procs[0], c.procs[1], c.procs[2]
	all := strings.Join(c.addrs(), ",")
	if l := c.procs[c.leader()]; l != n1 {
		if code, out, errs := ctl(t, "--addr", all, "leader", "transfer", "n1"); code != 0 {
			t.Fatalf("leader transfer to n1: %d %s %s", code, out, errs)
		}
	}
	// n2's disk fails; grants go on (the test config snapshots every 64
	// operations, so the log is compacted meanwhile).
	n2.kill()
	var last uint64
	for i := 0; i < 150; i++ {
		last = grantKey(t, []string{n1.client, n3.client}, fmt.Sprintf("compact/%d", i), byte(i))
	}
	replaceDisk(t, n2, all)
	waitFor(t, startTimeout, "n2 caught up", func() bool {
		st, err := adminStatus(n2.client)
		return err == nil && st.ClusterID == id && st.LastToken >= last
	}, n1, n2, n3)
	if code, out, errs := ctl(t, "--addr", all, "leader", "transfer", "n2"); code != 0 {
		t.Fatalf("leader transfer to n2: %d %s %s", code, out, errs)
	}
	waitFor(t, startTimeout, "n2 leads", func() bool { st, err := adminStatus(n2.client); return err == nil && st.Role == "leader" }, n2)
	n3.kill()
	replaceDisk(t, n3, all)
	waitFor(t, startTimeout, "n3 caught up from its leader n2", func() bool {
		st, err := adminStatus(n3.client)
		return err == nil && st.ClusterID == id && st.LastToken >= last
	}, n2, n3)
	if tok := grantKey(t, c.addrs(), "after-replacements", 200); tok <= last {
		t.Fatalf("token %d after %d", tok, last)
	}
	for i := 0; i < 150; i += 10 {
		if holder(t, c.addrs(), fmt.Sprintf("compact/%d", i)) == 0 {
			t.Fatalf("compact/%d lost its grant", i)
		}
	}
}
