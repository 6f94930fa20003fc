package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// quotaPrincipals: orders and shipping with quotas, billing without (as
// before quotas), all three on the "shared/" prefix too.
func quotaPrincipals(orders, shipping server.Quota) server.AuthConfig {
	return server.AuthConfig{Principals: []server.PrincipalConfig{
		{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/", "shared/"}, TokenSHA256: []string{server.HashToken(ordersToken)}, Quota: orders},
		{Name: "billing", Role: server.RoleClient, KeyPrefixes: []string{"billing/", "shared/"}, TokenSHA256: []string{server.HashToken(billingToken)}},
		{Name: "shipping", Role: server.RoleClient, KeyPrefixes: []string{"shipping/"}, TokenSHA256: []string{server.HashToken(sharedToken)}, Quota: shipping},
	}}
}

func capacity(t *testing.T, f wire.Frame, reason uint8) {
	t.Helper()
	if f.Type != wire.TypeCapacity || f.Reason != reason {
		t.Fatalf("got %s (reason %d, code %d %q), want B reason %d", f.Type, f.Reason, f.Code, f.Text, reason)
	}
}

// helloCapacity expects the hello with token to be answered B id 0 reason.
func helloCapacity(t *testing.T, addr, token string, reason uint8) {
	t.Helper()
	r := testcluster.DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(token)})
	f := r.Recv()
	capacity(t, f, reason)
	if f.ID != 0 {
		t.Fatalf("B at the hello has id %d, want 0", f.ID)
	}
}

// TestPrincipalQuotas: against a real server, each quota of a principal
// refuses that principal's excess with the capacity answer naming the
// quota, while a principal without quotas goes on as before; the usage,
// quotas and refusals are metrics per configured principal; a reload
// (what SIGHUP does) raises a quota at once.
func TestPrincipalQuotas(t *testing.T) {
	orders := server.Quota{Connections: 3, HeldTickets: 2, Waiters: 1, CoordinationSessions: 1}
	shipping := server.Quota{InFlight: 2}
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = quotaPrincipals(orders, shipping) }))
	srv, addr := c.Server(0), c.Addr(0)

	// Connections: a fourth of orders is refused at the hello; billing has no quota.
	o1, o2, o3 := testcluster.Hello(t, addr, ordersToken), testcluster.Hello(t, addr, ordersToken), testcluster.Hello(t, addr, ordersToken)
	helloCapacity(t, addr, ordersToken, wire.CapacityPrincipalConnections)
	b1 := testcluster.Hello(t, addr, billingToken)
	for range 4 {
		testcluster.Hello(t, addr, billingToken)
	}

	// Held tickets: two, over all its connections.
	expect(t, o1.Final(o1.Acquire("orders/1", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	expect(t, o2.Final(o2.Acquire("orders/2", testcluster.Owner(2), 0, 60)), wire.TypeGranted)
	capacity(t, o1.Final(o1.Acquire("orders/3", testcluster.Owner(3), 0, 60)), wire.CapacityPrincipalHeld)
	for i := range 4 {
		expect(t, b1.Final(b1.Acquire("billing/"+string(rune('a'+i)), testcluster.Owner(10+i), 0, 60)), wire.TypeGranted)
	}

	// Waiters: one queued acquire; and a queued acquire that reaches the
	// head of its queue while orders holds its quota is answered B 7
	// there, not granted.
	expect(t, b1.Final(b1.Acquire("shared/1", testcluster.Owner(20), 0, 60)), wire.TypeGranted)
	queued := o3.Acquire("shared/1", testcluster.Owner(4), 30, 60)
	if f := o3.Recv(); f.Type != wire.TypeQueued || f.ID != queued {
		t.Fatalf("orders' acquire of a taken key: %s, want Q", f.Type)
	}
	capacity(t, o2.Final(o2.Acquire("orders/1", testcluster.Owner(5), 30, 60)), wire.CapacityPrincipalWaiters)
	expect(t, b1.Final(b1.Release("shared/1", tokenOf(t, b1, "shared/1"))), wire.TypeReleased)
	capacity(t, o3.Final(queued), wire.CapacityPrincipalHeld)

	// In flight: shipping's queued acquires count, over its connections.
	s1, s2 := testcluster.Hello(t, addr, sharedToken), testcluster.Hello(t, addr, sharedToken)
	expect(t, s1.Final(s1.Acquire("shipping/1", testcluster.Owner(30), 0, 60)), wire.TypeGranted)
	for i, r := range []*testcluster.Raw{s1, s2} {
		id := r.Acquire("shipping/1", testcluster.Owner(31+i), 30, 60)
		if f := r.Recv(); f.Type != wire.TypeQueued || f.ID != id {
			t.Fatalf("shipping's waiter %d: %s, want Q", i, f.Type)
		}
	}
	capacity(t, s2.Final(describeReq(s2, "shipping/1")), wire.CapacityPrincipalInFlight)
	expect(t, s2.Final(s2.Release("shipping/9", 1)), wire.TypeNotHeld) // a release is never refused for it

	// Coordination sessions: one attached per principal.
	oc := &coordClient{t: t, r: o1}
	oc.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/orders/locks")})
	oc.start("/orders/locks")
	oc2 := &coordClient{t: t, r: o2}
	if st, b := oc2.attach("/orders/locks", 0, 1, "k", 30000); st != wire.CoordLimitExceeded || !strings.Contains(string(b.Message), "coordination_sessions") {
		t.Fatalf("a second session of orders: %s %q, want LIMIT_EXCEEDED naming the quota", wire.CoordStatusName(st), b.Message)
	}

	m := scrape(t, srv.HTTPAddr().String())
	for series, want := range map[string]float64{
		`ticketing_principal_usage{principal="orders",quota="connections"}`:                         3,
		`ticketing_principal_usage{principal="orders",quota="held_tickets"}`:                        2,
		`ticketing_principal_usage{principal="orders",quota="coordination_sessions"}`:               1,
		`ticketing_principal_usage{principal="shipping",quota="waiters"}`:                           2,
		`ticketing_principal_usage{principal="shipping",quota="in_flight"}`:                         2,
		`ticketing_principal_usage{principal="billing",quota="held_tickets"}`:                       4,
		`ticketing_principal_quota{principal="orders",quota="held_tickets"}`:                        2,
		`ticketing_principal_quota{principal="billing",quota="held_tickets"}`:                       0,
		`ticketing_principal_quota_rejects_total{principal="orders",quota="connections"}`:           1,
		`ticketing_principal_quota_rejects_total{principal="orders",quota="held_tickets"}`:          2,
		`ticketing_principal_quota_rejects_total{principal="orders",quota="waiters"}`:               1,
		`ticketing_principal_quota_rejects_total{principal="orders",quota="coordination_sessions"}`: 1,
		`ticketing_principal_quota_rejects_total{principal="shipping",quota="in_flight"}`:           1,
		`ticketing_principal_quota_rejects_total{principal="billing",quota="held_tickets"}`:         0,
		`ticketing_capacity_rejects_total{limit="principal_held_tickets"}`:                          2,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}

	// A reload raises the quotas at once; a lowered one ends nothing held.
	orders.HeldTickets, orders.Connections = 3, 4
	if err := srv.SetAuth(nil, quotaPrincipals(orders, server.Quota{InFlight: 1})); err != nil {
		t.Fatal(err)
	}
	expect(t, o1.Final(o1.Acquire("orders/3", testcluster.Owner(6), 0, 60)), wire.TypeGranted)
	testcluster.Hello(t, addr, ordersToken)
	capacity(t, s2.Final(describeReq(s2, "shipping/1")), wire.CapacityPrincipalInFlight)

	// Connections that end with requests unanswered give their share back.
	s2.Conn.Close()
	oc2.r.Conn.Close()
	oc.r.Conn.Close()
	testcluster.WaitFor(t, 10*time.Second, "the closed connections' usage returned", func() bool {
		m := scrape(t, srv.HTTPAddr().String())
		return m[`ticketing_principal_usage{principal="shipping",quota="in_flight"}`] == 1 &&
			m[`ticketing_principal_usage{principal="shipping",quota="waiters"}`] == 1 &&
			m[`ticketing_principal_usage{principal="orders",quota="coordination_sessions"}`] == 0 &&
			m[`ticketing_principal_usage{principal="orders",quota="connections"}`] == 2
	})
}

// tokenOf describes key on r and returns its holder's token.
func tokenOf(t *testing.T, r *testcluster.Raw, key string) uint64 {
	t.Helper()
	return expect(t, r.Final(describeReq(r, key)), wire.TypeInfo).Token
}

// TestPrincipalRequestRate: a principal over its request rate is answered B
// reason 10 (the connection stays open); another principal is not.
func TestPrincipalRequestRate(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		// A burst of 5 at 0.01 per second: the refill is negligible during the test.
		cfg.Auth = quotaPrincipals(server.Quota{RequestsPerSecond: 0.01, RequestBurst: 5}, server.Quota{})
	}))
	addr := c.Addr(0)
	o, b := testcluster.Hello(t, addr, ordersToken), testcluster.Hello(t, addr, billingToken)
	for range 5 {
		expect(t, o.Final(describeReq(o, "orders/1")), wire.TypeInfo)
	}
	capacity(t, o.Final(describeReq(o, "orders/1")), wire.CapacityPrincipalRate)
	capacity(t, o.Final(o.Acquire("orders/1", testcluster.Owner(1), 0, 10)), wire.CapacityPrincipalRate)
	expect(t, o.Final(o.Release("orders/1", 12345)), wire.TypeNotHeld) // releases are never refused for the rate
	for range 20 {
		expect(t, b.Final(describeReq(b, "billing/1")), wire.TypeInfo)
	}
	m := scrape(t, c.Server(0).HTTPAddr().String())
	if got := m[`ticketing_principal_quota_rejects_total{principal="orders",quota="requests_per_second"}`]; got != 2 {
		t.Fatalf("rate refusals counted: %v, want 2", got)
	}
}

// TestQuotaValidation: a negative quota, or a burst without a rate, is named.
func TestQuotaValidation(t *testing.T) {
	for _, tc := range []struct {
		q    server.Quota
		want string
	}{
		{server.Quota{HeldTickets: -1}, "quota.held_tickets is -1"},
		{server.Quota{RequestsPerSecond: -2}, "quota.requests_per_second"},
		{server.Quota{RequestBurst: 3}, "request_burst needs quota.requests_per_second"},
	} {
		cfg := server.DefaultConfig()
		cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
		cfg.Auth = quotaPrincipals(tc.q, server.Quota{})
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("quota %+v: got %v, want an error containing %q", tc.q, err, tc.want)
		}
	}
}

// TestHeldQuotaSurvivesFailover: the held-tickets quota is counted from the
// replicated holds, so a new leader refuses what the old one would have:
// orders at its quota of two stays at it after the leader dies, and one
// release gives it room again.
func TestHeldQuotaSurvivesFailover(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = quotaPrincipals(server.Quota{HeldTickets: 2}, server.Quota{})
	}))
	old := c.LeaderIndex(t)
	orders := testcluster.Hello(t, c.Addr(old), ordersToken)
	g := expect(t, orders.Final(orders.Acquire("orders/1", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	expect(t, orders.Final(orders.Acquire("orders/2", testcluster.Owner(2), 0, 200)), wire.TypeGranted)
	capacity(t, orders.Final(orders.Acquire("orders/3", testcluster.Owner(3), 0, 200)), wire.CapacityPrincipalHeld)
	want := c.Server(old).Raft().AppliedIndex()
	testcluster.WaitFor(t, 10*time.Second, "every server applied the grants", func() bool {
		for i := range 3 {
			if c.Server(i).Raft().AppliedIndex() < want {
				return false
			}
		}
		return true
	})
	c.Kill(old)
	leader := c.LeaderIndex(t)
	orders = testcluster.Hello(t, c.Addr(leader), ordersToken)
	capacity(t, orders.Final(orders.Acquire("orders/3", testcluster.Owner(3), 0, 200)), wire.CapacityPrincipalHeld)
	billing := testcluster.Hello(t, c.Addr(leader), billingToken)
	expect(t, billing.Final(billing.Acquire("billing/1", testcluster.Owner(4), 0, 200)), wire.TypeGranted)
	expect(t, orders.Final(orders.Release("orders/1", g.Token)), wire.TypeReleased)
	expect(t, orders.Final(orders.Acquire("orders/3", testcluster.Owner(3), 0, 200)), wire.TypeGranted)
}
