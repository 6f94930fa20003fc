package server_test

import (
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/buildinfo"
	"github.com/ticketing-io/ticketing/server/internal/console"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// consoleOn turns the console on, with the principals of authPrincipals.
func consoleOn(cfg *server.Config) {
	cfg.HTTP.Console = true
	cfg.Auth = authPrincipals()
}

// consoleGet GETs (or sends method to) url with an Authorization header
// when auth is not empty.
func consoleDo(t *testing.T, client *http.Client, method, url, auth string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func bearer(token string) string { return "Bearer " + token }

// lagging matches the replication cell of a member that lacks committed
// entries.
var lagging = regexp.MustCompile(`<td class="replication">log at \d+, [1-9]\d* behind</td>`)

// Off unless enabled: the HTTP port answers 404 under /console/.
func TestConsoleOffByDefault(t *testing.T) {
	c := testcluster.Start(t, 1)
	base := "http://" + c.Server(0).HTTPAddr().String()
	for _, path := range []string{"/console", "/console/", "/console/cluster", "/console/static/console.css"} {
		if resp, _ := consoleDo(t, http.DefaultClient, "GET", base+path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with the console off: %d, want 404", path, resp.StatusCode)
		}
	}
}

// With principals configured the console asks for a monitor or admin
// principal; every answer, refusals and errors included, carries the
// strict policy and is not cached; no page shows a token or a hash; the
// refusals are audited and listed on the refusals page.
func TestConsoleAccessAndHeaders(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(consoleOn))
	base := "http://" + c.Server(0).HTTPAddr().String()
	basic := func(token string) string {
		req, _ := http.NewRequest("GET", base, nil)
		req.SetBasicAuth("anyone", token)
		return req.Header.Get("Authorization")
	}
	cases := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no credentials", "GET", "/console/cluster", "", 401},
		{"a wrong token", "GET", "/console/cluster", bearer("not-a-token"), 401},
		{"a client principal", "GET", "/console/tickets", bearer(ordersToken), 403},
		{"a monitor", "GET", "/console/cluster", bearer(monitorToken), 200},
		{"an admin", "GET", "/console/tickets", bearer(adminToken), 200},
		{"the token as a basic password", "GET", "/console/coordination", basic(monitorToken), 200},
		{"the stylesheet", "GET", "/console/static/console.css", bearer(monitorToken), 200},
		{"the stylesheet without credentials", "GET", "/console/static/console.css", "", 401},
		{"an unknown page", "GET", "/console/nothing", bearer(monitorToken), 404},
		{"a POST", "POST", "/console/cluster", bearer(monitorToken), 405},
		{"the root", "GET", "/console/", bearer(monitorToken), 200}, // redirected to the cluster page
	}
	for _, tc := range cases {
		resp, body := consoleDo(t, http.DefaultClient, tc.method, base+tc.path, tc.auth)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy %q", tc.name, got)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", tc.name, got)
		}
		if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
		for _, secret := range []string{monitorToken, adminToken, ordersToken, server.HashToken(monitorToken), server.HashToken(adminToken), server.HashToken(ordersToken)} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: the answer shows a token or its hash", tc.name)
			}
		}
		if strings.Contains(strings.ToLower(body), "<script") || strings.Contains(body, " style=") {
			t.Errorf("%s: inline script or style in the page", tc.name)
		}
	}
	// The client principal's refusal is counted like a refused request.
	if got := scrape(t, c.Server(0).HTTPAddr().String())[`ticketing_authz_refusals_total{op="console",reason="role"}`]; got != 1 {
		t.Errorf("ticketing_authz_refusals_total{op=console,reason=role} = %v, want 1", got)
	}
	// The refused console requests are on the refusals page, with the
	// principal that was refused.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := consoleDo(t, http.DefaultClient, "GET", base+"/console/refusals", bearer(adminToken))
		if strings.Contains(body, `<td class="principal">orders</td><td class="op">console</td><td>denied</td>`) &&
			strings.Contains(body, `<td class="op">console</td><td>unauthenticated</td>`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refusals page does not list the refused console requests:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A refused ticket request on the client port is on the refusals page.
func TestConsoleListsRefusedRequests(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(consoleOn))
	r := testcluster.Hello(t, c.Addr(0), ordersToken)
	id := r.Acquire("billing/secret", testcluster.Owner(1), 0, 10)
	if f := r.Final(id); f.Type != wire.TypeForbidden {
		t.Fatalf("acquire of another principal's key: %s, want F", f.Type)
	}
	base := "http://" + c.Server(0).HTTPAddr().String()
	_, body := consoleDo(t, http.DefaultClient, "GET", base+"/console/refusals", bearer(monitorToken))
	if !strings.Contains(body, `<td class="principal">orders</td><td class="op">acquire</td><td>denied</td><td class="reason">key</td><td class="key">billing/secret</td>`) {
		t.Fatalf("the refused acquire is not listed:\n%s", body)
	}
}

// The tickets page lists a prefix's held keys a page at a time, in key
// order, with a link to the next page.
func TestConsoleTicketsPages(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(consoleOn))
	r := testcluster.Hello(t, c.Addr(0), ordersToken)
	const n = console.PageSize + 20
	for i := 0; i < n; i++ {
		id := r.Acquire(fmt.Sprintf("orders/%03d", i), testcluster.Owner(i+1), 0, 60)
		if f := r.Final(id); f.Type != wire.TypeGranted {
			t.Fatalf("acquire %d: %s", i, f.Type)
		}
	}
	r.Final(r.Acquire("shared/x", testcluster.Owner(999), 0, 60))
	base := "http://" + c.Server(0).HTTPAddr().String() + "/console/"
	_, first := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2F", bearer(monitorToken))
	if got := strings.Count(first, `<tr class="ticket"`); got != console.PageSize {
		t.Fatalf("first page lists %d keys, want %d", got, console.PageSize)
	}
	if !strings.Contains(first, fmt.Sprintf(`%d held keys starting with`, n)) || strings.Contains(first, "shared/x") {
		t.Errorf("first page:\n%s", first)
	}
	// Each hold names the client address it was granted to.
	if want := `<td class="remote">` + r.Conn.LocalAddr().String() + `</td>`; strings.Count(first, want) != console.PageSize {
		t.Errorf("first page: %d rows name the client address %s, want %d", strings.Count(first, want), r.Conn.LocalAddr(), console.PageSize)
	}
	last := fmt.Sprintf("orders/%03d", console.PageSize-1)
	next := `href="tickets?after=` + strings.ReplaceAll(last, "/", "%2f") + `&amp;prefix=orders%2f"`
	if !strings.Contains(strings.ToLower(first), strings.ToLower(next)) {
		t.Fatalf("first page has no link to the next one (%s):\n%s", next, first)
	}
	_, second := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2F&after="+last, bearer(monitorToken))
	if got := strings.Count(second, `<tr class="ticket"`); got != 20 {
		t.Fatalf("second page lists %d keys, want 20", got)
	}
	if !strings.Contains(second, fmt.Sprintf(`data-key="orders/%03d"`, console.PageSize)) || strings.Contains(second, `id="next"`) {
		t.Errorf("second page:\n%s", second)
	}
	// The last page is one click away: the prefix's last PageSize keys,
	// with a link back to the first page.
	if !strings.Contains(strings.ToLower(first), strings.ToLower(`id="last" href="tickets?last=1&amp;prefix=orders%2f"`)) {
		t.Fatalf("first page has no link to the last one:\n%s", first)
	}
	_, lastPage := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2F&last=1", bearer(monitorToken))
	if got := strings.Count(lastPage, `<tr class="ticket"`); got != console.PageSize {
		t.Fatalf("last page lists %d keys, want %d", got, console.PageSize)
	}
	if !strings.Contains(lastPage, fmt.Sprintf(`data-key="orders/%03d"`, n-1)) || !strings.Contains(lastPage, fmt.Sprintf(`data-key="orders/%03d"`, n-console.PageSize)) ||
		strings.Contains(lastPage, "shared/x") || strings.Contains(lastPage, `id="next"`) || !strings.Contains(lastPage, `id="first"`) {
		t.Errorf("last page:\n%s", lastPage)
	}
	// Sorting the page by time left: a key with a shorter lease comes first.
	r.Final(r.Acquire("orders/zsort-a", testcluster.Owner(1001), 0, 120))
	r.Final(r.Acquire("orders/zsort-b", testcluster.Owner(1002), 0, 30))
	_, byKey := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2Fzsort", bearer(monitorToken))
	_, byLeft := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2Fzsort&sort=left", bearer(monitorToken))
	if !strings.Contains(byKey, `data-key="orders/zsort-a"`) || !strings.Contains(byLeft, `data-key="orders/zsort-a"`) {
		t.Fatalf("the keys of different leases are not listed:\n%s", byKey)
	}
	if strings.Index(byKey, `data-key="orders/zsort-a"`) > strings.Index(byKey, `data-key="orders/zsort-b"`) || !strings.Contains(byKey, `id="sort-left"`) {
		t.Errorf("by key:\n%s", byKey)
	}
	if strings.Index(byLeft, `data-key="orders/zsort-b"`) > strings.Index(byLeft, `data-key="orders/zsort-a"`) || !strings.Contains(byLeft, `id="sort-key"`) {
		t.Errorf("by time left, orders/zsort-b (30 s) should come before orders/zsort-a (120 s):\n%s", byLeft)
	}
	// Jumping: the form's after field lists the keys after the one typed.
	_, jumped := consoleDo(t, http.DefaultClient, "GET", base+"tickets?prefix=orders%2F&after=orders%2F060", bearer(monitorToken))
	if !strings.Contains(jumped, `data-key="orders/061"`) || strings.Contains(jumped, `data-key="orders/060"`) || !strings.Contains(jumped, `<form method="get" action="tickets" class="jump">`) {
		t.Errorf("the page after orders/060:\n%s", jumped)
	}
}

// A follower's console shows the leader's view: the queue of a key, which
// only the leader has, read through the admin op "console".
func TestConsoleOnFollowerShowsLeader(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(consoleOn))
	li := c.LeaderIndex(t)
	fi := (li + 1) % 3
	holder := testcluster.Hello(t, c.Addr(li), ordersToken)
	if f := holder.Final(holder.Acquire("orders/q", testcluster.Owner(1), 0, 60)); f.Type != wire.TypeGranted {
		t.Fatalf("acquire: %s", f.Type)
	}
	waiter := testcluster.Hello(t, c.Addr(li), ordersToken)
	waiter.Acquire("orders/q", testcluster.Owner(2), 30, 60)
	owner2 := testcluster.Owner(2)
	want := fmt.Sprintf(`<li class="waiter" data-owner="%s">`, hex.EncodeToString(owner2[:]))
	url := "http://" + c.Server(fi).HTTPAddr().String() + "/console/tickets"
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, body := consoleDo(t, http.DefaultClient, "GET", url, bearer(monitorToken))
		if resp.StatusCode == 200 && strings.Contains(body, want) {
			if !strings.Contains(body, "showing the view of the leader "+c.Server(li).NodeID()) || !strings.Contains(body, "(follower, ready, version ") {
				t.Errorf("the follower's page does not say whose view it is:\n%s", body)
			}
			if !strings.Contains(body, `<td class="remote">`+holder.Conn.LocalAddr().String()+`</td>`) || !strings.Contains(body, ", "+waiter.Conn.LocalAddr().String()+"), waiting") {
				t.Errorf("the page does not name the holder's (%s) and the waiter's (%s) client addresses:\n%s", holder.Conn.LocalAddr(), waiter.Conn.LocalAddr(), body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's page does not show the leader's waiter (%d):\n%s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The follower passes the caller's credentials on: a client principal
	// is refused by it, and the leader would refuse the read too.
	if resp, _ := consoleDo(t, http.DefaultClient, "GET", url, bearer(ordersToken)); resp.StatusCode != 403 {
		t.Errorf("a client principal on the follower: %d, want 403", resp.StatusCode)
	}
	// That refusal happened on the follower: its refusals page lists it
	// beside the leader's, the leader's own page does not.
	refused := fmt.Sprintf(`<td class="node">%s</td><td class="principal">orders</td><td class="op">console</td>`, c.Server(fi).NodeID())
	if _, body := consoleDo(t, http.DefaultClient, "GET", "http://"+c.Server(fi).HTTPAddr().String()+"/console/refusals", bearer(monitorToken)); !strings.Contains(body, refused) {
		t.Errorf("the follower's refusals page does not list its own refusal:\n%s", body)
	}
	if _, body := consoleDo(t, http.DefaultClient, "GET", "http://"+c.Server(li).HTTPAddr().String()+"/console/refusals", bearer(monitorToken)); strings.Contains(body, `<td class="op">console</td>`) {
		t.Errorf("the leader's refusals page lists the follower's refusal:\n%s", body)
	}
	// A monitor session on the client port may send the op itself; a client may not.
	for _, tc := range []struct {
		token string
		want  wire.Type
	}{{monitorToken, wire.TypeAdminReply}, {ordersToken, wire.TypeForbidden}} {
		r := testcluster.Hello(t, c.Addr(li), tc.token)
		id := adminReq(r, `{"op":"console","page":"cluster"}`)
		if f := r.Final(id); f.Type != tc.want {
			t.Errorf("op console with %s: %s, want %s", tc.token, f.Type, tc.want)
		}
	}
}

// Over TLS, a verified client certificate names the principal, as on the
// client port; /metrics still answers a scraper without one.
func TestConsoleClientCertificate(t *testing.T) {
	ca := testcerts.New(t)
	cert, key := ca.Issue(t, "ticketd")
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.HTTP.Console, cfg.HTTP.TLS = true, true
		cfg.TLS = server.TLSFiles{CertFile: cert, KeyFile: key, CAFile: ca.CAFile}
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "oncall", Role: server.RoleMonitor, Certificates: []string{"oncall-laptop"}},
			{Name: "app", Role: server.RoleClient, KeyPrefixes: []string{""}, Certificates: []string{"app-host"}},
		}}
	}))
	base := "https://" + c.Server(0).HTTPAddr().String()
	client := func(name string) *http.Client {
		tc := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if name != "" {
			tc.Certificates = []tls.Certificate{ca.TLSCert(t, name)}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	}
	for _, tc := range []struct {
		cert, path string
		want       int
	}{
		{"oncall-laptop", "/console/cluster", 200},
		{"app-host", "/console/cluster", 403},
		{"", "/console/cluster", 401},
		{"unknown-host", "/console/cluster", 401},
		{"", "/metrics", 200},
	} {
		if resp, body := consoleDo(t, client(tc.cert), "GET", base+tc.path, ""); resp.StatusCode != tc.want {
			t.Errorf("certificate %q, %s: %d, want %d: %s", tc.cert, tc.path, resp.StatusCode, tc.want, body)
		}
	}
}

// The console and TLS on the HTTP port need the HTTP port, and TLS needs
// the client port's certificate.
func TestConsoleConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*server.Config)
		want string
	}{
		{"tls without a certificate", func(c *server.Config) { c.HTTP.TLS = true }, "http.tls needs the client port's certificate"},
		{"console without the port", func(c *server.Config) { c.HTTP.Console, c.HTTPAddr = true, "" }, "http.console and http.tls need the HTTP port"},
	} {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		tc.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Console = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("the console on the default HTTP port: %v", err)
	}
}

// On a TLS cluster a follower reads from the leader over TLS: with the
// caller's token, or, for a caller known by its client certificate, with
// the follower's own certificate, which the leader knows as a monitor.
func TestConsoleFollowerReadsLeaderOverTLS(t *testing.T) {
	t.Cleanup(server.SetConsoleCache(0)) // before the cluster's cleanup: runs after it
	ca := testcerts.New(t)
	cert, key := ca.Issue(t, "ticketd-server")
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.HTTP.Console, cfg.HTTP.TLS = true, true
		cfg.TLS = server.TLSFiles{CertFile: cert, KeyFile: key, CAFile: ca.CAFile}
		cfg.Auth = server.AuthConfig{Principals: []server.PrincipalConfig{
			{Name: "oncall", Role: server.RoleMonitor, Certificates: []string{"oncall-laptop"}},
			{Name: "grafana", Role: server.RoleMonitor, TokenSHA256: []string{server.HashToken(monitorToken)}},
			{Name: "servers", Role: server.RoleMonitor, Certificates: []string{"ticketd-server"}},
		}}
	}))
	li := c.LeaderIndex(t)
	fi := (li + 1) % 3
	url := "https://" + c.Server(fi).HTTPAddr().String() + "/console/cluster"
	for _, tc := range []struct {
		name, cert, auth string
	}{
		{"a token", "", bearer(monitorToken)},
		{"a client certificate", "oncall-laptop", ""},
	} {
		tlsCfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if tc.cert != "" {
			tlsCfg.Certificates = []tls.Certificate{ca.TLSCert(t, tc.cert)}
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp, body := consoleDo(t, client, "GET", url, tc.auth)
			if resp.StatusCode == 200 && strings.Contains(body, "showing the view of the leader "+c.Server(li).NodeID()) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the follower did not show the leader's view (%d):\n%s", tc.name, resp.StatusCode, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// The cluster page gives each member's health as the leader sees it: a
// stopped follower is unreachable, and reachable again once restarted; and
// each member's own version (each server here has its own) and how far its
// log is behind the commit index: entries committed while it was stopped,
// none once it caught up.
func TestConsoleMemberHealth(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.HTTP.Console = true
		cfg.Build = buildinfo.Info{Version: "v1.2.3-" + cfg.NodeID, Commit: "test", Go: "go"}
	}))
	li := c.LeaderIndex(t)
	fi := (li + 1) % 3
	url := "http://" + c.Server(li).HTTPAddr().String() + "/console/cluster"
	row := func(body string) string {
		i := strings.Index(body, fmt.Sprintf(`<tr class="member" data-id="%s">`, c.Config(fi).NodeID))
		if i < 0 {
			return ""
		}
		return body[i : i+strings.Index(body[i:], "</tr>")]
	}
	waitRow := func(what string, want any) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, body := consoleDo(t, http.DefaultClient, "GET", url, "")
			if re, ok := want.(*regexp.Regexp); ok && re.MatchString(row(body)) || strings.Contains(row(body), fmt.Sprint(want)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the member's row does not say %q:\n%s", what, want, row(body))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitRow("running", `<td class="health ok">reachable</td>`)
	waitRow("running", `<td class="replication">log at `)
	for i := range 3 {
		id := c.Config(i).NodeID
		_, body := consoleDo(t, http.DefaultClient, "GET", url, "")
		if want := fmt.Sprintf(`<tr class="member" data-id="%s">`, id); !strings.Contains(body[strings.Index(body, want):], `<td class="version">v1.2.3-`+id+`</td>`) {
			t.Errorf("member %s's row does not give its version v1.2.3-%s:\n%s", id, id, body)
		}
	}
	c.Kill(fi)
	waitRow("stopped", `<td class="health bad">unreachable: heartbeats fail`)
	r := testcluster.Hello(t, c.Addr(li), "")
	for i := range 5 {
		if f := r.Final(r.Acquire(fmt.Sprintf("k%d", i), testcluster.Owner(i+1), 0, 60)); f.Type != wire.TypeGranted {
			t.Fatalf("acquire: %s", f.Type)
		}
	}
	waitRow("stopped, entries committed", lagging)
	c.Restart(fi)
	waitRow("restarted", `<td class="health ok">reachable</td>`)
	waitRow("caught up", `, 0 behind</td>`)
	_, body := consoleDo(t, http.DefaultClient, "GET", url, "")
	if !strings.Contains(body, fmt.Sprintf(`data-id="%s">`, c.Config(li).NodeID)) || !strings.Contains(body, `<td class="health ok">ready</td>`) {
		t.Errorf("the leader's own row does not say ready:\n%s", body)
	}
}
