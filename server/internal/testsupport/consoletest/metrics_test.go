package consoletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/server"
)

const narrowToken = "console-test-narrow-token-0123456789"

// deployDir is the repository's deploy directory.
func deployDir(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// metricName finds the metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\b(?:ticketing|process|go)_[a-z_]+\b`)

// dashboardMetrics returns the metric names of every query of the Grafana
// dashboard (panel targets and variable queries).
func dashboardMetrics(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(deployDir(t), "grafana", "ticketing.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("grafana/ticketing.json is not JSON: %v", err)
	}
	names := map[string]bool{}
	exprs := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs++
					for _, n := range metricName.FindAllString(s, -1) {
						names[n] = true
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if exprs < 10 {
		t.Fatalf("the dashboard has %d queries; the walk is broken", exprs)
	}
	return names
}

// ruleMetrics returns the metric names of every expr of the alert rules.
func ruleMetrics(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(deployDir(t), "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	exprs := 0
	for _, line := range strings.Split(string(b), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs++
			for _, n := range metricName.FindAllString(e, -1) {
				names[n] = true
			}
		}
	}
	if exprs < 10 {
		t.Fatalf("alerts.yml has %d exprs; the reading is broken", exprs)
	}
	return names
}

// exported returns the names of the samples /metrics shows (a histogram
// shows as name_bucket, name_sum and name_count).
func exported(t *testing.T, httpAddr string) map[string]bool {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	return names
}

// TestDashboardAndRulesUseExportedMetrics: every metric the Grafana
// dashboard and the alert rules query is one a real ticketd exports. The
// server is made to export its labelled counters too (a vector shows no
// series before its first increment): a grant, a capacity reject, a
// refusal, a refused hello, an admin request.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := startCluster(t, 1, fmt.Sprintf(`
[limits]
max_held = 1

[[auth.principals]]
name = "narrow"
role = "client"
key_prefixes = ["narrow/"]
token_sha256 = [%q]
`, server.HashToken(narrowToken)))
	p := cl.procs[0]
	b := cl.broker(ctx)
	if _, err := b.Acquire(ctx, "a", time.Second, time.Minute, 0); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := b.Acquire(ctx, "b", 0, time.Minute, 0); !errors.Is(err, ticketing.ErrCapacity) {
		t.Fatalf("acquire past max_held: %v, want a capacity reject", err)
	}
	narrow, err := ticketing.Connect(p.client, ticketing.WithToken(narrowToken))
	if err != nil {
		t.Fatal(err)
	}
	defer narrow.Close()
	if _, err := narrow.Acquire(ctx, "a", 0, time.Minute, 0); err == nil {
		t.Fatal("a principal acquired a key outside its prefixes")
	}
	if _, err := ticketing.DialAdmin(ctx, p.client, ticketing.WithToken("wrong-token")); err == nil {
		t.Fatal("a wrong token was accepted")
	}
	if a, err := ticketing.DialAdmin(ctx, p.client, ticketing.WithToken(monitorToken)); err != nil {
		t.Fatal(err)
	} else {
		_, err = a.Status(ctx)
		a.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	have := exported(t, p.http)
	for what, names := range map[string]map[string]bool{"grafana/ticketing.json": dashboardMetrics(t), "prometheus/alerts.yml": ruleMetrics(t)} {
		var missing []string
		for n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("deploy/%s uses metrics ticketd does not export: %s", what, strings.Join(missing, ", "))
		}
		if len(names) < 8 {
			t.Errorf("deploy/%s: only %d metrics found", what, len(names))
		}
	}
}

// bornOnFirstEvent are the dashboard's metrics whose series are labelled
// by request (op and reason or outcome): too many combinations to create
// at start, so their panels show "No data" until the first one.
var bornOnFirstEvent = map[string]bool{"ticketing_authz_refusals_total": true, "ticketing_admin_ops_total": true}

// TestBuildAndSeriesFromStart: a server that has served nothing yet
// exports every series the dashboard queries (but those labelled by
// request), every capacity limit's reject counter at 0, and its build;
// the version it was stamped with is in ticketing_build_info, the status
// answer and the console.
func TestBuildAndSeriesFromStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := startCluster(t, 1, `
[[auth.principals]]
name = "limited"
role = "client"
key_prefixes = ["limited/"]
token_sha256 = ["`+server.HashToken(narrowToken)+`"]
[auth.principals.quota]
held_tickets = 10
`)
	p := cl.procs[0]
	samples := scrape(t, p.http)
	names := map[string]bool{}
	for s := range samples {
		name, _, _ := strings.Cut(s, "{")
		names[name] = true
	}
	var missing []string
	for n := range dashboardMetrics(t) {
		if !names[n] && !bornOnFirstEvent[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("a fresh server lacks the series of %s, which the dashboard queries", strings.Join(missing, ", "))
	}
	for _, limit := range []string{"held", "key_waiters", "waiters", "in_flight", "connections", "principal_held_tickets"} {
		if v, ok := samples[`ticketing_capacity_rejects_total{limit="`+limit+`"}`]; !ok || v != "0" {
			t.Errorf("ticketing_capacity_rejects_total for limit %s: %q (present %v), want 0 from the start", limit, v, ok)
		}
	}
	var build string
	for s, v := range samples {
		if strings.HasPrefix(s, "ticketing_build_info{") && v == "1" {
			build = s
		}
	}
	if !strings.Contains(build, `version="`+stampedVersion+`"`) || !strings.Contains(build, `go="go`) || !strings.Contains(build, `commit="`) {
		t.Errorf("ticketing_build_info: %q, want version %s, a commit and the Go release", build, stampedVersion)
	}

	a, err := ticketing.DialAdmin(ctx, p.client, ticketing.WithToken(monitorToken))
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.Status(ctx)
	a.Close()
	if err != nil || st.Version != stampedVersion {
		t.Errorf("status: version %q (%v), want %s", st.Version, err, stampedVersion)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.http+"/console/cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+monitorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="version">` + stampedVersion + `</span>`, `<td id="version">` + stampedVersion + `</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the console's cluster page lacks %s:\n%s", want, page)
		}
	}
}

// scrape returns /metrics as sample (name and labels, as written) to value.
func scrape(t *testing.T, httpAddr string) map[string]string {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		out[line[:i]] = line[i+1:]
	}
	return out
}

// TestAlertsHaveRunbooks: every alert of alerts.yml has a summary, a
// description and a runbook_url pointing at a section of
// docs/deployment.md that exists.
func TestAlertsHaveRunbooks(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(deployDir(t), "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(deployDir(t), "..", "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchors[githubAnchor(strings.TrimLeft(h, "# "))] = true
		}
	}
	const prefix = "https://github.com/ticketing-io/ticketing/blob/main/docs/deployment.md#"
	alerts := 0
	for _, rule := range strings.Split(string(rules), "  - alert: ")[1:] {
		alerts++
		name, _, _ := strings.Cut(rule, "\n")
		for _, field := range []string{"summary: '", "description: '", "runbook_url: '" + prefix} {
			if !strings.Contains(rule, "\n      "+field) {
				t.Errorf("alert %s has no %s...", name, field)
			}
		}
		_, after, _ := strings.Cut(rule, "runbook_url: '"+prefix)
		anchor, _, _ := strings.Cut(after, "'")
		if anchor != strings.ToLower(name) || !anchors[anchor] {
			t.Errorf("alert %s: runbook anchor %q, want %q, a section of docs/deployment.md", name, anchor, strings.ToLower(name))
		}
	}
	if alerts < 10 {
		t.Fatalf("found %d alerts in alerts.yml; the reading is broken", alerts)
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
