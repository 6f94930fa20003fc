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
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "deploy"))
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
