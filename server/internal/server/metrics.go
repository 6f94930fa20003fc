package server

import (
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// metrics are registered on a per-server registry, so several servers can
// run in one process (tests) without colliding.
type metrics struct {
	reg             *prometheus.Registry
	grants          prometheus.Counter
	releases        prometheus.Counter
	expiries        prometheus.Counter
	notAcquired     prometheus.Counter
	capacityRejects *prometheus.CounterVec
	authFailures    prometheus.Counter
	malformed       prometheus.Counter
	slowConsumers   prometheus.Counter
	acquireSeconds  prometheus.Histogram
	queueWait       prometheus.Histogram
	commitSeconds   prometheus.Histogram
	connections     prometheus.Gauge
	authMetrics
}

// authMetrics count authorization: refusals, admin operations, reloads.
type authMetrics struct {
	authzRefusals *prometheus.CounterVec // op, reason
	adminOps      *prometheus.CounterVec // op, outcome
	authReloads   *prometheus.CounterVec // outcome
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	m.grants = counter("ticketing_grants_total", "Tickets granted.")
	m.releases = counter("ticketing_releases_total", "Tickets released by their holder.")
	m.expiries = counter("ticketing_expiries_total", "Tickets ended because their lease ran out.")
	m.notAcquired = counter("ticketing_not_acquired_total", "Acquires answered not acquired within their wait.")
	m.capacityRejects = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ticketing_capacity_rejects_total",
		Help: "Requests answered with a capacity reject, by limit."}, []string{"limit"})
	reg.MustRegister(m.capacityRejects)
	// Every limit's series exists from the start at 0, so that a dashboard
	// shows 0 rather than "No data" and increase() sees the first reject.
	for _, limit := range capacityLimitLabels() {
		m.capacityRejects.WithLabelValues(limit)
	}
	m.authFailures = counter("ticketing_auth_failures_total", "Hellos refused for a missing or wrong token.")
	m.malformed = counter("ticketing_malformed_frames_total", "Connections ended by a malformed, oversized or unknown frame.")
	m.slowConsumers = counter("ticketing_slow_consumers_total", "Connections cut off because the client did not read its answers.")
	lat := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100 µs .. 13 s
	m.acquireSeconds = hist("ticketing_acquire_seconds", "Time from an acquire's arrival to its grant.", lat)
	m.queueWait = hist("ticketing_queue_wait_seconds", "Time granted acquires spent queued.", lat)
	m.commitSeconds = hist("ticketing_commit_seconds", "Time from proposing a batch to its being applied (includes fsync and replication).", lat)
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	m.authzRefusals = vec("ticketing_authz_refusals_total", "Requests refused (F) because the principal may not make them, by request and reason (role, key, owner).", "op", "reason")
	m.adminOps = vec("ticketing_admin_ops_total", "Admin requests, by operation and outcome (ok, failed, not_leader, done, denied).", "op", "outcome")
	m.authReloads = vec("ticketing_auth_reloads_total", "Reloads of the auth settings (SIGHUP), by outcome (ok, failed).", "outcome")
	// Both outcomes exist from the start at 0: an alert on increase() sees
	// the first failed reload, which a series born at 1 would hide.
	m.authReloads.WithLabelValues("ok")
	m.authReloads.WithLabelValues("failed")
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ticketing_connections", Help: "Open client connections."})
	reg.MustRegister(m.connections)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ticketing_tickets_held", Help: "Tickets currently held."},
		func() float64 { return float64(s.node.Held()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ticketing_waiters", Help: "Acquires waiting in queues (leader only)."},
		func() float64 { return float64(s.core.Waiters()) }))
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ticketing_build_info",
		Help:        "Always 1; its labels name the running build: version, VCS commit and Go release.",
		ConstLabels: prometheus.Labels{"version": s.cfg.Build.Version, "commit": s.cfg.Build.Commit, "go": s.cfg.Build.Go}})
	build.Set(1)
	reg.MustRegister(build)
	reg.MustRegister(&raftCollector{s: s})
	reg.MustRegister(coordCollector{s: s})
	reg.MustRegister(principalCollector{s: s})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// raftCollector reads Raft's own counters at scrape time.
type raftCollector struct{ s *Server }

var (
	descRole    = prometheus.NewDesc("ticketing_raft_role", "1 for this server's current Raft role.", []string{"role"}, nil)
	descTerm    = prometheus.NewDesc("ticketing_raft_term", "Current Raft term.", nil, nil)
	descCommit  = prometheus.NewDesc("ticketing_raft_commit_index", "Raft commit index.", nil, nil)
	descApplied = prometheus.NewDesc("ticketing_raft_applied_index", "Raft applied index.", nil, nil)
	descLast    = prometheus.NewDesc("ticketing_raft_last_log_index", "Last Raft log index.", nil, nil)
	descSnap    = prometheus.NewDesc("ticketing_raft_last_snapshot_index", "Index of the latest snapshot.", nil, nil)
)

func (r *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descTerm, descCommit, descApplied, descLast, descSnap} {
		ch <- d
	}
}

func (r *raftCollector) Collect(ch chan<- prometheus.Metric) {
	rf := r.s.node.Raft()
	state := rf.State()
	for _, st := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate} {
		v := 0.0
		if st == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRole, prometheus.GaugeValue, v, roleName(st))
	}
	stats := rf.Stats()
	num := func(k string) float64 { v, _ := strconv.ParseUint(stats[k], 10, 64); return float64(v) }
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, num("term"))
	ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(rf.CommitIndex()))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(rf.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, float64(rf.LastIndex()))
	ch <- prometheus.MustNewConstMetric(descSnap, prometheus.GaugeValue, num("last_snapshot_index"))
}

func roleName(st raft.RaftState) string {
	switch st {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	}
	return "follower"
}

// capacityLimitLabels are the values of ticketing_capacity_rejects_total's
// limit label: the server's limits and each principal quota.
func capacityLimitLabels() []string {
	out := []string{"held", "key_waiters", "waiters", "in_flight", "connections"}
	for _, q := range quotaNames {
		out = append(out, "principal_"+q)
	}
	return out
}

// coordCollector reads coordination's sizes from the applied state at
// scrape time (on every server: a follower's state is the leader's, as far
// as it has applied).
type coordCollector struct{ s *Server }

var (
	descCoordNodes    = prometheus.NewDesc("ticketing_coord_nodes", "Coordination nodes.", nil, nil)
	descCoordSessions = prometheus.NewDesc("ticketing_coord_sessions", "Coordination sessions, by state (attached to a connection, or detached and waiting to expire).", []string{"state"}, nil)
	descCoordOwners   = prometheus.NewDesc("ticketing_coord_semaphore_owners", "Semaphore ownerships held by sessions, over all nodes.", nil, nil)
	descCoordWaiters  = prometheus.NewDesc("ticketing_coord_semaphore_waiters", "Semaphore acquires queued, over all nodes.", nil, nil)
)

func (c coordCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCoordNodes, descCoordSessions, descCoordOwners, descCoordWaiters} {
		ch <- d
	}
}

func (c coordCollector) Collect(ch chan<- prometheus.Metric) {
	var n fsm.CoordCounts
	c.s.node.Read(func(fs *fsm.State) { n = fs.CoordCounts() })
	ch <- prometheus.MustNewConstMetric(descCoordNodes, prometheus.GaugeValue, float64(n.Nodes))
	ch <- prometheus.MustNewConstMetric(descCoordSessions, prometheus.GaugeValue, float64(n.Attached), "attached")
	ch <- prometheus.MustNewConstMetric(descCoordSessions, prometheus.GaugeValue, float64(n.Sessions-n.Attached), "detached")
	ch <- prometheus.MustNewConstMetric(descCoordOwners, prometheus.GaugeValue, float64(n.Owners))
	ch <- prometheus.MustNewConstMetric(descCoordWaiters, prometheus.GaugeValue, float64(n.Waiters))
}
