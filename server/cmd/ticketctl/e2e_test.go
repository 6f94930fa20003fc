package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// End-to-end tests: ticketctl's run against real in-process servers.

func mustCtl(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, stdout, stderr := ctl(t, args...)
	if code != want {
		t.Fatalf("ticketctl %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, stdout, stderr)
	}
	return stdout
}

func TestEndToEndSingleNode(t *testing.T) {
	c := testcluster.Start(t, 1)
	addr := "--addr=" + c.Addr(0)

	var got acquireResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "acquire", "orders/1", "--wait", "0s", "--lease", "30s"), &got)
	if got.Key != "orders/1" || got.Token == 0 || got.LeaseMs != 30000 || got.Deadline == "" {
		t.Fatalf("acquire result %+v", got)
	}
	token := fmt.Sprint(got.Token)

	// The ticket outlived the first ticketctl: a second acquire is refused.
	var refused errorResult
	decodeOne(t, mustCtl(t, exitNotAcquired, "acquire", "orders/1", "--lease", "30s", "--wait", "0s", "-o", "json", addr), &refused)
	if refused.Code != "not_acquired" {
		t.Errorf("second acquire: %+v", refused)
	}

	var d describeResult
	decodeOne(t, mustCtl(t, exitOK, "describe", "orders/1", addr, "-o", "json"), &d)
	if !d.Held || d.Token != got.Token || d.LeaseMs != 30000 || d.RemainingMs <= 0 || d.RemainingMs > 30000 || len(d.Owner) != 32 || d.Waiters != 0 {
		t.Errorf("describe %+v", d)
	}
	text := mustCtl(t, exitOK, addr, "describe", "orders/1")
	for _, want := range []string{"held: yes", "token: " + token, "lease: 30s", "waiters: 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("describe text lacks %q:\n%s", want, text)
		}
	}

	var rel releaseResult
	decodeOne(t, mustCtl(t, exitOK, addr, "release", "orders/1", token, "-o", "json"), &rel)
	if rel != (releaseResult{Key: "orders/1", Token: got.Token, Released: true, ClusterID: got.ClusterID}) {
		t.Errorf("release result %+v", rel)
	}
	var notHeld errorResult
	decodeOne(t, mustCtl(t, exitNotAcquired, addr, "release", "orders/1", token, "-o", "json"), &notHeld)
	if notHeld.Code != "not_held" {
		t.Errorf("second release: %+v", notHeld)
	}
	if text := mustCtl(t, exitOK, addr, "describe", "orders/1"); !strings.Contains(text, "held: no") {
		t.Errorf("describe after release:\n%s", text)
	}

	// Text acquire prints the token; tokens only grow.
	text = mustCtl(t, exitOK, "acquire", "orders/1", "--lease", "5s", addr)
	if !strings.Contains(text, "key: orders/1\n") || strings.Contains(text, "token: "+token+"\n") || !strings.Contains(text, "token: ") {
		t.Errorf("text acquire:\n%s", text)
	}

	var st statusResult
	decodeOne(t, mustCtl(t, exitOK, "status", addr, "-o", "json"), &st)
	if st.Role != "leader" || st.NodeID != "n1" || st.Leader != "n1" || st.Term == 0 || st.CommitIndex == 0 || len(st.Members) != 1 || st.Held != 1 || st.Version == "" {
		t.Errorf("status %+v", st)
	}
	if text := mustCtl(t, exitOK, "status", addr); !strings.Contains(text, "\nversion: "+st.Version+"\n") {
		t.Errorf("text status lacks the version %q:\n%s", st.Version, text)
	}
}

func TestEndToEndAuthentication(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ClientTokens = []string{"right"}
	}))
	addr := "--addr=" + c.Addr(0)
	for _, args := range [][]string{
		{"acquire", "k", "--lease", "5s"},
		{"status"},
	} {
		for _, token := range []string{"", "wrong"} {
			code, _, stderr := ctl(t, append(args, addr, "--token", token)...)
			if code != exitError || !strings.Contains(stderr, "authentication failed") {
				t.Errorf("%q with token %q: exit %d, stderr %q", args, token, code, stderr)
			}
		}
	}
	mustCtl(t, exitOK, "acquire", "k", "--lease", "5s", addr, "--token", "right")
	t.Setenv(tokenEnv, "right")
	mustCtl(t, exitOK, "describe", "k", addr)
}

func TestEndToEndThreeNodes(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.LeaderIndex(t)
	follower := (leader + 1) % 3
	all := "--addr=" + c.AddrList()
	viaFollower := "--addr=" + c.Addr(follower)

	// Clients reach the leader through a follower's redirect.
	var got acquireResult
	decodeOne(t, mustCtl(t, exitOK, viaFollower, "acquire", "k", "--lease", "30s", "-o", "json"), &got)
	mustCtl(t, exitNotAcquired, all, "acquire", "k", "--lease", "30s")
	mustCtl(t, exitOK, viaFollower, "release", "k", fmt.Sprint(got.Token))
	mustCtl(t, exitNotAcquired, all, "release", "k", fmt.Sprint(got.Token))

	// status asks the first address, whatever its role.
	for i := range 3 {
		var st statusResult
		decodeOne(t, mustCtl(t, exitOK, "status", "-o", "json", "--addr", c.Addr(i)+","+c.Addr(leader)), &st)
		if st.NodeID != c.Config(i).NodeID || len(st.Members) != 3 {
			t.Errorf("status of node %d: %+v", i, st)
		}
		if i == leader && st.Role != "leader" {
			t.Errorf("the leader reports role %q", st.Role)
		}
		if i != leader && st.Role == "leader" {
			t.Errorf("follower %d reports role leader", i)
		}
	}

	// A new server joins: started with join and an empty data directory,
	// then added through a follower (ticketctl follows it to the leader).
	cfg := testcluster.Config(t, "n4", filepath.Join(t.TempDir(), "n4"))
	cfg.Join = true
	n4, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n4.Close() })
	var added membersResult
	decodeOne(t, mustCtl(t, exitOK, viaFollower, "members", "add", "n4", cfg.RaftAddr, "-o", "json"), &added)
	if !added.OK || !slices.Contains(c.ClientAddrs(), added.Leader) {
		t.Errorf("members add: %+v", added)
	}
	// It joined as a learner and was promoted once it had caught up.
	if added.Voter == nil || !*added.Voter || added.LearnerIndex == 0 || added.PromotedIndex <= added.LearnerIndex {
		t.Errorf("members add did not report a learner promoted to voter: %+v", added)
	}
	var st statusResult
	out := mustCtl(t, exitOK, "status", "-o", "json", "--addr", c.Addr(leader))
	decodeOne(t, out, &st)
	// ticketctl's JSON names client_addr for every member, also for one
	// that never led (the wire leaves it out there).
	if n := strings.Count(out, `"client_addr"`); n != len(st.Members) {
		t.Errorf("status -o json names client_addr %d times for %d members: %s", n, len(st.Members), out)
	}
	if !slices.ContainsFunc(st.Members, func(m memberResult) bool {
		return m.ID == "n4" && m.Voter
	}) {
		t.Errorf("n4 is not a voter after members add: %+v", st.Members)
	}
	// members list asks the leader, which knows every member's progress.
	var list membersListResult
	decodeOne(t, mustCtl(t, exitOK, viaFollower, "members", "list", "-o", "json"), &list)
	if list.Role != "leader" || list.Leader != c.Addr(leader) || len(list.Members) != 4 {
		t.Errorf("members list: %+v", list)
	}
	for _, m := range list.Members {
		if !m.Voter || !m.Leader && (m.Reachable == nil || !*m.Reachable || m.MatchIndex == 0) {
			t.Errorf("members list, member %s: %+v", m.ID, m)
		}
	}
	if out := mustCtl(t, exitOK, viaFollower, "members", "list"); !strings.Contains(out, "SUFFRAGE") || !strings.Contains(out, "voter") {
		t.Errorf("members list:\n%s", out)
	}
	mustCtl(t, exitOK, all, "members", "remove", "n4")
	decodeOne(t, mustCtl(t, exitOK, "status", "-o", "json", "--addr", c.Addr(leader)), &st)
	if len(st.Members) != 3 {
		t.Errorf("members after remove: %+v", st.Members)
	}
	code, _, stderr := ctl(t, all, "members", "remove", "n9")
	if code != exitError || !strings.Contains(stderr, "n9") {
		t.Errorf("removing an unknown member: exit %d, stderr %q", code, stderr)
	}

	// Leadership moves to the follower named, and ticketctl finds it.
	target := c.Config(follower).NodeID
	var moved leaderResult
	decodeOne(t, mustCtl(t, exitOK, viaFollower, "leader", "transfer", target, "-o", "json"), &moved)
	if moved.Leader != target {
		t.Errorf("leader transfer: %+v, want %s", moved, target)
	}
	if now := c.LeaderIndex(t); c.Config(now).NodeID != target {
		t.Errorf("leader is %s, want %s", c.Config(now).NodeID, target)
	}
	mustCtl(t, exitOK, all, "acquire", "after-transfer", "--lease", "5s")
}

func TestEndToEndSnapshotSaveAndRestore(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.LeaderIndex(t)
	all := "--addr=" + c.AddrList()
	tokens := map[string]uint64{}
	for _, key := range []string{"a", "b", "c"} {
		var got acquireResult
		decodeOne(t, mustCtl(t, exitOK, all, "acquire", key, "--lease", "200s", "-o", "json"), &got)
		tokens[key] = got.Token
	}

	// Asked through a follower, the snapshot is taken on the leader.
	file := filepath.Join(t.TempDir(), "backup.snap")
	var saved snapshotResult
	decodeOne(t, mustCtl(t, exitOK, "snapshot", "save", file, "--addr", c.Addr((leader+1)%3), "-o", "json"), &saved)
	// (c.Addr(leader) unless an election intervened)
	if !slices.Contains(c.ClientAddrs(), saved.Node) || saved.Size == 0 || len(saved.SHA256) != 64 || saved.Index == 0 || saved.File != file {
		t.Errorf("snapshot result %+v", saved)
	}
	text := mustCtl(t, exitOK, "snapshot", "save", file, all)
	if !strings.Contains(text, "saved snapshot of") || !strings.Contains(text, file) {
		t.Errorf("text output %q", text)
	}

	// ticketd --restore FILE: a new single node with the same tickets.
	cfg := testcluster.Config(t, "r1", filepath.Join(t.TempDir(), "r1"))
	cfg.RestoreFile = file
	restored, err := server.New(cfg)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { restored.Close() })
	at := "--addr=" + restored.ClientAddr().String()
	for key, token := range tokens {
		var d describeResult
		decodeOne(t, mustCtl(t, exitOK, at, "describe", key, "-o", "json"), &d)
		if !d.Held || d.Token != token {
			t.Errorf("restored %s: %+v, want token %d", key, d, token)
		}
	}
	mustCtl(t, exitNotAcquired, at, "acquire", "a", "--lease", "5s")
	mustCtl(t, exitOK, at, "release", "a", fmt.Sprint(tokens["a"]))

	code, _, stderr := ctl(t, "snapshot", "save", filepath.Join(t.TempDir(), "missing", "b.snap"), all)
	if code != exitError || !strings.Contains(stderr, "snapshot save") {
		t.Errorf("save into a missing directory: exit %d, stderr %q", code, stderr)
	}
}

// Every command says which cluster it talked to, and --cluster-id makes it
// refuse the servers of any other.
func TestClusterIDPrintedAndRequired(t *testing.T) {
	c := testcluster.Start(t, 1)
	addr := "--addr=" + c.Addr(0)
	var st statusResult
	decodeOne(t, mustCtl(t, exitOK, "status", addr, "-o", "json"), &st)
	id := st.ClusterID
	if len(id) != 32 {
		t.Fatalf("status cluster_id %q, want 32 hex digits", id)
	}
	var got acquireResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "acquire", "k", "--lease", "30s"), &got)
	var d describeResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "describe", "k", "--cluster-id", id), &d)
	if got.ClusterID != id || d.ClusterID != id {
		t.Errorf("acquire cluster_id %q, describe cluster_id %q, want status's %s", got.ClusterID, d.ClusterID, id)
	}
	if text := mustCtl(t, exitOK, addr, "describe", "k"); !strings.Contains(text, "cluster_id: "+id+"\n") {
		t.Errorf("describe text does not name the cluster:\n%s", text)
	}
	if text := mustCtl(t, exitOK, addr, "status", "--cluster-id", id); !strings.Contains(text, "cluster_id: "+id+"\n") {
		t.Errorf("status text does not name the cluster:\n%s", text)
	}

	other := strings.Repeat("ab", 16)
	for _, args := range [][]string{{"status"}, {"acquire", "k2", "--lease", "30s"}, {"describe", "k"}} {
		code, stdout, stderr := ctl(t, append([]string{addr, "-o", "json", "--cluster-id", other}, args...)...)
		var e errorResult
		decodeOne(t, stdout, &e)
		if code != exitError || e.Code != "wrong_cluster" || !strings.Contains(stderr, id) || !strings.Contains(stderr, other) {
			t.Errorf("%v with --cluster-id of another cluster: exit %d, %+v, stderr %q; want exit 1, wrong_cluster, naming %s and %s", args, code, e, stderr, id, other)
		}
	}
	if code, _, stderr := ctl(t, addr, "status", "--cluster-id", "n1"); code != exitError || !strings.Contains(stderr, "32 hex digits") {
		t.Errorf("--cluster-id n1: exit %d, stderr %q", code, stderr)
	}
	var free describeResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "describe", "k2"), &free)
	if free.Held {
		t.Errorf("k2 was acquired through a refused server: %+v", free)
	}
}

// A server waiting to be added serves nothing; ticketctl says so, and what
// to run, instead of only that it knows no leader.
func TestWaitingServerIsNamed(t *testing.T) {
	cfg := testcluster.Config(t, "n7", filepath.Join(t.TempDir(), "n7"))
	cfg.Join = true
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	code, _, stderr := ctl(t, "--addr", cfg.ClientAddr, "--timeout", "2s", "acquire", "orders/1", "--wait", "0s", "--lease", "30s")
	if code != exitError || !strings.Contains(stderr, "(node n7) waits to be added to a cluster") || !strings.Contains(stderr, "members add n7") {
		t.Fatalf("exit %d, stderr %q: want a line naming the waiting server and members add", code, stderr)
	}
}
