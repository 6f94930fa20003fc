package server

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Quota limits what one principal may use, so that one application on a
// shared cluster cannot take what the others need. Zero (the default) leaves
// a resource bounded by the server's [limits] only, as before quotas.
// Reloaded with the rest of [auth] (SIGHUP); a lowered quota refuses new
// use and never ends what is already held.
type Quota struct {
	// Connections: open connections of the principal on this server.
	Connections int `toml:"connections"`
	// HeldTickets: tickets held by the principal (decided by the leader).
	HeldTickets int `toml:"held_tickets"`
	// Waiters: the principal's acquires queued for a key (leader).
	Waiters int `toml:"waiters"`
	// InFlight: the principal's requests without a final answer, over all
	// its connections on this server. Releases count but are never refused.
	InFlight int `toml:"in_flight"`
	// CoordinationSessions: coordination sessions attached by the
	// principal's connections (leader).
	CoordinationSessions int `toml:"coordination_sessions"`
	// RequestsPerSecond: the principal's requests per second on this
	// server (every request but those that give back: cancel, release,
	// coordination release and stop), with bursts of RequestBurst (default: one
	// second's worth).
	RequestsPerSecond float64 `toml:"requests_per_second"`
	RequestBurst      int     `toml:"request_burst"`
}

// validate appends the problems of a principal's quota to bad.
func (q *Quota) validate(where string, bad func(string, ...any)) {
	for name, v := range map[string]int{"connections": q.Connections, "held_tickets": q.HeldTickets, "waiters": q.Waiters,
		"in_flight": q.InFlight, "coordination_sessions": q.CoordinationSessions, "request_burst": q.RequestBurst} {
		if v < 0 {
			bad("%s: quota.%s is %d: want 0 (no quota) or more", where, name, v)
		}
	}
	if q.RequestsPerSecond < 0 || math.IsNaN(q.RequestsPerSecond) || math.IsInf(q.RequestsPerSecond, 0) {
		bad("%s: quota.requests_per_second is %v: want 0 (no quota) or more", where, q.RequestsPerSecond)
	}
	if q.RequestBurst > 0 && q.RequestsPerSecond == 0 {
		bad("%s: quota.request_burst needs quota.requests_per_second", where)
	}
}

// Names of the quotas in metrics and messages.
const (
	quotaConnections = "connections"
	quotaHeld        = core.QuotaHeld
	quotaWaiters     = core.QuotaWaiters
	quotaInFlight    = "in_flight"
	quotaSessions    = core.QuotaSessions
	quotaRate        = "requests_per_second"
)

const numQuotas = 6

var quotaNames = []string{quotaConnections, quotaHeld, quotaWaiters, quotaInFlight, quotaSessions, quotaRate}

// quotaOfReason names the quota of a capacity reason, "" for a server limit.
func quotaOfReason(reason uint8) string {
	switch reason {
	case wire.CapacityPrincipalConnections:
		return quotaConnections
	case wire.CapacityPrincipalHeld:
		return quotaHeld
	case wire.CapacityPrincipalWaiters:
		return quotaWaiters
	case wire.CapacityPrincipalInFlight:
		return quotaInFlight
	case wire.CapacityPrincipalRate:
		return quotaRate
	}
	return ""
}

// principalUsage is what one principal uses on this server, by name; it
// outlives reloads, so that a reload changes the quotas, not the counts.
type principalUsage struct {
	conns    atomic.Int64
	inFlight atomic.Int64
	// waiters and sessions: the leader's core publishes its counts here.
	waiters  atomic.Int64
	sessions atomic.Int64
	rejects  [numQuotas]atomic.Uint64

	rateMu sync.Mutex
	tokens float64
	last   time.Time
}

var quotaIndex = map[string]int{quotaConnections: 0, quotaHeld: 1, quotaWaiters: 2, quotaInFlight: 3, quotaSessions: 4, quotaRate: 5}

// allowRequest takes one request from the principal's rate bucket.
func (u *principalUsage) allowRequest(q *Quota, now time.Time) bool {
	if q.RequestsPerSecond <= 0 {
		return true
	}
	burst := float64(q.RequestBurst)
	if burst <= 0 {
		burst = math.Max(1, q.RequestsPerSecond)
	}
	u.rateMu.Lock()
	defer u.rateMu.Unlock()
	if u.last.IsZero() {
		u.tokens = burst
	} else {
		u.tokens = math.Min(burst, u.tokens+now.Sub(u.last).Seconds()*q.RequestsPerSecond)
	}
	u.last = now
	if u.tokens < 1 {
		return false
	}
	u.tokens--
	return true
}

// usageOf returns the usage of the named principal, made on first use.
// Names come from the configuration, so the map is bounded by it.
func (s *Server) usageOf(name string) *principalUsage {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	u := s.usage[name]
	if u == nil {
		u = &principalUsage{}
		s.usage[name] = u
	}
	return u
}

// quotaOf is the quota of the named principal in the settings in force.
func (s *Server) quotaOf(name string) Quota {
	if p := s.auth.Load().byName[name]; p != nil {
		return p.quota
	}
	return Quota{}
}

// quotaRejected counts a refusal for a principal's quota, per principal
// (ticketing_capacity_rejects_total is counted where B is sent).
func (s *Server) quotaRejected(name, quota string) {
	s.usageOf(name).rejects[quotaIndex[quota]].Add(1)
}

// connQuotaRejected counts a refusal decided on a connection (not by the core).
func (s *Server) connQuotaRejected(name, quota string) {
	s.metrics.capacityRejects.WithLabelValues("principal_" + quota).Inc()
	s.quotaRejected(name, quota)
}

// admitConn counts the connection against its principal's connections
// quota; false when the principal is at it.
func (c *conn) admitConn(p *principal) bool {
	u := c.srv.usageOf(p.name)
	if n := u.conns.Add(1); p.quota.Connections > 0 && n > int64(p.quota.Connections) {
		u.conns.Add(-1)
		c.srv.connQuotaRejected(p.name, quotaConnections)
		return false
	}
	c.use = u
	return true
}

// beginQuota counts a request against its principal's in-flight quota;
// false when the principal is at it (nothing counted then), unless the
// request gives something back (always counted, never refused).
func (c *conn) beginQuota(givesBack bool) bool {
	u := c.use
	if u == nil {
		return true
	}
	q := c.srv.quotaOf(c.principal).InFlight
	if n := u.inFlight.Add(1); q > 0 && n > int64(q) && !givesBack {
		u.inFlight.Add(-1)
		c.srv.connQuotaRejected(c.principal, quotaInFlight)
		return false
	}
	return true
}

// rateRefusalPause is how long a connection is not read after a request of
// it was refused for its principal's rate: a client that retries at once
// would otherwise make the server spend its CPU on refusals, the cost the
// quota is there to keep from the other principals. Its requests wait in
// the socket meanwhile (TCP backpressure).
const rateRefusalPause = 10 * time.Millisecond

// overRate takes one request from the principal's rate quota. When the
// principal is over it, the request is answered B (reason 10), the
// connection is not read for rateRefusalPause, and overRate reports true.
// It runs on the connection's reader.
func (c *conn) overRate(id uint32) bool {
	if c.use == nil {
		return false
	}
	q := c.srv.quotaOf(c.principal)
	if c.use.allowRequest(&q, time.Now()) {
		return false
	}
	c.srv.connQuotaRejected(c.principal, quotaRate)
	c.send(&wire.Frame{Type: wire.TypeCapacity, ID: id, Reason: wire.CapacityPrincipalRate})
	t := time.NewTimer(rateRefusalPause)
	select {
	case <-t.C:
	case <-c.srv.stop:
		t.Stop()
	}
	return true
}

// principalCollector exposes per-principal usage, quotas and refusals for
// the principals of the settings in force: a closed set of label values,
// whatever clients send.
type principalCollector struct{ s *Server }

var (
	descPrincipalUse = prometheus.NewDesc("ticketing_principal_usage",
		"What a configured principal uses, by quota: connections and in_flight on this server; held_tickets, waiters and coordination_sessions as the leader counts them.",
		[]string{"principal", "quota"}, nil)
	descPrincipalQuota = prometheus.NewDesc("ticketing_principal_quota",
		"A configured principal's quota (0: none), by quota.", []string{"principal", "quota"}, nil)
	descPrincipalRejects = prometheus.NewDesc("ticketing_principal_quota_rejects_total",
		"Requests and connections of a configured principal refused for its quota, by quota.", []string{"principal", "quota"}, nil)
)

func (pc principalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPrincipalUse
	ch <- descPrincipalQuota
	ch <- descPrincipalRejects
}

func (pc principalCollector) Collect(ch chan<- prometheus.Metric) {
	s := pc.s
	t := s.auth.Load()
	held := map[string]int{}
	s.node.Read(func(st *fsm.State) {
		for name := range t.byName {
			held[name] = st.HeldBy(name)
		}
	})
	for name, p := range t.byName {
		if name == AnonymousPrincipal || name == LegacyPrincipal {
			continue // not configured by name, no quotas
		}
		u := s.usageOf(name)
		use := map[string]float64{quotaConnections: float64(u.conns.Load()), quotaInFlight: float64(u.inFlight.Load()),
			quotaHeld: float64(held[name]), quotaWaiters: float64(u.waiters.Load()), quotaSessions: float64(u.sessions.Load())}
		q := p.quota
		limit := map[string]float64{quotaConnections: float64(q.Connections), quotaHeld: float64(q.HeldTickets), quotaWaiters: float64(q.Waiters),
			quotaInFlight: float64(q.InFlight), quotaSessions: float64(q.CoordinationSessions), quotaRate: q.RequestsPerSecond}
		for _, qn := range quotaNames {
			if v, ok := use[qn]; ok {
				ch <- prometheus.MustNewConstMetric(descPrincipalUse, prometheus.GaugeValue, v, name, qn)
			}
			ch <- prometheus.MustNewConstMetric(descPrincipalQuota, prometheus.GaugeValue, limit[qn], name, qn)
			ch <- prometheus.MustNewConstMetric(descPrincipalRejects, prometheus.CounterValue, float64(u.rejects[quotaIndex[qn]].Load()), name, qn)
		}
	}
}
