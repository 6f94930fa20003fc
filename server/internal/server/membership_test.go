package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/cutproxy"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// memberEntry returns member id of a status answer (nil if absent).
func memberEntry(st map[string]any, id string) map[string]any {
	ms, _ := st["members"].([]any)
	for _, m := range ms {
		if e := m.(map[string]any); e["id"] == id {
			return e
		}
	}
	return nil
}

// TestMembersRemoveKeepsAReachableMajority: with one of three voters down,
// the leader refuses to remove a voter it hears from (the two left would
// include the silent one: no majority), and removes the silent one. Its
// status says which members it hears from.
func TestMembersRemoveKeepsAReachableMajority(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	down, up := (l+1)%3, (l+2)%3
	downID, upID := c.Config(down).NodeID, c.Config(up).NodeID
	c.Kill(down)
	testcluster.WaitFor(t, 20*time.Second, "the leader reporting "+downID+" unreachable", func() bool {
		_, st := admin(t, c.Addr(l), `{"op":"status"}`)
		m := memberEntry(st, downID)
		return m != nil && m["reachable"] == false
	})
	_, st := admin(t, c.Addr(l), `{"op":"status"}`)
	if m := memberEntry(st, upID); m == nil || m["reachable"] != true || m["match_index"] == nil {
		t.Fatalf("the leader's status of %s, which it hears from: %v", upID, m)
	}
	code, ans := admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.remove","id":%q}`, upID))
	if msg, _ := ans["error"].(string); code != 2 || !strings.Contains(msg, "members remove refused") || !strings.Contains(msg, downID) {
		t.Fatalf("removing %s while %s is down: %d %v; want refused, naming %s", upID, downID, code, ans, downID)
	}
	if _, st = admin(t, c.Addr(l), `{"op":"status"}`); memberEntry(st, upID) == nil {
		t.Fatalf("%s was removed although refused: %v", upID, st["members"])
	}
	if code, ans = admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.remove","id":%q}`, downID)); code != 0 {
		t.Fatalf("removing the silent %s: %d %v", downID, code, ans)
	}
	r := testcluster.Hello(t, c.Addr(l), "")
	expect(t, r.Final(r.Acquire("after-remove", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
}

// TestLearnerShownUntilPromoted: a server added while its Raft traffic
// cannot reach it stays a learner (status, console), and is promoted once
// it can catch up.
func TestLearnerShownUntilPromoted(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) { cfg.HTTP.Console = true }))
	l := c.LeaderIndex(t)
	cfg := testcluster.Config(t, "n4", filepath.Join(t.TempDir(), "n4"))
	cfg.Join = true
	s4, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s4.Close() })
	proxy := cutproxy.Start(t, s4.RaftAddr())
	proxy.HoldAfter(1) // the probe passes, Raft traffic is held
	code, ans := admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.add","id":"n4","raft_addr":%q}`, proxy.Addr()))
	if code != 0 || ans["learner"] != true || ans["learner_index"] == float64(0) || ans["promoted_index"] != float64(0) {
		t.Fatalf("members.add of a server that cannot catch up: %d %v; want a learner", code, ans)
	}
	_, st := admin(t, c.Addr(l), `{"op":"status"}`)
	if m := memberEntry(st, "n4"); m == nil || m["voter"] != false {
		t.Fatalf("n4 in the leader's status: %v; want a learner", m)
	}
	if code, ans = admin(t, c.Addr(l), `{"op":"leader.transfer","id":"n4"}`); code != 2 || !strings.Contains(fmt.Sprint(ans["error"]), "n4 is a learner") {
		t.Errorf("leader.transfer to a learner: %d %v; want refused", code, ans)
	}
	url := "http://" + c.Server(l).HTTPAddr().String() + "/console/cluster"
	_, body := consoleDo(t, http.DefaultClient, "GET", url, "")
	i := strings.Index(body, `<tr class="member" data-id="n4">`)
	if i < 0 {
		t.Fatalf("the console lists no n4:\n%s", body)
	}
	if row := body[i : i+strings.Index(body[i:], "</tr>")]; !strings.Contains(row, "<td>learner</td>") || !strings.Contains(row, "learner, log at 0 of") {
		t.Errorf("the console's row of n4 does not show a learner: %s", row)
	}
	proxy.Release()
	testcluster.WaitFor(t, 20*time.Second, "n4 promoted once it can catch up", func() bool {
		_, st := admin(t, c.Addr(l), `{"op":"status"}`)
		m := memberEntry(st, "n4")
		return m != nil && m["voter"] == true
	})
	// Asked again, members.add reports the voter and adds nothing.
	if code, ans = admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.add","id":"n4","raft_addr":%q}`, proxy.Addr())); code != 0 || ans["learner"] != false || ans["learner_index"] != float64(0) || ans["promoted_index"] == float64(0) {
		t.Fatalf("members.add of a voter: %d %v", code, ans)
	}
	// Removed, and added back under the same id with a new empty
	// directory that cannot catch up: a learner again, whatever this
	// leader promoted under that id before.
	if code, ans = admin(t, c.Addr(l), `{"op":"members.remove","id":"n4"}`); code != 0 {
		t.Fatalf("members.remove n4: %d %v", code, ans)
	}
	s4.Close()
	cfg = testcluster.Config(t, "n4", filepath.Join(t.TempDir(), "n4-again"))
	cfg.Join = true
	s4again, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s4again.Close() })
	proxy2 := cutproxy.Start(t, s4again.RaftAddr())
	proxy2.HoldAfter(1)
	code, ans = admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.add","id":"n4","raft_addr":%q}`, proxy2.Addr()))
	if code != 0 || ans["learner"] != true || ans["learner_index"] == float64(0) {
		t.Fatalf("members.add of n4 again, unreachable: %d %v; want a learner", code, ans)
	}
}
