package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Coordination requests obey the same principals as tickets: a monitor may
// not use coordination nodes, a client only nodes whose path (without its
// leading '/') lies under one of its key prefixes, an admin every node.
func TestCoordinationAuthorization(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = authPrincipals()
	}))
	addr := c.Addr(0)
	as := func(token string) *coordClient {
		return &coordClient{t: t, r: testcluster.Hello(t, addr, token)}
	}
	orders, mon, ops := as(ordersToken), as(monitorToken), as(adminToken)

	orders.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/orders/locks")})
	orders.must(wire.CoordUnauthorized, wire.CoordCreateNode, wire.Coord{Path: []byte("/billing/locks")})
	orders.must(wire.CoordUnauthorized, wire.CoordDescribeNode, wire.Coord{Path: []byte("/billing/locks")})
	mon.must(wire.CoordUnauthorized, wire.CoordDescribeNode, wire.Coord{Path: []byte("/orders/locks")})
	ops.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/billing/locks")})
	// The refused requests left the connections usable.
	orders.must(wire.CoordSuccess, wire.CoordDescribeNode, wire.Coord{Path: []byte("/orders/locks")})
}

// A session's requests carry no path; they are checked against the node the
// session attached to with the principal's current rights, so a reload
// that takes a node away from a principal stops its open sessions there
// too, as it stops its ticket requests; removing the principal ends them.
func TestCoordinationAuthorizationAfterReload(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = authPrincipals()
	}))
	orders := &coordClient{t: t, r: testcluster.Hello(t, c.Addr(0), ordersToken)}
	orders.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/orders/locks")})
	orders.start("/orders/locks")
	orders.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("a"), Limit: 1})

	narrowed := authPrincipals()
	narrowed.Principals[0].KeyPrefixes = []string{"shared/"}
	if err := c.Server(0).SetAuth(nil, narrowed); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		op   uint8
		body wire.Coord
	}{
		{wire.CoordCreateSemaphore, wire.Coord{Name: []byte("b"), Limit: 1}},
		{wire.CoordAcquire, wire.Coord{Name: []byte("a"), Count: 1}},
		{wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("a")}},
	} {
		orders.must(wire.CoordUnauthorized, op.op, op.body)
	}
	// Release and stop stay allowed: they only give up what the session has.
	orders.must(wire.CoordSuccess, wire.CoordRelease, wire.Coord{Name: []byte("a")})

	// Removing the principal ends its connection (its token is no longer
	// configured), session requests and all.
	if err := c.Server(0).SetAuth(nil, server.AuthConfig{Principals: authPrincipals().Principals[1:]}); err != nil {
		t.Fatal(err)
	}
	expectFatal(t, orders.r, wire.CodeUnauthenticated)
}
