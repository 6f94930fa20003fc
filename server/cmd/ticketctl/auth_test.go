package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testcluster"
)

// TestEndToEndPermissions: against a real server with an application and an
// operator principal, ticketctl uses --token for tickets and --admin-token
// for admin commands, and reports a refusal with exit code 5 (code
// "permission_denied").
func TestEndToEndPermissions(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/"}, TokenSHA256: []string{server.HashToken("app-secret")}},
			{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken("ops-secret")}},
		}}
	}))
	t.Setenv(tokenEnv, "")
	t.Setenv(adminTokenEnv, "")
	addr := "--addr=" + c.Addr(0)

	mustCtl(t, exitOK, addr, "--token", "app-secret", "acquire", "orders/1", "--wait", "0s", "--lease", "30s")
	var denied errorResult
	decodeOne(t, mustCtl(t, exitPermission, addr, "--token", "app-secret", "-o", "json", "acquire", "billing/1", "--wait", "0s", "--lease", "30s"), &denied)
	if denied.Code != "permission_denied" || !strings.Contains(denied.Error, "key prefixes") {
		t.Errorf("acquire outside the prefixes: %+v", denied)
	}
	mustCtl(t, exitPermission, addr, "--token", "app-secret", "describe", "billing/1")

	// Admin commands: the application token alone is refused, with a hint.
	_, _, stderr := ctl(t, addr, "--token", "app-secret", "status")
	if code, _, _ := ctl(t, addr, "--token", "app-secret", "status"); code != exitPermission || !strings.Contains(stderr, "--admin-token") {
		t.Errorf("status with the application token: exit %d, stderr %q", code, stderr)
	}
	mustCtl(t, exitPermission, addr, "--token", "app-secret", "snapshot", "save", filepath.Join(t.TempDir(), "a.snap"))
	mustCtl(t, exitPermission, addr, "--token", "app-secret", "members", "remove", "n9")
	// With --admin-token (the application token still given for tickets).
	mustCtl(t, exitOK, addr, "--token", "app-secret", "--admin-token", "ops-secret", "status")
	mustCtl(t, exitOK, addr, "--admin-token", "ops-secret", "snapshot", "save", filepath.Join(t.TempDir(), "b.snap"))
	// And from the environment.
	t.Setenv(adminTokenEnv, "ops-secret")
	mustCtl(t, exitOK, addr, "--token", "app-secret", "status")
}
