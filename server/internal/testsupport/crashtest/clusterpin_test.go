package crashtest

// Clients pin their cluster: a server that founded a cluster of its own (a
// wiped member restarted as "new", a restore elsewhere) is in a client's
// address list beside the real cluster's servers. When those are down, the
// client must refuse it rather than be granted keys the real cluster holds,
// with tokens starting again from 1.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
)

func TestClientRefusesAServerOfAnotherCluster(t *testing.T) {
	a := startCluster(t, 3)
	a.leader()
	lone := newProc(t, "b1", t.TempDir()) // its own data directory: cluster B
	lone.start()
	lone.mustReady()
	waitFor(t, startTimeout, "the lone server serving with its cluster ID", func() bool {
		st, err := adminStatus(lone.client)
		return err == nil && st.ClusterID != "none" && serves(lone.client)
	}, lone)
	stA, err := adminStatus(a.procs[0].client)
	if err != nil {
		t.Fatal(err)
	}
	stB, err := adminStatus(lone.client)
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := stA.ClusterID, stB.ClusterID
	if idA == idB || idA == "none" {
		t.Fatalf("cluster IDs %s and %s: want two distinct IDs", idA, idB)
	}

	quiet := ticketing.WithLogger(slog.New(slog.DiscardHandler))
	b, err := ticketing.Connect(strings.Join(append(a.addrs(), lone.client), ","), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = b.Acquire(ctx, "orders/42", 0, 250*time.Second, 0)
	if err != nil {
		t.Fatalf("acquire from cluster A: %v", err)
	}
	if got := b.ClusterID(); got != idA {
		t.Fatalf("the client pinned cluster %q, want the cluster it reached first, %s", got, idA)
	}

	for _, p := range a.procs {
		p.kill()
	}
	// A call made before the broker saw its session end would be sent on it
	// (and be indeterminate): wait until it has no session.
	waitFor(t, startTimeout, "the client noticing that cluster A is gone", func() bool {
		cctx, ccancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer ccancel()
		return b.WaitReady(cctx) != nil
	})
	for _, key := range []string{"orders/42", "orders/43"} {
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := b.Acquire(cctx, key, 0, 30*time.Second, 0)
		ccancel()
		var wc *ticketing.WrongClusterError
		if !errors.Is(err, ticketing.ErrWrongCluster) || !errors.As(err, &wc) || wc.Pinned != idA || wc.Server != idB ||
			!strings.Contains(err.Error(), idA) || !strings.Contains(err.Error(), idB) {
			t.Fatalf("acquire %s with cluster A down and B up: %v; want ErrWrongCluster naming %s (pinned) and %s (the lone server's)", key, err, idA, idB)
		}
	}
	if st, err := adminStatus(lone.client); err != nil || st.LastToken != 0 || st.Held != 0 {
		t.Fatalf("the lone server granted something to the pinned client: last token %d, held %d (%v)", st.LastToken, st.Held, err)
	}

	// Given cluster A's ID, a new client refuses B from its first hello, at
	// once: every address it has belongs to another cluster.
	only, err := ticketing.Connect(lone.client, quiet, ticketing.WithClusterID(idA))
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if err := only.WaitReady(ctx); !errors.Is(err, ticketing.ErrWrongCluster) || !strings.Contains(err.Error(), idB) {
		t.Fatalf("WaitReady of a client pinned to %s with only the lone server listed: %v, want ErrWrongCluster", idA, err)
	}
	// An unpinned client is served by B, which is what the pin prevents.
	fresh, err := ticketing.Connect(lone.client, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if tk, err := fresh.Acquire(ctx, "orders/42", 0, 30*time.Second, 0); err != nil || tk.Token() == 0 || fresh.ClusterID() != idB {
		t.Fatalf("a fresh client of the lone server: %v, cluster %s; want a grant from cluster %s", err, fresh.ClusterID(), idB)
	}
}
