package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
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

// TestEndToEndRefusalsSayWhatAndWhy: against a real cluster of three with
// principals and mutual TLS, each refusal is stated once, naming what was
// refused: a client certificate that names no principal (not "check
// --token"), a wrong token, and a role that may not run the command (status
// and snapshot save, not "no leader found").
func TestEndToEndRefusalsSayWhatAndWhy(t *testing.T) {
	ca := testcerts.New(t)
	serverCert, serverKey := ca.Issue(t, "server")
	listed, listedKey := ca.Issue(t, "orders-app")
	stranger, strangerKey := ca.Issue(t, "stranger")
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: serverCert, KeyFile: serverKey, CAFile: ca.CAFile}
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/"}, Certificates: []string{"orders-app"}},
			{Name: "ops", Role: server.RoleAdmin, TokenSHA256: []string{server.HashToken("ops-secret")}},
		}}
	}))
	t.Setenv(tokenEnv, "")
	t.Setenv(adminTokenEnv, "")
	addrs := "--addr=" + c.AddrList()
	tlsFlags := func(cert, key string) []string {
		return []string{addrs, "--tls-ca", ca.CAFile, "--tls-cert", cert, "--tls-key", key}
	}
	snap := filepath.Join(t.TempDir(), "s.snap")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
		not  []string
	}{
		{"certificate naming no principal", append([]string{"status"}, tlsFlags(stranger, strangerKey)...), exitError,
			[]string{"refused the client certificate", `"stranger"`}, []string{"--token"}},
		{"certificate naming no principal, snapshot", append([]string{"snapshot", "save", snap}, tlsFlags(stranger, strangerKey)...), exitError,
			[]string{"refused the client certificate"}, []string{"--token", "no leader found"}},
		{"wrong token", append([]string{"status", "--admin-token", "wrong"}, tlsFlags(listed, listedKey)...), exitError,
			[]string{"refused the token", "--admin-token"}, nil},
		{"role: status", append([]string{"status"}, tlsFlags(listed, listedKey)...), exitPermission,
			[]string{"role", "--admin-token"}, nil},
		{"role: snapshot save", append([]string{"snapshot", "save", snap}, tlsFlags(listed, listedKey)...), exitPermission,
			[]string{"role", "--admin-token"}, []string{"no leader found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := ctl(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr %q says %q", stderr, w)
				}
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
				t.Errorf("the refusal takes %d lines, want it once:\n%s", lines, stderr)
			}
		})
	}
}
