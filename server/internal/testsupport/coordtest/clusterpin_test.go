package coordtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// The coordination SDK over a broker serves only the cluster the broker is
// pinned to: a server of another cluster is refused for it too.
func TestCoordinationServesOnlyThePinnedCluster(t *testing.T) {
	a, b := testcluster.Start(t, 1), testcluster.Start(t, 1)
	ctx := ctxT(t)
	probe, err := ticketing.Connect(a.AddrList())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if err := probe.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	idA := probe.ClusterID()

	pinned, err := newCoordClient(t, b.AddrList()+","+a.AddrList(), ticketing.WithClusterID(idA))
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if err := pinned.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatalf("create through a broker pinned to %s, with a server of another cluster listed first: %v", idA, err)
	}
	s, err := pinned.Session(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)

	wrong, err := newCoordClient(t, b.AddrList(), ticketing.WithClusterID(idA))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := wrong.CreateNode(short, "/n", coordination.NodeConfig{}); !errors.Is(err, coordination.ErrWrongCluster) || !strings.Contains(err.Error(), idA) {
		t.Fatalf("create through a broker pinned to %s with only a server of another cluster: %v, want ErrWrongCluster", idA, err)
	}
	if _, err := wrong.Session(short, "/n"); !errors.Is(err, coordination.ErrWrongCluster) {
		t.Fatalf("session through a broker pinned to %s with only a server of another cluster: %v, want ErrWrongCluster", idA, err)
	}
}
