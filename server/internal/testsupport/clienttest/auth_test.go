package clienttest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"

	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
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
	orders := connect(t, c.Addr(0), ticketing.WithToken("orders-secret"))
	shipping := connect(t, c.Addr(0), ticketing.WithToken("shipping-secret"))

	reason := func(err error, want ticketing.PermissionReason) {
		t.Helper()
		var pe *ticketing.PermissionError
		if !errors.Is(err, ticketing.ErrPermissionDenied) || !errors.As(err, &pe) || pe.Reason != want || errors.Is(err, ticketing.ErrIndeterminate) {
			t.Fatalf("got %v, want ErrPermissionDenied with reason %d (%s)", err, want, want)
		}
	}
	_, err := orders.Acquire(ctx, "billing/1", 0, 10*time.Second, 0)
	reason(err, ticketing.PermissionKey)
	_, err = orders.Describe(ctx, "billing/1")
	reason(err, ticketing.PermissionKey)
	reason(orders.ReleaseToken(ctx, "billing/1", 1), ticketing.PermissionKey)

	tk, err := orders.Acquire(ctx, "shared/1", 0, 60*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	reason(shipping.ReleaseToken(ctx, "shared/1", tk.Token()), ticketing.PermissionOwner)
	if d, err := shipping.Describe(ctx, "shared/1"); err != nil || d.Token != tk.Token() {
		t.Fatalf("after a refused release: %+v %v", d, err)
	}
	if err := tk.Release(ctx); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}

	// Admin operations need an admin principal.
	adm, err := ticketing.DialAdmin(ctx, c.Addr(0), quiet, ticketing.WithToken("orders-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	_, err = adm.Status(ctx)
	reason(err, ticketing.PermissionRole)
	_, err = adm.SaveSnapshot(ctx, &bytes.Buffer{})
	reason(err, ticketing.PermissionRole)
	reason(adm.RemoveMember(ctx, "n9"), ticketing.PermissionRole)
	ops, err := ticketing.DialAdmin(ctx, c.Addr(0), quiet, ticketing.WithToken("ops-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	if _, err := ops.Status(ctx); err != nil {
		t.Fatalf("admin status: %v", err)
	}
}
