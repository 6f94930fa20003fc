package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestAuthReleaseOwner: U obeys the same rules as L: outside the prefixes
// it is refused (F key); with the holder's exact owner but from another
// principal it is refused (F owner) and the ticket stays; it does not
// withdraw another principal's queued acquire; the owner's principal and an
// admin may use it.
func TestAuthReleaseOwner(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = authPrincipals() }))
	addr := c.Addr(0)
	orders := testcluster.Hello(t, addr, ordersToken)
	shipping := testcluster.Hello(t, addr, sharedToken)
	billing := testcluster.Hello(t, addr, billingToken)
	ops := testcluster.Hello(t, addr, adminToken)

	bo := testcluster.Owner(1)
	expect(t, billing.Final(billing.Acquire("billing/1", bo, 0, 200)), wire.TypeGranted)
	forbidden(t, orders.Final(releaseOwner(t, orders, "billing/1", bo)), wire.ForbiddenKey)
	forbidden(t, orders.Final(releaseOwner(t, orders, "billing/never", bo)), wire.ForbiddenKey)

	so := testcluster.Owner(2)
	g := expect(t, orders.Final(orders.Acquire("shared/1", so, 0, 200)), wire.TypeGranted)
	forbidden(t, shipping.Final(releaseOwner(t, shipping, "shared/1", so)), wire.ForbiddenOwner)
	info := expect(t, shipping.Final(describeReq(shipping, "shared/1")), wire.TypeInfo)
	if info.Flags&1 == 0 || info.Token != g.Token {
		t.Fatalf("shared/1 after a refused U: %+v", info)
	}

	// orders queues behind shipping's ticket; shipping's U with orders'
	// owner withdraws nothing (and releases nothing: N).
	expect(t, orders.Final(orders.Release("shared/1", g.Token)), wire.TypeReleased)
	sg := expect(t, shipping.Final(shipping.Acquire("shared/1", testcluster.Owner(3), 0, 200)), wire.TypeGranted)
	wo := testcluster.Owner(4)
	wid := orders.Acquire("shared/1", wo, 30, 10)
	if f := orders.Recv(); f.Type != wire.TypeQueued || f.ID != wid {
		t.Fatalf("orders' acquire: got %s for %d, want Q", f.Type, f.ID)
	}
	expect(t, shipping.Final(releaseOwner(t, shipping, "shared/1", wo)), wire.TypeNotHeld)
	expect(t, shipping.Final(shipping.Release("shared/1", sg.Token)), wire.TypeReleased)
	og := expect(t, orders.Final(wid), wire.TypeGranted)

	// The owner's principal and an admin may release by owner.
	expect(t, orders.Final(releaseOwner(t, orders, "shared/1", wo)), wire.TypeReleased)
	_ = og
	expect(t, ops.Final(releaseOwner(t, ops, "billing/1", bo)), wire.TypeReleased)
}
