package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// scrape reads a server's /metrics in the text format: one entry per sample,
// keyed by the name and labels as exposed, e.g.
// `ticketing_capacity_rejects_total{limit="connections"}`.
func scrape(t *testing.T, httpAddr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, httpAddr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

var opsHTTP = &http.Client{Timeout: 5 * time.Second}

// httpGet returns the status code and body of GET http://addr+path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := opsHTTP.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	return resp.StatusCode, string(b)
}

// waitHTTP polls GET addr+path until it answers want, for up to 30 s.
func waitHTTP(t *testing.T, addr, path string, want int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, addr, path)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s%s: %d %q, want %d within 30 s", addr, path, code, body, want)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

func TestOpsProbes(t *testing.T) {
	// Not parallel: restarting a server binds its ports again, which other
	// tests' connections could have taken meanwhile.
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	httpAddr := func(i int) string { return c.Server(i).HTTPAddr().String() }
	for i := 0; i < 3; i++ {
		if code, body := httpGet(t, httpAddr(i), "/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz on n%d: %d %q", i+1, code, body)
		}
	}
	// Ready: the serving leader, and followers once they have applied the log.
	if code, body := httpGet(t, httpAddr(l), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz on the serving leader: %d %q", code, body)
	}
	r := testcluster.Hello(t, c.Addr(l), "")
	tok := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 200)), wire.TypeGranted).Token
	var followers []int
	for i := 0; i < 3; i++ {
		if i != l {
			followers = append(followers, i)
			waitHTTP(t, httpAddr(i), "/readyz", http.StatusOK)
			deadline := time.Now().Add(30 * time.Second)
			for c.Server(i).Status().LastToken < tok { // up to date, and still ready
				if time.Now().After(deadline) {
					t.Fatalf("n%d never applied token %d", i+1, tok)
				}
				time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
			}
			if code, body := httpGet(t, httpAddr(i), "/readyz"); code != http.StatusOK {
				t.Fatalf("/readyz on an up-to-date follower: %d %q", code, body)
			}
		}
	}
	// Kill the leader and one follower: the survivor has no leader. It is
	// alive (/healthz 200) but not ready (/readyz 503).
	survivor := followers[0]
	c.Kill(l)
	c.Kill(followers[1])
	body := waitHTTP(t, httpAddr(survivor), "/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "leader") {
		t.Errorf("/readyz 503 body %q does not say why (no leader)", body)
	}
	if code, _ := httpGet(t, httpAddr(survivor), "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz on a server without a leader: %d, want 200", code)
	}
	m := scrape(t, httpAddr(survivor))
	if m[`ticketing_raft_role{role="leader"}`] != 0 {
		t.Errorf("the survivor reports itself leader: %v", m)
	}
	// A quorum again: ready again.
	c.Restart(followers[1])
	c.LeaderIndex(t)
	waitHTTP(t, httpAddr(survivor), "/readyz", http.StatusOK)
	if code, _ := httpGet(t, httpAddr(survivor), "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
}

func TestOpsMetrics(t *testing.T) {
	// Exact counts need the same leader throughout: not parallel with the
	// load of the hostile tests, and Raft's default failure detection.
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxHeld = 5
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Second, time.Second
	}))
	l := c.LeaderIndex(t)
	leaderHTTP := c.Server(l).HTTPAddr().String()
	before := scrape(t, leaderHTTP)
	for _, name := range []string{
		"ticketing_grants_total", "ticketing_releases_total", "ticketing_expiries_total", "ticketing_not_acquired_total",
		"ticketing_auth_failures_total", "ticketing_malformed_frames_total", "ticketing_slow_consumers_total",
		"ticketing_acquire_seconds_count", "ticketing_queue_wait_seconds_count", "ticketing_commit_seconds_count",
		"ticketing_connections", "ticketing_tickets_held", "ticketing_waiters",
		"ticketing_raft_term", "ticketing_raft_commit_index", "ticketing_raft_applied_index",
		"ticketing_raft_last_log_index", "ticketing_raft_last_snapshot_index",
		`ticketing_raft_role{role="leader"}`, `ticketing_raft_role{role="follower"}`, `ticketing_raft_role{role="candidate"}`,
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Traffic: 5 grants (the held limit), one capacity reject, 2 releases,
	// one W, one queued waiter granted after a release.
	r := testcluster.Hello(t, c.Addr(l), "")
	var toks []uint64
	for i := 0; i < 5; i++ {
		toks = append(toks, expect(t, r.Final(r.Acquire(fmt.Sprintf("m%d", i), testcluster.Owner(i), 0, 200)), wire.TypeGranted).Token)
	}
	if f := expect(t, r.Final(r.Acquire("m9", testcluster.Owner(9), 0, 200)), wire.TypeCapacity); f.Reason != wire.CapacityHeld {
		t.Fatalf("reason %d, want held", f.Reason)
	}
	expect(t, r.Final(r.Acquire("m0", testcluster.Owner(10), 0, 200)), wire.TypeNotAcquired)
	w := testcluster.Hello(t, c.Addr(l), "")
	wid := w.Acquire("m1", testcluster.Owner(11), 30, 200)
	expect(t, w.Recv(), wire.TypeQueued)
	if n := scrape(t, leaderHTTP)["ticketing_waiters"]; n > 1 {
		t.Errorf("ticketing_waiters = %v with one waiter", n)
	}
	expect(t, r.Final(r.Release("m0", toks[0])), wire.TypeReleased)
	expect(t, r.Final(r.Release("m1", toks[1])), wire.TypeReleased) // hands m1 to the waiter
	expect(t, w.Final(wid), wire.TypeGranted)
	const grants, releases, held = 6, 2, 4

	m := scrape(t, leaderHTTP)
	delta := func(name string) float64 { return m[name] - before[name] }
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"ticketing_grants_total (increase)", delta("ticketing_grants_total"), grants},
		{"ticketing_releases_total (increase)", delta("ticketing_releases_total"), releases},
		{"ticketing_not_acquired_total (increase)", delta("ticketing_not_acquired_total"), 1},
		{`ticketing_capacity_rejects_total{limit="held"}`, m[`ticketing_capacity_rejects_total{limit="held"}`], 1},
		{"ticketing_acquire_seconds_count (increase)", delta("ticketing_acquire_seconds_count"), grants},
		{"ticketing_queue_wait_seconds_count (increase)", delta("ticketing_queue_wait_seconds_count"), 1},
		{"ticketing_tickets_held", m["ticketing_tickets_held"], held},
		{"ticketing_connections", m["ticketing_connections"], 2},
		{`ticketing_raft_role{role="leader"}`, m[`ticketing_raft_role{role="leader"}`], 1},
		{`ticketing_raft_role{role="follower"}`, m[`ticketing_raft_role{role="follower"}`], 0},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if n := delta("ticketing_commit_seconds_count"); n < 1 {
		t.Errorf("ticketing_commit_seconds_count rose by %v after %d commits", n, grants+releases)
	}
	if s := m["ticketing_acquire_seconds_sum"] - before["ticketing_acquire_seconds_sum"]; s <= 0 {
		t.Errorf("ticketing_acquire_seconds_sum rose by %v", s)
	}
	if m["ticketing_raft_term"] < 1 || m["ticketing_raft_applied_index"] > m["ticketing_raft_commit_index"] ||
		m["ticketing_raft_commit_index"] > m["ticketing_raft_last_log_index"] {
		t.Errorf("raft gauges: term %v, applied %v, commit %v, last %v", m["ticketing_raft_term"],
			m["ticketing_raft_applied_index"], m["ticketing_raft_commit_index"], m["ticketing_raft_last_log_index"])
	}
	// Followers: role follower, and the same held count once applied.
	for i := 0; i < 3; i++ {
		if i == l {
			continue
		}
		addr := c.Server(i).HTTPAddr().String()
		deadline := time.Now().Add(30 * time.Second)
		for {
			f := scrape(t, addr)
			if f["ticketing_tickets_held"] == held && f[`ticketing_raft_role{role="follower"}`] == 1 && f[`ticketing_raft_role{role="leader"}`] == 0 {
				if f["ticketing_grants_total"] != 0 {
					t.Errorf("n%d (follower) counts %v grants: grants are counted by the leader that made them", i+1, f["ticketing_grants_total"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n%d: tickets_held %v, role follower %v, want %d and 1", i+1, f["ticketing_tickets_held"], f[`ticketing_raft_role{role="follower"}`], held)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
		}
	}
}
