package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/testcluster"
	"github.com/ticketing-io/ticketing/internal/wire"
)

func TestSmokeAcquireRelease(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	id := r.Acquire("k", testcluster.Owner(1), 0, 30)
	g := r.Final(id)
	if g.Type != wire.TypeGranted || g.Token == 0 {
		t.Fatalf("acquire: got %+v", g)
	}
	id = r.Release("k", g.Token)
	if f := r.Final(id); f.Type != wire.TypeReleased {
		t.Fatalf("release: got %+v", f)
	}
}
