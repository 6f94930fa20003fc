package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	ticketing "github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testdisk"
)

// F2 (docs/reliability.md): a leader whose data disk is full cannot append
// to its log. It must give leadership up and not take it back while its
// disk stays full, so that the servers that can write keep serving; once
// space returns it may lead again. Before the fix it stepped down and then
// won the next elections (its log was as long as anyone's), failing each
// time, so the cluster served nothing for as long as the disk was full.
func TestLeaderWithFullDiskStepsAsideForGood(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		testdisk.MountTmpfs(t, cfg.DataDir, 24<<20)
	}))
	l := c.LeaderIndex(t)
	full := c.Server(l)
	// Every server knows the cluster ID before the leader's disk fills: a
	// server that has not applied it yet is refused by the others (a
	// separate weakness of a young cluster, docs/reliability.md).
	testcluster.WaitFor(t, 30*time.Second, "not every server applied the cluster ID", func() bool {
		for i := range c.Len() {
			if c.Server(i).Status().ClusterID == "none" {
				return false
			}
		}
		return true
	})
	b, err := ticketing.Connect(c.AddrList(), ticketing.WithLogger(testcluster.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Count every time the full server becomes leader from now on.
	var regained atomic.Int32
	obsCh := make(chan raft.Observation, 64)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		s, ok := o.Data.(raft.RaftState)
		return ok && s == raft.Leader
	})
	full.Raft().RegisterObserver(obs)
	defer full.Raft().DeregisterObserver(obs)
	go func() {
		for range obsCh {
			regained.Add(1)
		}
	}()

	filler := testdisk.Fill(t, c.Config(l).DataDir)
	// Grants with large keys make the log grow, so its store needs new
	// space on every server; the full one fails at its first such write.
	key := func(i int) string { return fmt.Sprintf("%s/%d", strings.Repeat("k", 900), i) }
	grant := func(i int) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			tk, err := b.Acquire(ctx, key(i), 0, time.Minute, 0)
			cancel()
			if err == nil {
				tk.Close()
				return
			}
			// A grant in flight when leadership moved is indeterminate;
			// the key is then held (or not): use another one.
			if !errors.Is(err, ticketing.ErrIndeterminate) || attempt == 20 {
				t.Fatalf("acquire %d: %v", i, err)
			}
			i += 1_000_000
		}
	}
	const grants = 400
	for i := range grants {
		grant(i)
	}
	if full.Raft().State() == raft.Leader {
		t.Fatalf("the server with a full disk is still the leader after %d grants", grants)
	}
	if n := regained.Load(); n > 0 {
		t.Fatalf("the server with a full disk became leader again %d times while its disk was full", n)
	}
	// Space returns: it may lead again (a transfer to it succeeds).
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	cur := c.LeaderIndex(t)
	id := raft.ServerID(c.Config(l).NodeID)
	testcluster.WaitFor(t, 30*time.Second, "the server whose disk has space again did not take leadership", func() bool {
		if full.Raft().State() == raft.Leader {
			return true
		}
		if s := c.Server(cur); s != nil {
			s.Raft().LeadershipTransferToServer(id, raft.ServerAddress(c.Config(l).RaftAddr)).Error()
		}
		grant(grants + 1)
		return full.Raft().State() == raft.Leader
	})
}
