package ticketing

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/server"
	"github.com/ticketing-io/ticketing/internal/testcluster"
)

// TestPermissionDenied: against a real server with principals, the Go client
// reports every refusal (F) as ErrPermissionDenied with its reason, as a
// final answer (not indeterminate), and goes on using the same connection.
func TestPermissionDenied(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/", "shared/"}, TokenSHA256: []string{server.HashToken("orders-secret")}},
			{Name: "shipping", Role: server.RoleClient, KeyPrefixes: []string{"shared/"}, TokenSHA256: []string{server.HashToken("shipping-secret")}},
			{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken("ops-secret")}},
		}}
	}))
	ctx := ctxFor(t)
	orders := connect(t, c.Addr(0), WithToken("orders-secret"))
	shipping := connect(t, c.Addr(0), WithToken("shipping-secret"))

	reason := func(err error, want PermissionReason) {
		t.Helper()
		var pe *PermissionError
		if !errors.Is(err, ErrPermissionDenied) || !errors.As(err, &pe) || pe.Reason != want || errors.Is(err, ErrIndeterminate) {
			t.Fatalf("got %v, want ErrPermissionDenied with reason %d (%s)", err, want, want)
		}
	}
	_, err := orders.Acquire(ctx, "billing/1", 0, 10*time.Second, 0)
	reason(err, PermissionKey)
	_, err = orders.Describe(ctx, "billing/1")
	reason(err, PermissionKey)
	reason(orders.ReleaseToken(ctx, "billing/1", 1), PermissionKey)

	tk, err := orders.Acquire(ctx, "shared/1", 0, 60*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	reason(shipping.ReleaseToken(ctx, "shared/1", tk.Token()), PermissionOwner)
	if d, err := shipping.Describe(ctx, "shared/1"); err != nil || d.Token != tk.Token() {
		t.Fatalf("after a refused release: %+v %v", d, err)
	}
	if err := tk.Release(ctx); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}

	// Admin operations need an admin principal.
	adm, err := DialAdmin(ctx, c.Addr(0), quiet, WithToken("orders-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	_, err = adm.Status(ctx)
	reason(err, PermissionRole)
	_, err = adm.SaveSnapshot(ctx, &bytes.Buffer{})
	reason(err, PermissionRole)
	reason(adm.RemoveMember(ctx, "n9"), PermissionRole)
	ops, err := DialAdmin(ctx, c.Addr(0), quiet, WithToken("ops-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	if _, err := ops.Status(ctx); err != nil {
		t.Fatalf("admin status: %v", err)
	}
}
