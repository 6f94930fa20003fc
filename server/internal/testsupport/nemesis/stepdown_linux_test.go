package nemesis

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
)

// A leader cut off from its peers while its clients still reach it:
// it steps down when its leader lease runs out without a
// majority, and at that moment ends its clients' sessions, so the acquire in
// flight on it ends as indeterminate (never granted: nothing can commit),
// and the client follows the not-leader answer to the new leader and is
// served there while the old leader is still cut off.
func TestIsolatedLeaderStepsDownAndEndsItsSessions(t *testing.T) {
	if err := CheckPrivileges(); err != nil {
		t.Fatalf("%v", err)
	}
	dir, err := os.MkdirTemp("", "ticketing-stepdown-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("data directories and server logs kept in %s", dir)
		}
	})
	bin, err := BuildTicketd(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, bin, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Nodes[l]
	// The leader's address first: the client connects there and stays
	// until the leader itself ends the session.
	addrs := []string{old.Client.Addr()}
	for _, j := range others(c, l) {
		addrs = append(addrs, c.Nodes[j].Client.Addr())
	}
	b, err := ticketing.Connect(strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tk, err := b.Acquire(ctx, "before", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatalf("no grant before the partition: %v", err)
	}
	tk.Release(ctx)

	n := &nemesis{c: c, h: NewHistory()}
	if err := n.isolate(l, false); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// In flight on the isolated leader: it can commit nothing.
	_, err = b.Acquire(ctx, "during", 5*time.Second, 30*time.Second, 0)
	ended := time.Since(cut)
	if err == nil {
		t.Fatal("an isolated leader granted a ticket")
	}
	if !errors.Is(err, ticketing.ErrIndeterminate) || !strings.Contains(err.Error(), "stopped being the leader") {
		t.Fatalf("the acquire in flight on the isolated leader ended with %v, want indeterminate because it stopped being the leader", err)
	}
	st, serr := old.Status(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	if st.Role == "leader" {
		t.Fatalf("the isolated server still says it leads after ending its sessions: %+v", st)
	}
	// The client moves on to the new leader (reachable: only the servers
	// are cut apart) and is served there.
	tk, err = b.Acquire(ctx, "after", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatalf("no grant from the new leader: %v", err)
	}
	tk.Release(ctx)
	served := time.Since(cut)
	if st, _ := old.Status(ctx); st.Role == "leader" {
		t.Fatalf("the isolated server leads again while cut off: %+v", st)
	}
	if !strings.Contains(old.LogTail(400), "failed to contact quorum of nodes, stepping down") {
		t.Errorf("the isolated leader did not step down for its lease:\n%s", old.LogTail(40))
	}
	// Figures for docs/reliability.md, not checked (machine speed).
	t.Logf("partition -> in-flight acquire ended: %v; -> served by the new leader: %v", ended.Round(time.Millisecond), served.Round(time.Millisecond))
	n.healAll()
}

// others lists the indexes of c's servers other than i.
func others(c *Cluster, i int) []int {
	var o []int
	for j := range c.Nodes {
		if j != i {
			o = append(o, j)
		}
	}
	return o
}
