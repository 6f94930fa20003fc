package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestEndToEndCoordination: every coordination verb against three real
// servers, with -o json and the exit codes of statuses.
func TestEndToEndCoordination(t *testing.T) {
	cl := testcluster.Start(t, 3)
	t.Setenv(tokenEnv, "")
	addr := "--addr=" + cl.AddrList()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var nr nodeResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "nodes", "create", "/jobs", "--grace-period", "20s", "--max-sessions", "50"), &nr)
	if nr != (nodeResult{Op: "create", Path: "/jobs", OK: true}) {
		t.Fatalf("create: %+v", nr)
	}
	var er errorResult
	decodeOne(t, mustCtl(t, exitError, addr, "-o", "json", "coordination", "nodes", "create", "/jobs"), &er)
	if er.Code != "already_exists" {
		t.Fatalf("second create: %+v", er)
	}
	var nd nodeDescription
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "nodes", "describe", "/jobs"), &nd)
	if nd.SessionGracePeriodMs != 20000 || nd.SelfCheckPeriodMs != 1000 || nd.MaxSessions != 50 || nd.ReadConsistencyMode != "RELAXED" || nd.AttachConsistencyMode != "STRICT" {
		t.Fatalf("describe: %+v", nd)
	}
	mustCtl(t, exitOK, addr, "coordination", "nodes", "alter", "/jobs", "--read-mode", "strict", "--max-waiters", "7")
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "nodes", "describe", "/jobs"), &nd)
	if nd.ReadConsistencyMode != "STRICT" || nd.MaxWaiters != 7 || nd.MaxSessions != 50 || nd.SessionGracePeriodMs != 20000 {
		t.Fatalf("describe after alter: %+v", nd)
	}
	mustCtl(t, exitOK, addr, "coordination", "nodes", "alter", "/jobs", "--read-mode", "relaxed")
	if text := mustCtl(t, exitOK, addr, "coordination", "nodes", "describe", "/jobs"); !strings.Contains(text, "read_consistency_mode RELAXED") {
		t.Fatalf("describe text after the alter back:\n%s", text)
	}

	var sr semaphoreResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "semaphores", "create", "/jobs", "workers", "--limit", "2", "--data", "pool-a"), &sr)
	if sr != (semaphoreResult{Op: "create", Path: "/jobs", Name: "workers", OK: true}) {
		t.Fatalf("semaphore create: %+v", sr)
	}
	mustCtl(t, exitError, addr, "coordination", "semaphores", "create", "/jobs", "nolimit") // --limit is required

	// An owner and a waiter, through the SDK.
	tb, err := ticketing.Connect(cl.AddrList())
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	c, err := coordination.New(tb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Session(ctx, "/jobs", coordination.WithDescription("worker-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, err := c.Session(ctx, "/jobs", coordination.WithDescription("worker-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	la, err := a.AcquireSemaphore(ctx, "workers", coordination.Count(1), coordination.Data([]byte("a:1")))
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		_, err := b.AcquireSemaphore(ctx, "workers", coordination.Count(2), coordination.OnQueued(func(uint64) { close(queued) }))
		waited <- err
	}()
	select {
	case <-queued:
	case <-ctx.Done():
		t.Fatal("b was not queued")
	}

	var ss sessionsResult
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "sessions", "list", "/jobs"), &ss)
	if len(ss.Sessions) != 2 || ss.Sessions[0].ID != a.ID() || ss.Sessions[0].Description != "worker-a" || !ss.Sessions[0].Attached ||
		ss.Sessions[1].ID != b.ID() || ss.Sessions[1].Description != "worker-b" {
		t.Fatalf("sessions list (ticketctl's own sessions are stopped): %+v", ss)
	}
	if text := mustCtl(t, exitOK, addr, "coordination", "sessions", "list", "/jobs"); !strings.Contains(text, "2 sessions of /jobs") || !strings.Contains(text, `"worker-b"`) {
		t.Fatalf("sessions list text:\n%s", text)
	}

	var sd semaphoreDescription
	decodeOne(t, mustCtl(t, exitOK, addr, "-o", "json", "coordination", "semaphores", "describe", "/jobs", "workers"), &sd)
	if sd.Limit != 2 || sd.Count != 1 || sd.Ephemeral || sd.Data == nil || *sd.Data != "pool-a" ||
		len(sd.Owners) != 1 || sd.Owners[0].Session != a.ID() || sd.Owners[0].OrderID != la.Token() || *sd.Owners[0].Data != "a:1" ||
		len(sd.Waiters) != 1 || sd.Waiters[0].Session != b.ID() || sd.Waiters[0].Count != 2 {
		t.Fatalf("semaphore describe: %+v", sd)
	}

	decodeOne(t, mustCtl(t, exitError, addr, "-o", "json", "coordination", "semaphores", "delete", "/jobs", "workers"), &er)
	if er.Code != "precondition_failed" {
		t.Fatalf("delete in use: %+v", er)
	}
	mustCtl(t, exitOK, addr, "coordination", "semaphores", "delete", "/jobs", "workers", "--force")
	select { // the owner is told, the waiter aborted
	case <-la.Context().Done():
	case <-ctx.Done():
		t.Fatal("the owner was not told of the force delete")
	}
	select {
	case err := <-waited:
		if !errors.Is(err, coordination.ErrAborted) {
			t.Fatalf("the waiter ended with %v, want ErrAborted", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter did not end")
	}
	decodeOne(t, mustCtl(t, exitError, addr, "-o", "json", "coordination", "semaphores", "describe", "/jobs", "workers"), &er)
	if er.Code != "not_found" {
		t.Fatalf("describe after delete: %+v", er)
	}

	mustCtl(t, exitOK, addr, "coordination", "nodes", "drop", "/jobs")
	mustCtl(t, exitError, addr, "coordination", "nodes", "describe", "/jobs")
	mustCtl(t, exitError, addr, "coordination", "sessions", "list", "/jobs")
}

// TestCoordinationUsage: verbs refuse what they do not take.
func TestCoordinationUsage(t *testing.T) {
	for _, args := range [][]string{
		{"coordination"},
		{"coordination", "nodes"},
		{"coordination", "nodes", "rename", "/a"},
		{"coordination", "nodes", "create"},
		{"coordination", "nodes", "drop", "/a", "--limit", "3"},
		{"coordination", "semaphores", "delete", "/a", "s", "--grace-period", "1s"},
		{"coordination", "semaphores", "describe", "/a"},
		{"coordination", "nodes", "create", "/a", "--read-mode", "eventual"},
		{"coordination", "nodes", "create", "/a", "--max-sessions", "0"},
	} {
		code, _, stderr := ctl(t, append([]string{"--addr=127.0.0.1:1"}, args...)...)
		if code != exitError || !strings.Contains(stderr, "ticketctl coordination --help") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestEndToEndCoordinationPermissions: a client principal is refused a node
// outside its key prefixes (exit 5, permission_denied), a monitor every node.
func TestEndToEndCoordinationPermissions(t *testing.T) {
	cl := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "orders", Role: server.RoleClient, KeyPrefixes: []string{"orders/"}, TokenSHA256: []string{server.HashToken("app-secret")}},
			{Name: "mon", Role: server.RoleMonitor, TokenSHA256: []string{server.HashToken("mon-secret")}},
		}}
	}))
	t.Setenv(tokenEnv, "")
	addr := "--addr=" + cl.Addr(0)
	mustCtl(t, exitOK, addr, "--token", "app-secret", "coordination", "nodes", "create", "/orders/locks")
	var er errorResult
	decodeOne(t, mustCtl(t, exitPermission, addr, "--token", "app-secret", "-o", "json", "coordination", "nodes", "create", "/billing/locks"), &er)
	if er.Code != "permission_denied" {
		t.Fatalf("create outside the prefixes: %+v", er)
	}
	mustCtl(t, exitPermission, addr, "--token", "mon-secret", "coordination", "nodes", "describe", "/orders/locks")
	mustCtl(t, exitPermission, addr, "--token", "mon-secret", "coordination", "semaphores", "create", "/orders/locks", "s", "--limit", "1")
}
