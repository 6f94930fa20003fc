package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testcluster"
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
