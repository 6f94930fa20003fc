package server_test

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/testcluster"
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
