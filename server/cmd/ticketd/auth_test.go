package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// authFile is a configuration with principals, as in docs/deployment.md.
const authFile = `
initial_cluster_state = "new"
client_tokens = ["legacy"]

[auth]
cert_identity = "uri"

[[auth.principals]]
name = "orders"
role = "client"
key_prefixes = ["orders/"]
token_sha256 = ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]

[[auth.principals]]
name = "ops"
role = "admin"
token_sha256 = ["60303AE22B998861BCE3B28F33EEC1BE758A213C86C93C076DBE9F558C11C752"]

[[auth.principals]]
name = "grafana"
role = "monitor"
token_sha256 = ["fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"]
`

func TestConfigFileAuth(t *testing.T) {
	cfg, err := loadConfig([]string{"--config", writeFile(t, authFile)}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if a.CertIdentity != "uri" || len(a.Principals) != 3 || a.Principals[0].Name != "orders" || a.Principals[0].Role != "client" ||
		a.Principals[0].KeyPrefixes[0] != "orders/" || a.Principals[0].TokenSHA256[0] != server.HashToken("test") ||
		a.Principals[1].Role != "admin" || a.Principals[2].Role != "monitor" {
		t.Fatalf("auth settings: %+v", a)
	}
	// The flag overrides the file.
	cfg, err = loadConfig([]string{"--config", writeFile(t, authFile), "--cert-identity", "dns"}, &bytes.Buffer{})
	if err != nil || cfg.Auth.CertIdentity != "dns" {
		t.Fatalf("--cert-identity: %v %q", err, cfg.Auth.CertIdentity)
	}
	for _, tc := range []struct{ file, want string }{
		{"[[auth.principals]]\nname = \"a\"\nrole = \"client\"\ntoken_sha256 = [\"" + server.HashToken("a") + "\"]\n", "key_prefixes"},
		{"[[auth.principals]]\nname = \"a\"\nrole = \"admin\"\ntoken = \"plain\"\n", `unknown key "auth.principals.token"`},
		{"[[auth.principals]]\nname = \"a\"\nrole = \"admin\"\ntoken_sha256 = [\"plain\"]\n", "64 hex digits"},
		{"[auth]\ncert_identity = \"serial\"\n", "cert_identity"},
	} {
		_, err := loadConfig([]string{"--config", writeFile(t, tc.file)}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: got %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
}

func TestHashToken(t *testing.T) {
	old := stdin
	defer func() { stdin = old }()
	for _, in := range []string{"test\n", "test", "test\r\n"} {
		stdin = strings.NewReader(in)
		var out, errb bytes.Buffer
		if c := run(context.Background(), []string{"hash-token"}, &out, &errb, nil); c != 0 || out.String() != server.HashToken("test")+"\n" {
			t.Fatalf("hash-token of %q: exit %d, %q %q", in, c, out.String(), errb.String())
		}
	}
	stdin = strings.NewReader("\n")
	var out, errb bytes.Buffer
	if c := run(context.Background(), []string{"hash-token"}, &out, &errb, nil); c != 1 || !strings.Contains(errb.String(), "1..1024 bytes") {
		t.Fatalf("empty token: exit %d %q", c, errb.String())
	}
	if c := run(context.Background(), []string{"hash-token", "secret"}, &out, &errb, nil); c != 2 || !strings.Contains(errb.String(), "standard input") {
		t.Fatalf("token as an argument: exit %d %q", c, errb.String())
	}
}

// helloCode says how a real ticketd answers a hello with token: 0 for Y,
// the E code, or -1 for anything else (M while it takes the lead).
func helloCode(t *testing.T, addr, token string) int {
	r := testcluster.DialRaw(t, addr)
	defer r.Conn.Close()
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(token)})
	f, err := r.RecvErr(10 * time.Second)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	switch f.Type {
	case wire.TypeReady:
		return 0
	case wire.TypeError:
		return int(f.Code)
	}
	return -1 // M: not serving yet
}

// TestSIGHUPReloadsTokens: a real ticketd rotates a principal's token on
// SIGHUP without a restart: the connection opened with the old token is
// ended (E 5, revoked) and audited, another principal's goes on. A broken
// file keeps the settings in force and is counted in the metric that the
// alert of docs/deployment.md watches.
func TestSIGHUPReloadsTokens(t *testing.T) {
	principal := func(token string) string {
		return fmt.Sprintf("[[auth.principals]]\nname = \"orders\"\nrole = \"client\"\nkey_prefixes = [\"orders/\"]\ntoken_sha256 = [%q]\n", server.HashToken(token)) +
			fmt.Sprintf("[[auth.principals]]\nname = \"billing\"\nrole = \"client\"\nkey_prefixes = [\"billing/\"]\ntoken_sha256 = [%q]\n", server.HashToken("billing-token"))
	}
	file := filepath.Join(t.TempDir(), "ticketd.toml")
	if err := os.WriteFile(file, []byte(principal("old-token")), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	srvCh := make(chan *server.Server, 1)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--config", file,
			"--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
			"--data-dir", t.TempDir(), "--node-id", "solo", "--initial-cluster-state", "new",
		}, &stdout, &stderr, func(s *server.Server) { srvCh <- s })
	}()
	var addr, httpAddr string
	select {
	case s := <-srvCh:
		addr, httpAddr = s.ClientAddr().String(), s.HTTPAddr().String()
	case c := <-code:
		t.Fatalf("run exited with %d before serving:\n%s", c, stderr.String())
	}
	testcluster.WaitFor(t, 10*time.Second, "the old token accepted", func() bool { return helloCode(t, addr, "old-token") == 0 })
	old := testcluster.Hello(t, addr, "old-token")
	billing := testcluster.Hello(t, addr, "billing-token")

	if err := os.WriteFile(file, []byte(principal("new-token")), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	testcluster.WaitFor(t, 10*time.Second, "the new token accepted after SIGHUP", func() bool { return helloCode(t, addr, "new-token") == 0 })
	if c := helloCode(t, addr, "old-token"); c != int(wire.CodeUnauthenticated) {
		t.Fatalf("old token after the reload: %d, want E 5", c)
	}
	if f := old.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeUnauthenticated) || !strings.Contains(string(f.Text), "revoked") {
		t.Fatalf("the connection opened with the rotated token: got %s code %d %q, want E 5 (revoked)", f.Type, f.Code, f.Text)
	}
	if !strings.Contains(stderr.String(), "msg=audit principal=orders op=session outcome=revoked credential=token") {
		t.Fatalf("the revocation is not audited:\n%s", stderr.String())
	}
	if f := billing.Final(billing.Acquire("billing/1", testcluster.Owner(1), 0, 10)); f.Type != wire.TypeGranted {
		t.Fatalf("billing's connection after the reload: %s, want G", f.Type)
	}

	// The alert on failed reloads, as deploy/prometheus/alerts.yml writes it, and the
	// series it selects on this server.
	doc, err := os.ReadFile("../../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alert := regexp.MustCompile(`alert: TicketingAuthReloadFailed\n\s+expr: .*?(ticketing_\w+\{[^}]*\})`).FindSubmatch(doc)
	if alert == nil {
		t.Fatal("deploy/prometheus/alerts.yml has no TicketingAuthReloadFailed alert with a ticketing_ series")
	}
	series := string(alert[1])
	if v := metric(t, httpAddr, series); v != 0 {
		t.Fatalf("%s before a failed reload: %v", series, v)
	}

	// A broken file (it does not parse): logged and counted, and the
	// settings in force stay.
	if err := os.WriteFile(file, []byte("[[auth.principals]\nname = \"orders\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	testcluster.WaitFor(t, 10*time.Second, "the failed reload logged", func() bool {
		return strings.Contains(stderr.String(), "auth settings not reloaded")
	})
	testcluster.WaitFor(t, 10*time.Second, "the failed reload counted in "+series, func() bool { return metric(t, httpAddr, series) == 1 })
	if c := helloCode(t, addr, "new-token"); c != 0 {
		t.Fatalf("new token after a failed reload: %d, want Y", c)
	}
	if strings.Contains(stderr.String(), "new-token") || strings.Contains(stderr.String(), "old-token") {
		t.Fatalf("a token was logged:\n%s", stderr.String())
	}
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d:\n%s", c, stderr.String())
	}
}

// metric is the value of one series (name and labels as exposed) in a real
// server's /metrics; 0 when the series is absent.
func metric(t *testing.T, httpAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestSIGHUPReloadsQuotas: a real ticketd reads a principal's quota from
// [auth.principals.quota] and a SIGHUP changes it without a restart.
func TestSIGHUPReloadsQuotas(t *testing.T) {
	withQuota := func(conns int) string {
		return fmt.Sprintf("[[auth.principals]]\nname = \"orders\"\nrole = \"client\"\nkey_prefixes = [\"orders/\"]\ntoken_sha256 = [%q]\n"+
			"[auth.principals.quota]\nconnections = %d\nheld_tickets = 10\nwaiters = 10\nin_flight = 10\ncoordination_sessions = 1\nrequests_per_second = 100.5\nrequest_burst = 200\n",
			server.HashToken("orders-token"), conns)
	}
	file := filepath.Join(t.TempDir(), "ticketd.toml")
	if err := os.WriteFile(file, []byte(withQuota(1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"--config", file, "--initial-cluster-state", "new"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if q := cfg.Auth.Principals[0].Quota; q != (server.Quota{Connections: 1, HeldTickets: 10, Waiters: 10, InFlight: 10, CoordinationSessions: 1, RequestsPerSecond: 100.5, RequestBurst: 200}) {
		t.Fatalf("quota read as %+v", q)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	srvCh := make(chan *server.Server, 1)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--config", file,
			"--listen", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0", "--http-listen", "",
			"--data-dir", t.TempDir(), "--node-id", "solo", "--initial-cluster-state", "new",
		}, &stdout, &stderr, func(s *server.Server) { srvCh <- s })
	}()
	var addr string
	select {
	case s := <-srvCh:
		addr = s.ClientAddr().String()
	case c := <-code:
		t.Fatalf("run exited with %d before serving:\n%s", c, stderr.String())
	}
	// The connections of helloCode end asynchronously on the server: poll
	// until one connection is accepted and keep it.
	testcluster.WaitFor(t, 10*time.Second, "one connection of orders", func() bool {
		r := testcluster.DialRaw(t, addr)
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte("orders-token")})
		f, err := r.RecvErr(10 * time.Second)
		if err != nil || f.Type != wire.TypeReady {
			r.Conn.Close()
			return false
		}
		return true
	})
	r := testcluster.DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte("orders-token")})
	if f := r.Recv(); f.Type != wire.TypeCapacity || f.Reason != wire.CapacityPrincipalConnections {
		t.Fatalf("a second connection at quota 1: %s reason %d, want B 6", f.Type, f.Reason)
	}
	if err := os.WriteFile(file, []byte(withQuota(2)), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	testcluster.WaitFor(t, 10*time.Second, "the raised quota in force", func() bool { return helloCode(t, addr, "orders-token") == 0 })
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d:\n%s", c, stderr.String())
	}
}
