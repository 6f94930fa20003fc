package server_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// logBuf collects a server's log records for the audit checks.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the log lines containing every one of parts.
func (l *logBuf) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok && line != "" {
			out = append(out, line)
		}
	}
	return out
}

const (
	ordersToken  = "orders-token-1"
	billingToken = "billing-token-1"
	sharedToken  = "shared-token-1"
	adminToken   = "operator-token-1"
	monitorToken = "monitor-token-1"
	legacyToken  = "legacy-token-1"
)

// authPrincipals: two applications on their own prefixes, a third sharing
// orders' "shared/" prefix, an operator and a monitor.
func authPrincipals() server.AuthConfig {
	return server.AuthConfig{Principals: []server.PrincipalConfig{
		{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/", "shared/"}, TokenSHA256: []string{server.HashToken(ordersToken)}},
		{Name: "billing", Role: server.RoleClient, KeyPrefixes: []string{"billing/"}, TokenSHA256: []string{strings.ToUpper(server.HashToken(billingToken))}},
		{Name: "shipping", Role: server.RoleClient, KeyPrefixes: []string{"shared/"}, TokenSHA256: []string{server.HashToken(sharedToken)}},
		{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken(adminToken)}},
		{Name: "grafana", Role: server.RoleMonitor, TokenSHA256: []string{server.HashToken(monitorToken)}},
	}}
}

func adminReq(r *testcluster.Raw, body string) uint32 {
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(body)})
	return id
}

func describeReq(r *testcluster.Raw, key string) uint32 {
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: id, Key: []byte(key)})
	return id
}

func forbidden(t *testing.T, f wire.Frame, reason uint8) {
	t.Helper()
	if f.Type != wire.TypeForbidden || f.Reason != reason {
		t.Fatalf("got %s %+v (text %q), want F reason %d", f.Type, f, f.Text, reason)
	}
}

// adminFirst reads an admin request's first answer (a snapshot streams
// chunks before its final V; a refusal is one F).
func adminFirst(t *testing.T, r *testcluster.Raw, id uint32) wire.Frame {
	t.Helper()
	f := r.Recv()
	if f.ID != id {
		t.Fatalf("answer for request %d, want %d: %s", f.ID, id, f.Type)
	}
	return f
}

// TestAuthorization: against a real server with principals: an application
// token cannot run admin operations or touch keys outside its prefixes (the
// same refusal whether the key exists or not), cannot release another
// principal's ticket even with its exact token; an admin can; a monitor gets
// status only. Every refusal leaves the connection open, is audited with
// the principal's name (never the token) and counted.
func TestAuthorization(t *testing.T) {
	logs := &logBuf{}
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = authPrincipals()
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	addr := c.Addr(0)
	orders := testcluster.Hello(t, addr, ordersToken)
	billing := testcluster.Hello(t, addr, billingToken)
	shipping := testcluster.Hello(t, addr, sharedToken)
	ops := testcluster.Hello(t, addr, adminToken)
	mon := testcluster.Hello(t, addr, monitorToken)

	// Inside its prefixes an application works as usual.
	og := expect(t, orders.Final(orders.Acquire("orders/1", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	bg := expect(t, billing.Final(billing.Acquire("billing/1", testcluster.Owner(2), 0, 200)), wire.TypeGranted)

	// Outside: F key, for a held key and for one that never existed alike.
	forbidden(t, orders.Final(orders.Acquire("billing/1", testcluster.Owner(3), 0, 10)), wire.ForbiddenKey)
	forbidden(t, orders.Final(orders.Acquire("billing/never", testcluster.Owner(4), 0, 10)), wire.ForbiddenKey)
	forbidden(t, orders.Final(describeReq(orders, "billing/1")), wire.ForbiddenKey)
	forbidden(t, orders.Final(describeReq(orders, "billing/never")), wire.ForbiddenKey)
	forbidden(t, orders.Final(orders.Release("billing/1", bg.Token)), wire.ForbiddenKey)
	forbidden(t, orders.Final(orders.Release("ordersX", bg.Token)), wire.ForbiddenKey)

	// Admin operations: F role for an application, whatever the op.
	for _, op := range []string{`{"op":"status"}`, `{"op":"members.remove","id":"n9"}`, `{"op":"leader.transfer"}`,
		`{"op":"snapshot.save"}`, `{"op":"members.add","id":"n9","raft_addr":"127.0.0.1:1"}`, `not json`} {
		forbidden(t, adminFirst(t, orders, adminReq(orders, op)), wire.ForbiddenRole)
	}

	// Same prefix, other principal: the exact token does not release it.
	sg := expect(t, orders.Final(orders.Acquire("shared/1", testcluster.Owner(5), 0, 200)), wire.TypeGranted)
	forbidden(t, shipping.Final(shipping.Release("shared/1", sg.Token)), wire.ForbiddenOwner)
	// A stale token of that key is simply not held (no owner check needed).
	expect(t, shipping.Final(shipping.Release("shared/1", sg.Token+100)), wire.TypeNotHeld)
	// Nor does its owner, read from a describe, hand the grant out.
	info := expect(t, shipping.Final(describeReq(shipping, "shared/1")), wire.TypeInfo)
	if info.Flags&1 == 0 || info.Token != sg.Token {
		t.Fatalf("shared/1 not held after a forbidden release: %+v", info)
	}
	expect(t, shipping.Final(shipping.Acquire("shared/1", info.Owner, 0, 10)), wire.TypeNotAcquired)
	forbidden(t, shipping.Final(shipping.Release("shared/1", sg.Token)), wire.ForbiddenOwner)

	// A refusal is a final answer: its request id is free again at once.
	reused := orders.ID()
	orders.Send(&wire.Frame{Type: wire.TypeDescribe, ID: reused, Key: []byte("billing/1")})
	forbidden(t, orders.Final(reused), wire.ForbiddenKey)
	orders.Send(&wire.Frame{Type: wire.TypeDescribe, ID: reused, Key: []byte("orders/1")})
	expect(t, orders.Final(reused), wire.TypeInfo)

	// Every connection is still open and working after its refusals.
	expect(t, orders.Final(orders.Release("orders/1", og.Token)), wire.TypeReleased)
	expect(t, orders.Final(orders.Release("shared/1", sg.Token)), wire.TypeReleased)
	sg2 := expect(t, shipping.Final(shipping.Acquire("shared/1", testcluster.Owner(6), 0, 200)), wire.TypeGranted)

	// The admin may release anyone's ticket and run admin operations.
	expect(t, ops.Final(ops.Release("shared/1", sg2.Token)), wire.TypeReleased)
	expect(t, ops.Final(ops.Release("billing/1", bg.Token)), wire.TypeReleased)
	if f := adminFirst(t, ops, adminReq(ops, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
		t.Fatalf("admin status: %s code %d %s", f.Type, f.Code, f.Text)
	}
	if f := adminFirst(t, ops, adminReq(ops, `{"op":"members.remove","id":"n9"}`)); f.Type != wire.TypeAdminReply || f.Code != 2 {
		t.Fatalf("admin members.remove of a non-member: %s code %d %s", f.Type, f.Code, f.Text)
	}

	// A monitor: status, nothing else.
	if f := adminFirst(t, mon, adminReq(mon, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
		t.Fatalf("monitor status: %s code %d %s", f.Type, f.Code, f.Text)
	}
	forbidden(t, adminFirst(t, mon, adminReq(mon, `{"op":"leader.transfer"}`)), wire.ForbiddenRole)
	forbidden(t, mon.Final(mon.Acquire("orders/2", testcluster.Owner(7), 0, 10)), wire.ForbiddenRole)
	forbidden(t, mon.Final(describeReq(mon, "orders/2")), wire.ForbiddenRole)

	// Audit records: principal name, op, outcome; never a token.
	for _, want := range [][]string{
		{"msg=audit", "principal=orders", "op=acquire", "outcome=denied", "reason=key", "key=billing/never"},
		{"msg=audit", "principal=orders", "op=describe", "outcome=denied", "reason=key"},
		{"msg=audit", "principal=orders", `op="admin members.remove"`, "outcome=denied", "reason=role"},
		{"msg=audit", "principal=shipping", "op=release", "outcome=denied", "reason=owner", "key=shared/1"},
		{"msg=audit", "principal=ops", `op="admin status"`, "outcome=ok"},
		{"msg=audit", "principal=ops", `op="admin members.remove"`, "outcome=failed", "member=n9"},
		{"msg=audit", "principal=grafana", `op="admin status"`, "outcome=ok"},
		{"msg=audit", "principal=grafana", "op=acquire", "reason=role"},
	} {
		if len(logs.lines(want...)) == 0 {
			t.Errorf("no audit record with %q in the log:\n%s", want, logs.String())
		}
	}
	for _, tok := range []string{ordersToken, billingToken, sharedToken, adminToken, monitorToken} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the log contains the token %q", tok)
		}
	}

	// Counted.
	m := scrape(t, c.Server(0).HTTPAddr().String())
	for name, atLeast := range map[string]float64{
		`ticketing_authz_refusals_total{op="acquire",reason="key"}`:                2,
		`ticketing_authz_refusals_total{op="describe",reason="key"}`:               2,
		`ticketing_authz_refusals_total{op="release",reason="key"}`:                2,
		`ticketing_authz_refusals_total{op="release",reason="owner"}`:              2,
		`ticketing_authz_refusals_total{op="acquire",reason="role"}`:               1,
		`ticketing_authz_refusals_total{op="admin status",reason="role"}`:          1,
		`ticketing_admin_ops_total{op="status",outcome="denied"}`:                  1,
		`ticketing_admin_ops_total{op="snapshot.save",outcome="denied"}`:           1,
		`ticketing_admin_ops_total{op="other",outcome="denied"}`:                   1,
		`ticketing_admin_ops_total{op="status",outcome="ok"}`:                      2,
		`ticketing_admin_ops_total{op="members.remove",outcome="failed"}`:          1,
		`ticketing_admin_ops_total{op="leader.transfer",outcome="denied"}`:         2,
		`ticketing_authz_refusals_total{op="admin leader.transfer",reason="role"}`: 2,
	} {
		if m[name] < atLeast {
			t.Errorf("%s = %v, want at least %v", name, m[name], atLeast)
		}
	}
}

// TestAuthUnauthenticated: a token no principal has, or none at all, is
// refused at the hello (E 5), as before.
func TestAuthUnauthenticated(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = authPrincipals() }))
	for _, tok := range []string{"", "orders-token-2", server.HashToken(ordersToken)} {
		r := testcluster.DialRaw(t, c.Addr(0))
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(tok)})
		if f := r.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) {
			t.Fatalf("token %q: got %s code %d %q, want E 5", tok, f.Type, f.Code, f.Text)
		}
	}
}

// TestAuthLegacyClientTokens: a configuration with client_tokens only
// behaves as before: every token may use every key, release any ticket by
// its token and run admin operations.
func TestAuthLegacyClientTokens(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ClientTokens = []string{legacyToken, "legacy-token-2"}
	}))
	a := testcluster.Hello(t, c.Addr(0), legacyToken)
	b := testcluster.Hello(t, c.Addr(0), "legacy-token-2")
	g := expect(t, a.Final(a.Acquire("anything/at/all", testcluster.Owner(1), 0, 100)), wire.TypeGranted)
	expect(t, b.Final(b.Release("anything/at/all", g.Token)), wire.TypeReleased)
	if f := adminFirst(t, b, adminReq(b, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
		t.Fatalf("legacy token status: %s code %d %s", f.Type, f.Code, f.Text)
	}
	if f := adminFirst(t, b, adminReq(b, `{"op":"members.remove","id":"n9"}`)); f.Type != wire.TypeAdminReply || f.Code != 2 {
		t.Fatalf("legacy token members.remove: %s code %d %s (want the op to run and fail: no such member)", f.Type, f.Code, f.Text)
	}
}

// TestAuthLegacyWithPrincipals: once principals are configured,
// client_tokens mean "client on every key" and lose admin rights; their
// holds are theirs (another principal cannot release them).
func TestAuthLegacyWithPrincipals(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ClientTokens = []string{legacyToken}
		cfg.Auth = authPrincipals()
	}))
	l := testcluster.Hello(t, c.Addr(0), legacyToken)
	o := testcluster.Hello(t, c.Addr(0), ordersToken)
	g := expect(t, l.Final(l.Acquire("orders/9", testcluster.Owner(1), 0, 100)), wire.TypeGranted)
	expect(t, l.Final(l.Acquire("zzz", testcluster.Owner(2), 0, 100)), wire.TypeGranted)
	forbidden(t, o.Final(o.Release("orders/9", g.Token)), wire.ForbiddenOwner)
	forbidden(t, adminFirst(t, l, adminReq(l, `{"op":"status"}`)), wire.ForbiddenRole)
	expect(t, l.Final(l.Release("orders/9", g.Token)), wire.TypeReleased)
}

// TestAuthMTLSIdentity: with mutual TLS a client certificate names its
// principal by subject CN, URI SAN or DNS SAN as configured; a hello token,
// when given, takes precedence; an unlisted certificate without a token is
// refused (E 5).
func TestAuthMTLSIdentity(t *testing.T) {
	for _, mode := range []string{"cn", "uri", "dns"} {
		t.Run(mode, func(t *testing.T) {
			ca := testcerts.New(t)
			srvCert, srvKey := ca.Issue(t, "server")
			ident := map[string]string{"cn": "orders-app", "uri": "spiffe://example.org/orders", "dns": "orders.apps.internal"}[mode]
			c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
				cfg.TLS = server.TLSFiles{CertFile: srvCert, KeyFile: srvKey, CAFile: ca.CAFile}
				cfg.Auth = server.AuthConfig{CertIdentity: mode, Principals: []server.PrincipalConfig{
					{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/"}, Certificates: []string{ident}},
					{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken(adminToken)}},
				}}
			}))
			u, _ := url.Parse("spiffe://example.org/orders")
			certFile, keyFile := ca.IssueSAN(t, "orders-app", []string{"orders.apps.internal"}, []*url.URL{u})
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			dial := func(cert tls.Certificate, token string) *testcluster.Raw {
				r := testcluster.DialRawTLS(t, c.Addr(0), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}})
				r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(token)})
				return r
			}
			r := dial(cert, "")
			expect(t, r.Recv(), wire.TypeReady)
			expect(t, r.Final(r.Acquire("orders/1", testcluster.Owner(1), 0, 10)), wire.TypeGranted)
			forbidden(t, r.Final(r.Acquire("billing/1", testcluster.Owner(2), 0, 10)), wire.ForbiddenKey)
			forbidden(t, adminFirst(t, r, adminReq(r, `{"op":"status"}`)), wire.ForbiddenRole)

			// The admin token on the same certificate: the token names the principal.
			a := dial(cert, adminToken)
			expect(t, a.Recv(), wire.TypeReady)
			if f := adminFirst(t, a, adminReq(a, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
				t.Fatalf("admin token over mTLS: %s code %d", f.Type, f.Code)
			}

			// A certificate of the same CA that names nobody.
			x := dial(ca.TLSCert(t, "stranger"), "")
			if f := x.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) {
				t.Fatalf("unlisted certificate: got %s code %d %q, want E 5", f.Type, f.Code, f.Text)
			}

			// The identity removed from the principal: its open connection
			// ends at the reload; the admin's (by token) goes on.
			if err := c.Server(0).SetAuth(nil, server.AuthConfig{CertIdentity: mode, Principals: []server.PrincipalConfig{
				{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/"}, Certificates: []string{"another-" + ident}},
				{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken(adminToken)}},
			}}); err != nil {
				t.Fatal(err)
			}
			if f := r.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) || !strings.Contains(string(f.Text), "revoked") {
				t.Fatalf("connection of a removed certificate identity: got %s code %d %q, want E 5 (revoked)", f.Type, f.Code, f.Text)
			}
			if f := adminFirst(t, a, adminReq(a, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
				t.Fatalf("admin token after the reload: %s code %d", f.Type, f.Code)
			}
		})
	}
}

// TestAuthReload: SetAuth (what SIGHUP does) rotates a token without a
// restart: the old token is refused at the next hello, the new one works;
// open connections with the rotated token or of a removed principal are
// ended with E 5 and audited, those whose token stays keep working with
// their principal's new rights; invalid settings are refused and change
// nothing.
func TestAuthReload(t *testing.T) {
	logs := &logBuf{}
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = authPrincipals()
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	srv, addr := c.Server(0), c.Addr(0)
	billing := testcluster.Hello(t, addr, billingToken)
	expect(t, billing.Final(billing.Acquire("billing/1", testcluster.Owner(1), 0, 10)), wire.TypeGranted)
	oldOrders := testcluster.Hello(t, addr, ordersToken)
	shipping := testcluster.Hello(t, addr, sharedToken)

	next := authPrincipals()
	next.Principals[0].TokenSHA256 = []string{server.HashToken("orders-token-2")}
	next.Principals = append(next.Principals[:1], next.Principals[2:]...) // billing removed
	if err := srv.SetAuth(nil, next); err != nil {
		t.Fatal(err)
	}
	r := testcluster.DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(ordersToken)})
	if f := r.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) {
		t.Fatalf("old token after rotation: got %s, want E 5", f.Type)
	}
	o := testcluster.Hello(t, addr, "orders-token-2")
	expect(t, o.Final(o.Acquire("orders/1", testcluster.Owner(2), 0, 10)), wire.TypeGranted)
	for name, r := range map[string]*testcluster.Raw{"orders": oldOrders, "billing": billing} {
		f := r.Recv()
		if f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) || !strings.Contains(string(f.Text), "revoked") {
			t.Fatalf("%s's connection with a revoked token: got %s code %d %q, want E 5 (revoked)", name, f.Type, f.Code, f.Text)
		}
		if len(logs.lines("msg=audit", "principal="+name, "op=session", "outcome=revoked", "credential=token")) != 1 {
			t.Fatalf("no audit record of %s's revoked connection:\n%s", name, logs.String())
		}
	}
	expect(t, shipping.Final(shipping.Acquire("shared/1", testcluster.Owner(3), 0, 10)), wire.TypeGranted)

	bad := authPrincipals()
	bad.Principals[0].TokenSHA256 = []string{"orders-token-2"} // a plaintext token, not a hash
	if err := srv.SetAuth(nil, bad); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("invalid settings: got %v", err)
	}
	testcluster.Hello(t, addr, "orders-token-2") // unchanged
	m := scrape(t, srv.HTTPAddr().String())
	if m[`ticketing_auth_reloads_total{outcome="ok"}`] != 1 || m[`ticketing_auth_reloads_total{outcome="failed"}`] != 1 {
		t.Fatalf("reload metrics: %v %v", m[`ticketing_auth_reloads_total{outcome="ok"}`], m[`ticketing_auth_reloads_total{outcome="failed"}`])
	}
}

// TestAuthConfigValidation: every mistake in the auth settings is named.
func TestAuthConfigValidation(t *testing.T) {
	h := server.HashToken("x")
	cases := []struct {
		name string
		edit func(*server.Config)
		want string
	}{
		{"bad identity", func(c *server.Config) { c.Auth.CertIdentity = "email" }, "cert_identity"},
		{"no name", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Role: "admin", TokenSHA256: []string{h}}}
		}, "name is empty"},
		{"reserved name", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "client_tokens", Role: "admin", TokenSHA256: []string{h}}}
		}, "reserved"},
		{"duplicate name", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", TokenSHA256: []string{h}}, {Name: "a", Role: "monitor", TokenSHA256: []string{server.HashToken("y")}}}
		}, "used twice"},
		{"bad role", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "root", TokenSHA256: []string{h}}}
		}, "role"},
		{"client without prefixes", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "client", TokenSHA256: []string{h}}}
		}, "key_prefixes"},
		{"admin with prefixes", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", KeyPrefixes: []string{"x/"}, TokenSHA256: []string{h}}}
		}, "client role only"},
		{"no credential", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin"}}
		}, "can never connect"},
		{"plaintext token", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", TokenSHA256: []string{"secret"}}}
		}, "64 hex digits"},
		{"shared token", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", TokenSHA256: []string{h}}, {Name: "b", Role: "monitor", TokenSHA256: []string{h}}}
		}, "also a token of"},
		{"token of client_tokens", func(c *server.Config) {
			c.ClientTokens = []string{"x"}
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", TokenSHA256: []string{h}}}
		}, `also a token of "client_tokens"`},
		{"certificates without mTLS", func(c *server.Config) {
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", Certificates: []string{"a"}}}
		}, "mutual TLS"},
		{"shared certificate", func(c *server.Config) {
			c.TLS = server.TLSFiles{CertFile: "c", KeyFile: "k", CAFile: "ca"}
			c.Auth.Principals = []server.PrincipalConfig{{Name: "a", Role: "admin", Certificates: []string{"x"}}, {Name: "b", Role: "monitor", Certificates: []string{"x"}}}
		}, "also names"},
	}
	for _, tc := range cases {
		cfg := server.DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	ok := server.DefaultConfig()
	ok.Auth = authPrincipals()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid principals refused: %v", err)
	}
	if got := server.HashToken("abc"); got != fmt.Sprintf("%x", []byte{0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad}) {
		t.Fatalf("HashToken(abc) = %s, not SHA-256", got)
	}
}

// TestAuthOwnerSurvivesFailover: the principal a ticket was granted to is
// replicated state: after the leader dies, the new leader still refuses
// another principal's release of it (exact token) and lets the owner release.
func TestAuthOwnerSurvivesFailover(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = authPrincipals() }))
	old := c.LeaderIndex(t)
	orders := testcluster.Hello(t, c.Addr(old), ordersToken)
	g := expect(t, orders.Final(orders.Acquire("shared/1", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	// Every server has applied the grant (and the cluster's first entries)
	// before the leader dies: the test is about the grant's principal, not
	// about a failover in the cluster's first moments.
	want := c.Server(old).Raft().AppliedIndex()
	testcluster.WaitFor(t, 10*time.Second, "every server applied the grant", func() bool {
		for i := 0; i < 3; i++ {
			if c.Server(i).Raft().AppliedIndex() < want {
				return false
			}
		}
		return true
	})
	c.Kill(old)
	leader := c.LeaderIndex(t)
	shipping := testcluster.Hello(t, c.Addr(leader), sharedToken)
	forbidden(t, shipping.Final(shipping.Release("shared/1", g.Token)), wire.ForbiddenOwner)
	orders = testcluster.Hello(t, c.Addr(leader), ordersToken)
	expect(t, orders.Final(orders.Release("shared/1", g.Token)), wire.TypeReleased)

	// Admin sessions on a follower (status only there) obey the roles too.
	follower := (leader + 1) % 3
	if follower == old {
		follower = (follower + 1) % 3
	}
	session := func(token string) *testcluster.Raw {
		r := testcluster.DialRaw(t, c.Addr(follower))
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin, Text: []byte(token)})
		expect(t, r.Recv(), wire.TypeReady)
		return r
	}
	mon := session(monitorToken)
	if f := adminFirst(t, mon, adminReq(mon, `{"op":"status"}`)); f.Type != wire.TypeAdminReply || f.Code != 0 {
		t.Fatalf("monitor status on a follower: %s code %d %s", f.Type, f.Code, f.Text)
	}
	app := session(ordersToken)
	forbidden(t, adminFirst(t, app, adminReq(app, `{"op":"status"}`)), wire.ForbiddenRole)
}

// TestAuthOwnerSurvivesSnapshotRestart: the ticket's principal is kept in
// snapshots: after a snapshot and a restart that restores from it (the log
// before the snapshot is not replayed), another principal's release with the
// exact token is still refused and the owner's release succeeds.
func TestAuthOwnerSurvivesSnapshotRestart(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.Auth = authPrincipals() }))
	orders := testcluster.Hello(t, c.Addr(0), ordersToken)
	g := expect(t, orders.Final(orders.Acquire("shared/1", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	ops := testcluster.Hello(t, c.Addr(0), adminToken)
	id := adminReq(ops, `{"op":"snapshot.save"}`)
	for f := ops.Recv(); f.Type != wire.TypeAdminReply || f.Code != 0; f = ops.Recv() {
		if f.Type != wire.TypeAdminReply || f.Code != 3 || f.ID != id {
			t.Fatalf("snapshot.save: %s code %d %s", f.Type, f.Code, f.Text)
		}
	}
	c.Kill(0)
	c.Restart(0)
	c.LeaderIndex(t)
	shipping := testcluster.Hello(t, c.Addr(0), sharedToken)
	forbidden(t, shipping.Final(shipping.Release("shared/1", g.Token)), wire.ForbiddenOwner)
	orders = testcluster.Hello(t, c.Addr(0), ordersToken)
	expect(t, orders.Final(orders.Release("shared/1", g.Token)), wire.TypeReleased)
}
