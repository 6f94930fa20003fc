package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// upgradeFrom is the ticketd a running cluster is upgraded from in
// TestUpgradeOneServerAtATime: the last version before authenticated Raft
// peers and the founding rule of docs/design.md (Cluster identity).
const upgradeFrom = "1bcf4b20cdb773b84557f64e15772d3034fe5660"

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
	old := buildAt(t, upgradeFrom, t.TempDir())
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
	for step, i := range order {
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
