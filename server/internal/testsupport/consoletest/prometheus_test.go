package consoletest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// promAlert is one alert of Prometheus's /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

func (a promAlert) String() string {
	return fmt.Sprintf("%s{cluster=%q,instance=%q} %s", a.Labels["alertname"], a.Labels["cluster"], a.Labels["instance"], a.State)
}

// prometheus is a real Prometheus server (Debian's prometheus package)
// scraping test clusters with deploy/prometheus/alerts.yml loaded.
type prometheus struct {
	t    *testing.T
	addr string
}

// startPrometheus runs Prometheus with the repository's alert rules,
// scraping each cluster's servers under job "ticketd" with the cluster
// label set to its name, as docs/deployment.md says to. Scrapes and rule
// evaluations are every second, so that alerts come and go in seconds.
func startPrometheus(t *testing.T, clusters map[string]*cluster) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: install Debian's prometheus package (apt-get install prometheus), as test.sh does")
	}
	dir := t.TempDir()
	var targets strings.Builder
	names := make([]string, 0, len(clusters))
	for name := range clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var hosts []string
		for _, p := range clusters[name].procs {
			hosts = append(hosts, fmt.Sprintf("%q", p.http))
		}
		fmt.Fprintf(&targets, "      - targets: [%s]\n        labels: {cluster: %q}\n", strings.Join(hosts, ", "), name)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: ticketd
    static_configs:
%s`, filepath.Join(deployDir(t), "prometheus", "alerts.yml"), targets.String())
	confFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	pr := &prometheus{t: t, addr: freePort(t)}
	logFile := filepath.Join(dir, "prometheus.log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+confFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+pr.addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("prometheus configuration:\n%s\nprometheus log:\n%s", conf, b)
		}
	})
	return pr
}

// get decodes the data of a Prometheus API answer; false when Prometheus
// cannot answer yet (starting).
func (pr *prometheus) get(path string, data any) bool {
	resp, err := http.Get("http://" + pr.addr + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Status != "success" {
		return false
	}
	if err := json.Unmarshal(body.Data, data); err != nil {
		pr.t.Fatalf("prometheus %s: %v", path, err)
	}
	return true
}

// alerts returns the pending and firing alerts.
func (pr *prometheus) alerts() ([]promAlert, bool) {
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	ok := pr.get("/api/v1/alerts", &d)
	return d.Alerts, ok
}

// scalar evaluates a PromQL query whose answer is one number (NaN-free);
// false when it has no result.
func (pr *prometheus) scalar(q string) (float64, bool) {
	var d struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if !pr.get("/api/v1/query?query="+url.QueryEscape(q), &d) || len(d.Result) != 1 {
		return 0, false
	}
	var v float64
	s, _ := d.Result[0].Value[1].(string)
	if _, err := fmt.Sscan(s, &v); err != nil {
		return 0, false
	}
	return v, true
}

// lastEvaluation returns when Prometheus last evaluated the rule group.
func (pr *prometheus) lastEvaluation() (time.Time, bool) {
	var d struct {
		Groups []struct {
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if !pr.get("/api/v1/rules", &d) || len(d.Groups) != 1 {
		return time.Time{}, false
	}
	return d.Groups[0].LastEvaluation, true
}

// until waits, up to limit, for cond, asking Prometheus again and again.
func (pr *prometheus) until(ctx context.Context, limit time.Duration, what string, cond func() (bool, string)) {
	pr.t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) || ctx.Err() != nil {
			pr.t.Fatalf("%s: not within %v; last seen: %s", what, limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// evaluatedAfter waits until the rule group has been evaluated n times
// since now.
func (pr *prometheus) evaluatedAfter(ctx context.Context, n int) {
	pr.t.Helper()
	start := time.Now()
	var seen []time.Time
	pr.until(ctx, 30*time.Second, fmt.Sprintf("%d rule evaluations", n), func() (bool, string) {
		at, ok := pr.lastEvaluation()
		if ok && at.After(start) && (len(seen) == 0 || at.After(seen[len(seen)-1])) {
			seen = append(seen, at)
		}
		return len(seen) >= n, fmt.Sprintf("%d evaluations", len(seen))
	})
}

// TestAlertsInPrometheus runs deploy/prometheus/alerts.yml in a real
// Prometheus scraping two real three-server clusters, told apart by their
// cluster label: no alert while both are healthy (not pending either);
// TicketingNoLeader for exactly the cluster whose majority is killed,
// while the other stays without alerts; and it clears once that majority
// is back.
func TestAlertsInPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	east, west := startCluster(t, 3), startCluster(t, 3)
	pr := startPrometheus(t, map[string]*cluster{"east": east, "west": west})

	pr.until(ctx, 60*time.Second, "every server scraped and one leader in each cluster", func() (bool, string) {
		up, _ := pr.scalar(`count(up{job="ticketd"} == 1)`)
		leaders, _ := pr.scalar(`count(sum by (cluster) (ticketing_raft_role{job="ticketd",role="leader"}) == 1)`)
		return up == 6 && leaders == 2, fmt.Sprintf("%v servers up, %v clusters with one leader", up, leaders)
	})
	pr.evaluatedAfter(ctx, 3)
	if alerts, ok := pr.alerts(); !ok || len(alerts) != 0 {
		t.Fatalf("two healthy clusters: alerts %v (answered %v), want none, not even pending", alerts, ok)
	}

	// West loses its majority: its leader and one follower.
	leader, followers := west.leader()
	leader.kill()
	followers[0].kill()
	pr.until(ctx, 90*time.Second, "TicketingNoLeader firing for west", func() (bool, string) {
		alerts, _ := pr.alerts()
		for _, a := range alerts {
			if a.Labels["alertname"] == "TicketingNoLeader" && a.Labels["cluster"] == "west" && a.State == "firing" {
				return true, ""
			}
		}
		return false, fmt.Sprint(alerts)
	})
	alerts, _ := pr.alerts()
	noLeader := 0
	for _, a := range alerts {
		if a.Labels["cluster"] != "west" {
			t.Errorf("alert %v about a cluster other than west, which is healthy", a)
		}
		if a.Labels["alertname"] == "TicketingNoLeader" {
			noLeader++
		}
	}
	if noLeader != 1 {
		t.Errorf("%d TicketingNoLeader alerts, want exactly one (west): %v", noLeader, alerts)
	}

	// West's majority comes back: the alert clears.
	leader.start(t)
	followers[0].start(t)
	pr.until(ctx, 90*time.Second, "TicketingNoLeader cleared once west has a leader again", func() (bool, string) {
		alerts, _ := pr.alerts()
		for _, a := range alerts {
			if a.Labels["alertname"] == "TicketingNoLeader" {
				return false, fmt.Sprint(alerts)
			}
		}
		return true, ""
	})
	alerts, _ = pr.alerts()
	for _, a := range alerts {
		if a.Labels["cluster"] != "west" {
			t.Errorf("after west's recovery, alert %v about another cluster", a)
		}
	}
}
