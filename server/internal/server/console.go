package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/console"
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// This file serves the operator's console (package console) on the HTTP
// port: who may see it, the views read from this server's state when it
// leads, and from the leader (admin op "console") when it does not.

const (
	// refusalsKept bounds the ring of recent refusals.
	refusalsKept = 200
	// leaderChangesKept bounds the leader changes the cluster page lists.
	leaderChangesKept = 20
	// Bounds of one view, so that a page stays readable and its answer
	// small whatever the cluster holds.
	consoleNodes, consoleSessions, consoleSems, consoleHolders, consoleWaiters = 50, 100, 100, 20, 20
	// consoleDataShown is how much of a semaphore's data the page shows.
	consoleDataShown    = 256
	consoleCacheEntries = 64
	// consoleCountLimit bounds the count of the keys under a prefix: a
	// count is a walk of those keys.
	consoleCountLimit = 10000
)

// consoleCacheFor is how long a view read is reused: many open pages, or a
// page refreshed again and again, cost the leader one read per query and
// period. A variable for tests.
var consoleCacheFor = time.Second

// consoleState is the console's part of a server.
type consoleState struct {
	ring *console.Ring

	mu      sync.Mutex
	changes []console.LeaderChange // oldest first
	// unreachable are the members whose heartbeats from this leader fail,
	// with their last contact (Raft's heartbeat observations).
	unreachable map[string]time.Time
	cache       map[console.Query]cachedView

	// The TLS configuration of reads from the leader, loaded once.
	tlsOnce sync.Once
	tlsCfg  *tls.Config
	tlsErr  error
}

type cachedView struct {
	v     *console.View
	until time.Time
}

// initConsole sets up what the console needs before the server logs
// anything: the ring of refusals reads the audit records of s.log.
func (s *Server) initConsole() {
	if !s.cfg.HTTP.Console {
		return
	}
	s.console = &consoleState{ring: console.NewRing(refusalsKept), cache: map[console.Query]cachedView{}, unreachable: map[string]time.Time{}}
	s.log = slog.New(console.AuditTee(s.log.Handler(), s.console.ring))
}

// watchLeaders follows Raft's observations: every change of leader is
// logged on every server, naming the new leader (Raft itself says nothing
// on a follower), and on a leader a peer whose heartbeats fail is logged
// once, and again when it is reachable (Raft's own failure records are
// rate-limited, node/hclog.go). The console's cluster page keeps both.
func (s *Server) watchLeaders() {
	r := s.node.Raft()
	// Raft drops an observation when its channel is full (a blocking
	// observer would stall Raft), so leader changes, which are rare, get a
	// channel of their own: a burst of heartbeat failures never crowds one
	// out, and every leader change is logged.
	leaders := make(chan raft.Observation, 64)
	leaderObs := raft.NewObserver(leaders, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(leaderObs)
	ch := make(chan raft.Observation, 256)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	last := ""
	if _, id := r.LeaderWithID(); id != "" {
		last = string(id)
		if s.console != nil {
			s.console.leaderChanged(last, r.CurrentTerm())
		}
	}
	down := map[string]time.Time{} // peers whose heartbeats fail, since when
	s.goRun(func() {
		defer r.DeregisterObserver(obs)
		defer r.DeregisterObserver(leaderObs)
		for {
			var o raft.Observation
			select {
			case <-s.stop:
				return
			case o = <-leaders:
			case o = <-ch:
			}
			{
				switch d := o.Data.(type) {
				case raft.LeaderObservation:
					id, term := string(d.LeaderID), r.CurrentTerm()
					if id != last {
						last = id
						if id == "" {
							s.log.Warn("leader lost: no leader known; an election follows", "term", term)
						} else {
							s.log.Info("leader changed", "leader", id, "leader_raft", string(d.LeaderAddr), "term", term, "self", id == s.cfg.NodeID)
						}
					}
					clear(down) // a new leader's heartbeats start afresh
					if s.console != nil {
						s.console.leaderChanged(id, term)
					}
				case raft.FailedHeartbeatObservation:
					peer := string(d.PeerID)
					if _, known := down[peer]; !known {
						down[peer] = time.Now()
						s.log.Warn("Raft peer unreachable: heartbeats to it fail", "peer", peer, "last_contact", d.LastContact.UTC().Format(time.RFC3339))
					}
					if s.console != nil {
						s.console.heartbeat(peer, false, d.LastContact)
					}
				case raft.ResumedHeartbeatObservation:
					peer := string(d.PeerID)
					if since, known := down[peer]; known {
						delete(down, peer)
						s.log.Info("Raft peer reachable again", "peer", peer, "unreachable_for", time.Since(since).Round(time.Millisecond))
					}
					if s.console != nil {
						s.console.heartbeat(peer, true, time.Time{})
					}
				}
			}
		}
	})
}

// heartbeat records whether this leader's heartbeats to peer succeed.
func (cs *consoleState) heartbeat(peer string, ok bool, lastContact time.Time) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if ok {
		delete(cs.unreachable, peer)
	} else if _, known := cs.unreachable[peer]; !known {
		cs.unreachable[peer] = lastContact
	}
}

// lastContact reports since when peer's heartbeats fail, if they do.
func (cs *consoleState) lastContact(peer string) (time.Time, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	t, failing := cs.unreachable[peer]
	return t, failing
}

func (cs *consoleState) leaderChanged(id string, term uint64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	clear(cs.unreachable) // a new leader's heartbeats start afresh
	if n := len(cs.changes); n > 0 && cs.changes[n-1].LeaderID == id && cs.changes[n-1].Term == term {
		return
	}
	cs.changes = append(cs.changes, console.LeaderChange{At: time.Now().UTC(), LeaderID: id, Term: term})
	if len(cs.changes) > leaderChangesKept {
		cs.changes = cs.changes[len(cs.changes)-leaderChangesKept:]
	}
}

func (cs *consoleState) leaderChanges() []console.LeaderChange {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]console.LeaderChange, 0, len(cs.changes))
	for i := len(cs.changes) - 1; i >= 0; i-- {
		out = append(out, cs.changes[i])
	}
	return out
}

func (cs *consoleState) cached(q console.Query) *console.View {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.cache[q]; ok && time.Now().Before(c.until) {
		return c.v
	}
	return nil
}

func (cs *consoleState) store(q console.Query, v *console.View) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := time.Now()
	if len(cs.cache) >= consoleCacheEntries {
		for k, c := range cs.cache {
			if now.After(c.until) {
				delete(cs.cache, k)
			}
		}
		if len(cs.cache) >= consoleCacheEntries {
			clear(cs.cache)
		}
	}
	cs.cache[q] = cachedView{v: v, until: now.Add(consoleCacheFor)}
}

// consoleHandler is the console's HTTP handler, nil when it is off.
func (s *Server) consoleHandler() http.Handler {
	if s.console == nil {
		return nil
	}
	return console.Handler(console.Options{NodeID: s.cfg.NodeID, Version: s.cfg.Build.Version, Local: s.consoleLocal, Authorize: s.consoleAuthorize, Read: s.consoleRead})
}

// httpConnKey carries the HTTP request's connection in its context, so that
// a TLS client certificate authenticates as it does on the client port.
type httpConnKey struct{}

func withHTTPConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, httpConnKey{}, c)
}

// consoleToken is the token of an HTTP request: a bearer token, or the
// password of basic authentication (what a browser prompts for).
func consoleToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "bearer":
		return strings.TrimSpace(rest)
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return ""
		}
		_, pass, _ := strings.Cut(string(raw), ":")
		return pass
	}
	return ""
}

// consoleAuthorize admits a monitor or admin principal, authenticated by
// the rules of the client port: a token, else a verified client
// certificate (when the HTTP port serves TLS). Refusals are audited.
func (s *Server) consoleAuthorize(r *http.Request) (int, string) {
	nc, _ := r.Context().Value(httpConnKey{}).(net.Conn)
	p, _, _ := s.auth.Load().authenticate([]byte(consoleToken(r)), nc)
	if p == nil {
		if s.logLimit.allow(logKey{what: "console", who: remoteHostString(r.RemoteAddr), reason: "unauthenticated"}) {
			s.log.Warn("audit", "op", "console", "outcome", "unauthenticated", "remote", r.RemoteAddr)
		}
		return http.StatusUnauthorized, "the console needs the token of a monitor or admin principal (Authorization: Bearer, or as the password) or its client certificate"
	}
	if p.role != RoleAdmin && p.role != RoleMonitor {
		s.metrics.authzRefusals.WithLabelValues("console", "role").Inc()
		if s.logLimit.allow(logKey{what: "console", who: p.name, reason: "role"}) {
			s.log.Warn("audit", "principal", p.name, "op", "console", "outcome", "denied", "reason", "role", "remote", r.RemoteAddr)
		}
		return http.StatusForbidden, fmt.Sprintf("principal %q has the %s role; the console is for monitor and admin principals", p.name, p.role)
	}
	return 0, ""
}

// consoleRead returns the view of q: this server's own when it leads,
// else the leader's, read with the caller's token (or this server's
// client certificate). A view is reused for consoleCacheFor.
func (s *Server) consoleRead(ctx context.Context, r *http.Request, q console.Query) (*console.View, error) {
	if v := s.console.cached(q); v != nil {
		return v, nil
	}
	var v *console.View
	var err error
	if s.node.Raft().State() == raft.Leader {
		v, err = s.consoleView(ctx, q)
	} else {
		v, err = s.consoleFromLeader(ctx, consoleToken(r), q)
		if err == nil && v.Refusals != nil {
			v.Refusals = mergeRefusals(v.Refusals, s.ownRefusals())
		}
	}
	if err != nil {
		return nil, err
	}
	s.console.store(q, v)
	return v, nil
}

// errNotLeaderNow: leadership moved while a view was read.
var errNotLeaderNow = errors.New("this server is no longer the leader; refresh to read from the new one")

// consoleView reads the view of q from this server, the leader.
func (s *Server) consoleView(ctx context.Context, q console.Query) (*console.View, error) {
	v := &console.View{From: s.cfg.NodeID}
	switch q.Page {
	case console.PageCluster:
		v.Cluster = s.consoleCluster()
	case console.PageTickets:
		t, err := s.consoleTickets(ctx, q)
		if err != nil {
			return nil, err
		}
		v.Tickets = t
	case console.PageCoordination:
		v.Coordination = s.consoleCoordination()
	case console.PageRefusals:
		v.Refusals = s.ownRefusals()
	default:
		return nil, fmt.Errorf("no console page %q", q.Page)
	}
	return v, nil
}

func (s *Server) consoleCluster() *console.Cluster {
	st := s.Status()
	ready, why := s.ready()
	c := &console.Cluster{NodeID: st.NodeID, Role: st.Role, LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr, Term: st.Term,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastToken: st.LastToken, Held: st.Held,
		Waiters: s.core.Waiters(), ClusterID: st.ClusterID, Version: st.Version, Ready: ready, Health: "ready",
		LeaderChanges: s.console.leaderChanges()}
	if !ready {
		c.Health = "not ready: " + strings.TrimSpace(why)
	}
	s.node.Read(func(fs *fsm.State) {
		for _, m := range st.Members {
			cm := console.Member{ID: m.ID, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr, Voter: m.Voter, Leader: m.Leader,
				Participant: fs.Admitted(m.ID)}
			if inc := fs.Incarnation(m.ID); inc != 0 {
				cm.Incarnation = fmt.Sprintf("%016x", inc)
			}
			switch last, failing := s.console.lastContact(m.ID); {
			case m.ID == s.cfg.NodeID:
				cm.Health, cm.OK = c.Health, c.Ready
			case failing && last.IsZero():
				cm.Health = "unreachable: heartbeats fail"
			case failing:
				cm.Health = "unreachable: heartbeats fail, last contact " + last.UTC().Format(time.RFC3339)
			default:
				cm.Health, cm.OK = "reachable", true
			}
			cm.Version = s.memberRelease(m.ID)
			if m.Reachable != nil {
				cm.Replication, cm.MatchIndex = true, m.MatchIndex
				if m.MatchIndex < st.CommitIndex {
					cm.Behind = st.CommitIndex - m.MatchIndex
				}
			}
			if !m.Voter && m.Reachable != nil {
				// A learner: promoted once its log reaches the commit index.
				cm.Health += fmt.Sprintf("; learner, log at %d of %d", m.MatchIndex, st.CommitIndex)
			}
			c.Members = append(c.Members, cm)
		}
	})
	return c
}

// memberRelease is member id's ticketd version: this server's own, or the
// one the member stated in its last Raft handshake with this server.
func (s *Server) memberRelease(id string) string {
	if id == s.cfg.NodeID {
		return s.cfg.Build.Version
	}
	switch rel, known := s.node.PeerRelease(id); {
	case !known:
		return "unknown: no Raft connection with it since this server started"
	case rel == "":
		return "older: its Raft handshake does not state its version"
	default:
		return rel
	}
}

// consoleTickets reads one page of held keys from the applied state, then
// asks the core (which owns the queues and lease timers) for each key's
// waiters and time left.
func (s *Server) consoleTickets(ctx context.Context, q console.Query) (*console.Tickets, error) {
	var page []fsm.HeldKey
	t := &console.Tickets{Prefix: q.Prefix, After: q.After, SortLeft: q.SortLeft, Rows: []console.Ticket{}}
	var more bool
	if q.SortLeft {
		// The order by time left is the core's (it owns the lease timers),
		// over every key of the prefix, so that paging walks one order.
		var after *core.LeftPos
		if q.After != "" {
			after = &core.LeftPos{EndMs: q.AfterEnd, Key: q.After}
		}
		var pos []core.LeftPos
		var err error
		page, pos, more, err = s.core.ByLeft(ctx, q.Prefix, after, q.Last, console.PageSize)
		if errors.Is(err, core.ErrStopped) {
			return nil, errNotLeaderNow
		}
		if err != nil {
			return nil, err
		}
		if q.Last {
			t.Last, t.Before, more = true, more, false
		}
		if more && len(pos) > 0 {
			t.NextEnd = pos[len(pos)-1].EndMs
		}
	}
	s.node.Read(func(st *fsm.State) {
		switch {
		case q.SortLeft:
		case q.Last:
			page, more = st.HoldsLastPage(q.Prefix, console.PageSize)
			t.Last, t.Before = true, more
			more = false
		default:
			page, more = st.HoldsPage(q.Prefix, q.After, console.PageSize)
		}
		if q.Prefix == "" {
			t.Matched = st.Len()
		} else {
			t.Matched, t.MatchedMore = st.CountPrefix(q.Prefix, consoleCountLimit)
		}
	})
	if more && len(page) > 0 {
		t.Next = page[len(page)-1].Key
	}
	keys, err := s.core.Keys(ctx, page, consoleWaiters)
	if errors.Is(err, core.ErrStopped) {
		return nil, errNotLeaderNow
	}
	if err != nil {
		return nil, err
	}
	for i, hk := range page {
		h, k := hk.Hold, keys[i]
		row := console.Ticket{Key: hk.Key, Token: h.Token, Owner: hex.EncodeToString(h.Owner[:]), Principal: h.Principal, Remote: k.Remote,
			GrantedAt: time.UnixMilli(h.GrantedAt).UTC(), LeaseMs: h.LeaseMs, LeftMs: int64(k.LeftMs),
			Waiters: make([]console.Waiter, 0, len(k.Waiters)), MoreWaiters: k.MoreWaiters}
		for _, w := range k.Waiters {
			row.Waiters = append(row.Waiters, console.Waiter{Owner: hex.EncodeToString(w.Owner[:]), Principal: w.Principal, Remote: w.Remote,
				WaitedMs: w.Waited.Milliseconds()})
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

func modeName(m uint8, names map[uint8]string) string {
	if n, ok := names[m]; ok {
		return n
	}
	return fmt.Sprint(m)
}

func (s *Server) consoleCoordination() *console.Coordination {
	out := &console.Coordination{Nodes: []console.CoordNode{}}
	s.node.Read(func(st *fsm.State) {
		nodes := st.CoordNodes()
		if len(nodes) > consoleNodes {
			out.MoreNodes = len(nodes) - consoleNodes
			nodes = nodes[:consoleNodes]
		}
		for _, n := range nodes {
			cn := console.CoordNode{Path: n.Path, SelfCheckMs: n.Config.SelfCheckMs, GraceMs: n.Config.GraceMs,
				ReadMode:    modeName(n.Config.ReadMode, map[uint8]string{coordsm.ReadRelaxed: "relaxed", coordsm.ReadStrict: "strict"}),
				AttachMode:  modeName(n.Config.AttachMode, map[uint8]string{coordsm.AttachStrict: "strict", coordsm.AttachRelaxed: "relaxed"}),
				MaxSessions: n.Config.MaxSessions, MaxSemaphores: n.Config.MaxSemaphores, MaxWaiters: n.Config.MaxWaiters,
				Sessions: []console.Session{}, Semaphores: []console.Semaphore{}}
			sessions := st.Sessions(n.Path)
			if len(sessions) > consoleSessions {
				cn.MoreSessions = len(sessions) - consoleSessions
				sessions = sessions[:consoleSessions]
			}
			for _, ss := range sessions {
				cn.Sessions = append(cn.Sessions, console.Session{ID: ss.ID, Desc: ss.Desc, Attached: ss.Attached, TimeoutMs: ss.TimeoutMs, SeqNo: ss.SeqNo})
			}
			names := st.SemaphoreNames(n.Path)
			if len(names) > consoleSems {
				cn.MoreSems = len(names) - consoleSems
				names = names[:consoleSems]
			}
			for _, name := range names {
				info, _ := st.DescribeSemaphore(n.Path, name, true, true)
				sem := console.Semaphore{Name: info.Name, Limit: info.Limit, Count: info.Count, Ephemeral: info.Ephemeral,
					Data: info.Data, DataBytes: len(info.Data), Owners: []console.Holder{}, Waiters: []console.Holder{}}
				if len(sem.Data) > consoleDataShown {
					sem.Data = strings.ToValidUTF8(sem.Data[:consoleDataShown], "")
				}
				desc := func(id uint64) string {
					if si, ok := st.Session(id); ok {
						return si.Desc
					}
					return ""
				}
				sem.Owners, sem.MoreOwners = holders(info.Owners, desc)
				sem.Waiters, sem.MoreWaiters = holders(info.Waiters, desc)
				cn.Semaphores = append(cn.Semaphores, sem)
			}
			out.Nodes = append(out.Nodes, cn)
		}
	})
	return out
}

// holders lists the first owners or waiters, each with its session's
// description (desc), and counts the rest.
func holders(hs []coordsm.Holder, desc func(session uint64) string) ([]console.Holder, int) {
	out := []console.Holder{}
	for i, h := range hs {
		if i == consoleHolders {
			return out, len(hs) - i
		}
		out = append(out, console.Holder{Session: h.Session, Desc: desc(h.Session), Count: h.Count, OrderID: h.OrderID})
	}
	return out, 0
}

// adminConsole answers the admin op "console" on the leader: the view as
// JSON in StatusChunk pieces, then ConsoleDone. It returns the outcome for
// the audit record.
func (s *Server) adminConsole(c *conn, id uint32, req adminwire.Request) string {
	if s.node.Raft().State() != raft.Leader {
		adminAnswer(c, id, adminwire.StatusNotLeader, s.notLeaderReply())
		return "not_leader"
	}
	if s.console == nil {
		adminAnswer(c, id, adminwire.StatusFailed, adminwire.ErrorReply{Error: fmt.Sprintf(
			"the console is off on the leader %s: enable it on every server ([http] console = true)", s.cfg.NodeID)})
		return "failed"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := console.Query{Page: req.Page, Prefix: req.Prefix, After: req.After, Last: req.Last, SortLeft: req.Sort == adminwire.SortLeft, AfterEnd: req.End}
	v := s.console.cached(q)
	var err error
	if v == nil {
		if v, err = s.consoleView(ctx, q); err == nil {
			s.console.store(q, v)
		}
	}
	if err != nil {
		adminAnswer(c, id, adminwire.StatusFailed, adminwire.ErrorReply{Error: err.Error()})
		return "failed"
	}
	data, err := json.Marshal(v)
	if err != nil {
		adminAnswer(c, id, adminwire.StatusFailed, adminwire.ErrorReply{Error: err.Error()})
		return "failed"
	}
	for rest := data; len(rest) > 0; {
		n := min(len(rest), adminwire.SnapshotChunk)
		if !c.send(&wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminwire.StatusChunk, Text: rest[:n]}) {
			return "failed"
		}
		rest = rest[n:]
	}
	adminAnswer(c, id, adminwire.StatusOK, adminwire.ConsoleDone{Size: len(data)})
	return "ok"
}

// ownRefusals are this server's latest refusals, marked with its id.
func (s *Server) ownRefusals() *console.Refusals {
	r := s.console.ring.Refusals()
	for i := range r.Records {
		r.Records[i].Node = s.cfg.NodeID
	}
	return r
}

// mergeRefusals puts a follower's own refusals (refused console requests,
// hellos, admin requests made to it) beside the leader's, newest first.
func mergeRefusals(leader, own *console.Refusals) *console.Refusals {
	out := &console.Refusals{Kept: leader.Kept, Records: append(append([]console.Refusal(nil), leader.Records...), own.Records...)}
	slices.SortStableFunc(out.Records, func(a, b console.Refusal) int { return b.At.Compare(a.At) })
	return out
}

// consoleLocal is this server's role and readiness (its /readyz), shown on
// every page: on a follower, beside the leader's view.
func (s *Server) consoleLocal() string {
	role := roleName(s.node.Raft().State())
	if ok, why := s.ready(); !ok {
		return role + ", not ready: " + strings.TrimSpace(why)
	}
	return role + ", ready"
}

// remoteHostString is remoteHost for an HTTP request's RemoteAddr.
func remoteHostString(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
