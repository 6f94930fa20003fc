package crashtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootstrapServerThatNeverStarts: n3 of the bootstrap list never
// starts. n1 and n2 wait for it (a server that does not answer may be the
// one holding the cluster's history) and serve nothing. Restarted with
// --bootstrap-absent n3, as docs/deployment.md says, they found the cluster
// with n3 still a voter, elect a leader and serve. When n3 starts after
// all, with its original config, it finds the cluster, is taken in, and
// catches up: one history.
func TestBootstrapServerThatNeverStarts(t *testing.T) {
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for _, id := range []string{"n1", "n2", "n3"} {
		ps = append(ps, newProc(t, id, base, "--config", cfgFile))
	}
	list := peers(ps...)
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", list)
	}
	n1, n2, n3 := ps[0], ps[1], ps[2]
	n1.start()
	n2.start()
	for _, p := range []*proc{n1, n2} {
		waitFor(t, startTimeout, p.id+" waits for n3", func() bool { return strings.Contains(p.log(), "waiting_for=n3") }, p)
	}
	for _, p := range []*proc{n1, n2} {
		if serves(p.client) || exists(filepath.Join(p.raftDir(), "CLUSTER")) {
			t.Fatalf("%s formed a cluster without n3 before being told n3 never starts\n%s", p.id, p.logTail(10))
		}
	}
	// The documented way out: on every server that starts, name n3.
	for _, p := range []*proc{n1, n2} {
		p.stop()
		p.extra = append(p.extra, "--bootstrap-absent", "n3")
		p.start()
	}
	leader := servingLeader(t, n1, n2)
	if !strings.Contains(leader.log(), "founding a new cluster without the servers of the bootstrap list named absent") {
		t.Errorf("%s does not say it founded without n3:\n%s", leader.id, leader.logTail(10))
	}
	last := grantKey(t, []string{n1.client, n2.client}, "formed/0", 1)
	id := statusOf(t, leader).ClusterID
	voter := false
	for _, m := range statusOf(t, leader).Members {
		voter = voter || (m.ID == "n3" && m.Voter)
	}
	if !voter {
		t.Errorf("n3 is not a voter of the new cluster: %+v", statusOf(t, leader).Members)
	}
	// n3 after all, with the config it always had.
	n3.start()
	waitFor(t, startTimeout, "n3 caught up in the same cluster", func() bool {
		st, err := adminStatus(n3.client)
		return err == nil && st.ClusterID == id && st.LastToken >= last
	}, n1, n2, n3)
	if tok := grantKey(t, []string{n1.client, n2.client, n3.client}, "formed/1", 2); tok <= last {
		t.Fatalf("token %d after %d", tok, last)
	}
	if holder(t, []string{n3.client, n1.client, n2.client}, "formed/0") == 0 {
		t.Fatal("formed/0 lost its grant")
	}
}
