package crashtest

// Data directories that come back older than what the cluster counted on:
// a removed member's directory put back after its id was added again, a
// log store lost beside the pre-upgrade log it was migrated from, and a
// copied directory. Each is refused, naming the fix, and tokens keep rising
// (docs/design.md, "Which faults keep tokens rising").

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// waitRefusedOrServing waits until refused holds, or one of ps serves
// clients; a server that serves fails the test with the token it grants
// (at or below last: tokens went backwards).
func waitRefusedOrServing(t *testing.T, what string, last uint64, refused func() bool, ps ...*proc) {
	t.Helper()
	var serving *proc
	waitFor(t, startTimeout, what, func() bool {
		for _, p := range ps {
			if p.running() && serves(p.client) {
				serving = p
				return true
			}
		}
		return refused()
	}, ps...)
	for _, p := range ps {
		if serving == nil && p.running() && serves(p.client) {
			serving = p
		}
	}
	if serving != nil {
		var addrs []string
		for _, p := range ps {
			addrs = append(addrs, p.client)
		}
		tok := grantKey(t, addrs, "stale/probe", 250)
		t.Fatalf("%s serves as leader (token %d granted; %d tokens were granted before): a stale data directory counted towards a majority\n%s",
			serving.id, tok, last, serving.logTail(20))
	}
}

// TestReaddedIDRefusesItsOldDirectory: members remove n3 and the documented
// replacement (an empty directory, join, members add: a new incarnation);
// n2 stops; 20 grants on n1 and the new n3; n1 and n3 stop; n3's directory
// from before its removal is put back, and n3 and n2 start. n2 knows n3 by
// its new incarnation and refuses the old directory as a lost disk: the two
// elect no leader (before, they did, and granted token 6 again). Once n1 is
// back, tokens continue above the 20 grants.
func TestReaddedIDRefusesItsOldDirectory(t *testing.T) {
	c, id := threeNodes(t)
	n1, n2, n3 := c.procs[0], c.procs[1], c.procs[2]
	all := strings.Join(c.addrs(), ",")
	for i := 0; i < 5; i++ {
		grantKey(t, c.addrs(), fmt.Sprintf("before/%d", i), byte(i))
	}
	if c.procs[c.leader()] == n3 {
		if code, out, errs := ctl(t, "--addr", all, "leader", "transfer", "n1"); code != 0 {
			t.Fatalf("leader transfer to n1: %d %s %s", code, out, errs)
		}
	}
	n3.stop()
	before := n3.dataDir + ".before-removal"
	if err := os.Rename(n3.dataDir, before); err != nil { // moved, not copied: the same directory
		t.Fatal(err)
	}
	replaceDisk(t, n3, all)
	waitFor(t, startTimeout, "the new n3 caught up", func() bool {
		st, err := adminStatus(n3.client)
		return err == nil && st.ClusterID == id
	}, n1, n2, n3)

	n2.kill()
	var last uint64
	for i := 0; i < 20; i++ {
		last = grantKey(t, []string{n1.client, n3.client}, fmt.Sprintf("after/%d", i), byte(i))
	}
	n1.kill()
	n3.kill()
	if err := os.Rename(n3.dataDir, n3.dataDir+".replacement"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(before, n3.dataDir); err != nil {
		t.Fatal(err)
	}
	n3.start()
	n2.start()
	const why = "older data directory of a node id that was removed and added back"
	waitRefusedOrServing(t, "n2 refuses n3's old directory", last, func() bool { return strings.Contains(n2.log(), why) }, n2, n3)
	for _, want := range []string{"ticketctl members remove n3", "never start that directory again"} {
		if !strings.Contains(n2.log(), want) {
			t.Errorf("n2's refusal does not say %q:\n%s", want, n2.logTail(10))
		}
	}
	n1.start()
	if tok := grantKey(t, []string{n1.client, n2.client}, "after/next", 99); tok <= last {
		t.Fatalf("token %d granted after %d: tokens went backwards", tok, last)
	}
	for i := 0; i < 20; i++ {
		if holder(t, []string{n1.client, n2.client}, fmt.Sprintf("after/%d", i)) == 0 {
			t.Fatalf("after/%d lost its grant", i)
		}
	}
}

// TestLostLogStoreBesideMigratedLogIsRefused: after the rolling upgrade that
// migrated raft.db into the log store (raft.db.migrated kept, as the docs
// allow), n2 stops; 20 grants; n1 and n3 stop; n3's log store (raft/wal)
// is lost. n3 must not start from raft.db.migrated, the log as it was
// before the upgrade: it refuses, naming the file (before, it migrated that
// log again and, with n2, granted 20 tokens a second time). Once n1 is
// back, tokens continue above the 20 grants.
func TestLostLogStoreBesideMigratedLogIsRefused(t *testing.T) {
	ps, c := rollingUpgrade(t, lastBoltTicketd(t), nil)
	n1, n2, n3 := ps[0], ps[1], ps[2]
	n2.kill()
	var last uint64
	for i := 0; i < 20; i++ {
		last = grantKey(t, []string{n1.client, n3.client}, fmt.Sprintf("upgraded/%d", i), byte(i))
	}
	n1.kill()
	n3.kill()
	if err := os.RemoveAll(filepath.Join(n3.raftDir(), "wal")); err != nil {
		t.Fatal(err)
	}
	n3.start()
	n2.start()
	waitRefusedOrServing(t, "n3 refuses its data directory", last, func() bool { return !n3.running() }, n2, n3)
	for _, want := range []string{"data directory damaged", "raft.db.migrated", "lost its log"} {
		if !strings.Contains(n3.log(), want) {
			t.Errorf("n3's refusal does not say %q:\n%s", want, n3.logTail(10))
		}
	}
	if n3.exitCode() == 0 {
		t.Errorf("n3 exited with status 0 after refusing its data directory")
	}
	n1.start()
	if tok := grantKey(t, []string{n1.client, n2.client}, "upgraded/next", 99); tok <= last {
		t.Fatalf("token %d granted after %d: tokens went backwards", tok, last)
	}
	for i := 0; i < 20; i++ {
		if holder(t, c.addrs()[:2], fmt.Sprintf("upgraded/%d", i)) == 0 {
			t.Fatalf("upgraded/%d lost its grant", i)
		}
	}
}

// TestCopiedDirectoryPutBackIsRefused: n3's data directory is copied
// (cp -a) while it is stopped; later, after n2 stopped and 20 grants went
// to n1 and n3, n1 and n3 stop and the copy is put back in n3's place. n3
// refuses to start on the copy, naming --data-dir-moved and the lost-disk
// procedure (before, n3 and n2 elected a leader and granted token 6 again
// after 26). Once n1 is back, tokens continue above the 20 grants.
func TestCopiedDirectoryPutBackIsRefused(t *testing.T) {
	c, _ := threeNodes(t)
	n1, n2, n3 := c.procs[0], c.procs[1], c.procs[2]
	for i := 0; i < 5; i++ {
		grantKey(t, c.addrs(), fmt.Sprintf("before/%d", i), byte(i))
	}
	n3.stop()
	copied := n3.dataDir + ".copy"
	if out, err := exec.Command("cp", "-a", n3.dataDir, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	n3.start()
	n3.mustReady()
	n2.kill()
	var last uint64
	for i := 0; i < 20; i++ {
		last = grantKey(t, []string{n1.client, n3.client}, fmt.Sprintf("after/%d", i), byte(i))
	}
	n1.kill()
	n3.kill()
	if err := os.RemoveAll(n3.dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copied, n3.dataDir); err != nil {
		t.Fatal(err)
	}
	n3.start()
	n2.start()
	waitRefusedOrServing(t, "n3 refuses the copy", last, func() bool { return !n3.running() }, n2, n3)
	for _, want := range []string{"data directory copied or moved", "--data-dir-moved", "lost disk"} {
		if !strings.Contains(n3.log(), want) {
			t.Errorf("n3's refusal does not say %q:\n%s", want, n3.logTail(10))
		}
	}
	n1.start()
	if tok := grantKey(t, []string{n1.client, n2.client}, "after/next", 99); tok <= last {
		t.Fatalf("token %d granted after %d: tokens went backwards", tok, last)
	}
	for i := 0; i < 20; i++ {
		if holder(t, []string{n1.client, n2.client}, fmt.Sprintf("after/%d", i)) == 0 {
			t.Fatalf("after/%d lost its grant", i)
		}
	}
}

// TestRestoreRefusesAMembersDataDirectory: --restore on a server of a live
// cluster, its Raft state moved aside within the data directory (as the
// docs used to show), is refused, naming the state it found: a restored
// cluster must never run beside the one it replaces (before, it started,
// and a key was then held in both clusters). With the old state moved out
// of the data directory the restore runs, with a new cluster ID.
func TestRestoreRefusesAMembersDataDirectory(t *testing.T) {
	c, id := threeNodes(t)
	n3 := c.procs[2]
	grantKey(t, c.addrs(), "held", 1)
	file := filepath.Join(t.TempDir(), "backup.snap")
	backupOf(t, strings.Join(c.addrs(), ","), file)
	n3.stop()
	aside := filepath.Join(n3.dataDir, "raft.before-restore")
	if err := os.Rename(n3.raftDir(), aside); err != nil {
		t.Fatal(err)
	}
	n3.extra = []string{"--restore", file}
	n3.start()
	waitExit(t, n3)
	for _, want := range []string{"refusing to restore", "holds a cluster's state", filepath.Join(aside, "CLUSTER"), "Stop every server of that cluster first"} {
		if !strings.Contains(n3.log(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, n3.logTail(5))
		}
	}
	if written, _ := os.ReadDir(n3.raftDir()); n3.exitCode() == 0 || len(written) > 0 {
		t.Fatalf("the refused restore exited %d or wrote to %s", n3.exitCode(), n3.raftDir())
	}
	// The cluster runs on without n3 meanwhile; moved out of the data
	// directory (the old cluster stopped first, in real life), the
	// restore makes a new cluster.
	if err := os.Rename(aside, n3.dataDir+".before-restore"); err != nil {
		t.Fatal(err)
	}
	n3.start()
	n3.mustReady()
	if st := statusOf(t, n3); st.ClusterID == id || len(st.ClusterID) != 32 {
		t.Fatalf("the restored cluster has ID %q; the old one was %s", st.ClusterID, id)
	}
}

// TestServerBehindAcceptsReaddedLeader: four servers; n4 stops; n2's disk
// is replaced as documented (members remove, an empty directory, join,
// members add: a new incarnation, recorded by n1 and n3), 10 grants, and n2
// becomes leader. n4 then starts with a log that records n2's first
// incarnation only: the entry that re-added n2 is on the leader, which n4
// must accept to receive it. n4 catches up and holds every grant (before,
// it refused n2 as an older directory of a re-added id and stayed behind
// for as long as n2 led). n2's old directory is still refused: see
// TestReaddedIDRefusesItsOldDirectory.
func TestServerBehindAcceptsReaddedLeader(t *testing.T) {
	c := startCluster(t, 4)
	n1, n2, n4 := c.procs[0], c.procs[1], c.procs[3]
	all := strings.Join(c.addrs(), ",")
	var id string
	waitFor(t, startTimeout, "one cluster ID on all servers", func() bool {
		ids := map[string]bool{}
		for _, p := range c.procs {
			st, err := adminStatus(p.client)
			if err != nil || st.ClusterID == "" || st.ClusterID == "none" {
				return false
			}
			ids[st.ClusterID], id = true, st.ClusterID
		}
		return len(ids) == 1
	}, c.procs...)
	for i := 0; i < 5; i++ {
		grantKey(t, c.addrs(), fmt.Sprintf("before/%d", i), byte(i))
	}
	if c.procs[c.leader()] != n1 {
		if code, out, errs := ctl(t, "--addr", all, "leader", "transfer", "n1"); code != 0 {
			t.Fatalf("leader transfer to n1: %d %s %s", code, out, errs)
		}
	}
	n4.kill()
	replaceDisk(t, n2, all)
	waitFor(t, startTimeout, "the new n2 caught up as a voter", func() bool {
		st, err := adminStatus(n1.client)
		if err != nil {
			return false
		}
		voter, found := memberOf(st, "n2")
		st2, err := adminStatus(n2.client)
		return err == nil && found && voter && st2.ClusterID == id
	}, c.procs[:3]...)
	var last uint64
	for i := 0; i < 10; i++ {
		last = grantKey(t, c.addrs()[:3], fmt.Sprintf("after/%d", i), byte(i))
	}
	if code, out, errs := ctl(t, "--addr", all, "leader", "transfer", "n2"); code != 0 {
		t.Fatalf("leader transfer to n2: %d %s %s", code, out, errs)
	}
	waitFor(t, startTimeout, "n2 leads", func() bool { st, err := adminStatus(n2.client); return err == nil && st.Role == "leader" }, n2)

	n4.start()
	const why = "older data directory of a node id that was removed and added back"
	waitFor(t, startTimeout, "n4 catches up from its leader n2", func() bool {
		if strings.Contains(n4.log(), why) {
			t.Fatalf("n4 refused its leader n2, whose re-admission its log does not hold yet:\n%s", n4.logTail(10))
		}
		st, err := adminStatus(n4.client)
		return err == nil && st.LastToken >= last
	}, n2, n4)
	if tok := grantKey(t, c.addrs(), "after/next", 99); tok <= last {
		t.Fatalf("token %d granted after %d: tokens went backwards", tok, last)
	}
}
