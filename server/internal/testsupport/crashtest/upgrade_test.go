package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// upgradeFrom is the ticketd a running cluster is upgraded from in
// TestUpgradeOneServerAtATime: the last version before authenticated Raft
// peers and the founding rule of docs/design.md (Cluster identity).
const upgradeFrom = "1bcf4b20cdb773b84557f64e15772d3034fe5660"

// lastBolt is the last ticketd whose Raft log is raft.db (raft-boltdb),
// before the log store: its data directories are migrated at the first
// start of this one.
const lastBolt = "8b052303ca255e581410dddf41bd792def4c126d"

// beforeAdmissionIndexes is the last ticketd whose Raft handshake is
// version 3 and whose snapshots are format 4: participant records without
// the log index of their admission.
const beforeAdmissionIndexes = "f3324de70e695b0c4866fe5c647c7334761024d4"

var lastBoltBuild struct {
	once sync.Once
	dir  string
	bin  string
}

// lastBoltTicketd builds the lastBolt ticketd once per test run.
func lastBoltTicketd(t *testing.T) string {
	t.Helper()
	lastBoltBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "ticketd-lastbolt-")
		if err != nil {
			t.Fatal(err)
		}
		lastBoltBuild.dir = dir
		lastBoltBuild.bin = buildAt(t, lastBolt, dir)
	})
	if lastBoltBuild.bin == "" {
		t.Fatal("building the ticketd before the log store failed (see the first test that built it)")
	}
	return lastBoltBuild.bin
}

// buildAt builds cmd/ticketd as it was at commit into dir, from this
// repository's history.
func buildAt(t *testing.T, commit, dir string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the upgrade test builds the previous ticketd from this repository's git history, but git rev-parse failed: %v (run it in a git clone with history)", err)
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o750); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var aerr strings.Builder
	archive.Stderr = &aerr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v %s (the commit must be in this clone's history: git fetch --unshallow)", commit, err, aerr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ticketd-"+commit[:12])
	cmd := exec.Command("go", "build", "-o", out, "./cmd/ticketd")
	cmd.Dir = filepath.Join(src, "server")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build ticketd at %s: %v\n%s", commit, err, b)
	}
	return out
}

// TestUpgradeOneServerAtATime: a three-server cluster of the previous
// version, with grants, is upgraded in place as docs/deployment.md says
// (one server at a time, followers first, each ready before the next).
// Every server keeps its data directory, the cluster keeps its ID and its
// grants, and tokens keep rising throughout.
func TestUpgradeOneServerAtATime(t *testing.T) {
	rollingUpgrade(t, buildAt(t, upgradeFrom, t.TempDir()), nil)
}

// TestUpgradeFromHandshakeVersion3: a three-server cluster of the version
// before admission indexes, with the cluster secret, is upgraded one server
// at a time, followers first: an upgraded server says hello in version 4,
// and to an older one (which closes the connection unanswered) in version
// 3 with the proof of the secret; the older one challenges it in version 3.
// The cluster keeps its ID and grants, and tokens keep rising.
func TestUpgradeFromHandshakeVersion3(t *testing.T) {
	old := buildAt(t, beforeAdmissionIndexes, t.TempDir())
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := newProc(t, fmt.Sprintf("n%d", i), base, "--config", cfgFile)
		p.bin, p.secret = old, testcluster.RaftSecretFile(t)
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
		p.start()
	}
	c := &cluster{t: t, procs: ps}
	for _, p := range ps {
		p.mustReady()
	}
	var last uint64
	for i := 0; i < 5; i++ {
		last = grantKey(t, c.addrs(), fmt.Sprintf("upgrade/%d", i), byte(i))
	}
	id := statusOf(t, ps[c.leader()]).ClusterID
	leader := c.leader()
	for step, i := range []int{(leader + 1) % 3, (leader + 2) % 3, leader} {
		p := ps[i]
		p.stop()
		p.bin = ""
		p.start()
		p.mustReady()
		tok := grantKey(t, c.addrs(), fmt.Sprintf("upgrade/step%d", step), byte(10+step))
		if tok <= last {
			t.Fatalf("after upgrading %s: token %d, not above %d", p.id, tok, last)
		}
		last = tok
	}
	for _, p := range ps {
		if st := statusOf(t, p); st.ClusterID != id {
			t.Fatalf("%s is in cluster %s after the upgrade, was %s", p.id, st.ClusterID, id)
		}
	}
	for i := 0; i < 5; i++ {
		if holder(t, c.addrs(), fmt.Sprintf("upgrade/%d", i)) == 0 {
			t.Fatalf("upgrade/%d lost its grant in the upgrade", i)
		}
	}
}

// TestUpgradeMigratesRaftLog: a cluster of the last version whose Raft log
// is raft.db is upgraded one server at a time: each upgraded server
// migrates its raft.db into the log store at its first start and serves in
// a cluster with servers that have not been upgraded yet; once all are
// upgraded, each starts again on its log store alone.
func TestUpgradeMigratesRaftLog(t *testing.T) {
	migrated := func(t *testing.T, p *proc) {
		t.Helper()
		raftDir := filepath.Join(p.dataDir, "raft")
		for name, want := range map[string]bool{"raft.db": false, "raft.db.migrated": true, "wal/wal-meta.db": true, "wal.migrating": false} {
			if _, err := os.Stat(filepath.Join(raftDir, name)); (err == nil) != want {
				t.Fatalf("%s after its upgrade: %s exists: %v, want %v", p.id, name, err == nil, want)
			}
		}
		if !strings.Contains(p.log(), "migrated from raft.db") {
			t.Fatalf("%s did not say it migrated raft.db:\n%s", p.id, p.logTail(20))
		}
	}
	ps, c := rollingUpgrade(t, lastBoltTicketd(t), migrated)
	// Every server on its log store alone: restart each, one at a time.
	last := grantKey(t, c.addrs(), "upgrade/before-restarts", 40)
	for i, p := range ps {
		p.stop()
		p.start()
		p.mustReady()
		tok := grantKey(t, c.addrs(), fmt.Sprintf("upgrade/restart%d", i), byte(41+i))
		if tok <= last {
			t.Fatalf("after restarting %s: token %d, not above %d", p.id, tok, last)
		}
		last = tok
	}
	for i := 0; i < 5; i++ {
		if holder(t, c.addrs(), fmt.Sprintf("upgrade/%d", i)) == 0 {
			t.Fatalf("upgrade/%d lost its grant after the restarts", i)
		}
	}
}

// rollingUpgrade starts a three-server cluster of ticketd old, grants five
// keys, and upgrades it to this ticketd one server at a time, followers
// first, checking each upgraded server with upgraded (when given) and that
// tokens keep rising; at the end every server is in the same cluster and
// the five grants are held.
func rollingUpgrade(t *testing.T, old string, upgraded func(*testing.T, *proc)) ([]*proc, *cluster) {
	t.Helper()
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := newProc(t, fmt.Sprintf("n%d", i), base, "--config", cfgFile)
		p.bin = old
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
		p.start()
	}
	c := &cluster{t: t, procs: ps}
	for _, p := range ps {
		p.mustReady()
	}
	var last uint64
	for i := 0; i < 5; i++ {
		last = grantKey(t, c.addrs(), fmt.Sprintf("upgrade/%d", i), byte(i))
	}
	id := statusOf(t, ps[c.leader()]).ClusterID
	// Followers first, the leader last.
	leader := c.leader()
	order := []int{(leader + 1) % 3, (leader + 2) % 3, leader}
	// The previous versions authenticate no peer on loopback, and cannot
	// prove a cluster secret: as docs/deployment.md says, each server is
	// upgraded with the cluster secret and raft_insecure (it proves the
	// secret to peers that ask, and accepts the older ones that cannot),
	// then raft_insecure is removed one server at a time.
	for step, i := range order {
		p := ps[i]
		p.stop()
		p.bin = ""
		p.extra = append(p.extra, "--raft-insecure")
		p.start()
		p.mustReady()
		if upgraded != nil {
			upgraded(t, p)
		}
		tok := grantKey(t, c.addrs(), fmt.Sprintf("upgrade/step%d", step), byte(10+step))
		if tok <= last {
			t.Fatalf("after upgrading %s: token %d, not above %d", p.id, tok, last)
		}
		last = tok
	}
	for step, i := range order {
		p := ps[i]
		p.stop()
		p.extra = slices.DeleteFunc(p.extra, func(a string) bool { return a == "--raft-insecure" })
		p.start()
		p.mustReady()
		tok := grantKey(t, c.addrs(), fmt.Sprintf("upgrade/secure%d", step), byte(20+step))
		if tok <= last {
			t.Fatalf("after removing raft_insecure from %s: token %d, not above %d", p.id, tok, last)
		}
		last = tok
	}
	for _, p := range ps {
		if st := statusOf(t, p); st.ClusterID != id {
			t.Fatalf("%s is in cluster %s after the upgrade, was %s", p.id, st.ClusterID, id)
		}
	}
	for i := 0; i < 5; i++ {
		if holder(t, c.addrs(), fmt.Sprintf("upgrade/%d", i)) == 0 {
			t.Fatalf("upgrade/%d lost its grant in the upgrade", i)
		}
	}
	return ps, c
}
