package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testcluster"
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
