package server

// This file holds the Server's side of the leader core's seams (package
// core): the adapters through which the core reaches Raft, metrics, quotas
// and the serving state. The connections' side is replier.go.

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// corePorts are the real Server's adapters.
func corePorts(s *Server) core.Ports {
	l := s.cfg.Limits
	return core.Ports{
		Log:     raftLog{s.node},
		State:   s.node,
		Server:  servingPort{s},
		Metrics: promCore{s.metrics},
		Config: core.Config{NodeID: s.cfg.NodeID, Advertise: s.cfg.AdvertiseClientAddr,
			Limits: core.Limits{MaxHeld: l.MaxHeld, MaxWaiters: l.MaxWaiters, MaxWaitersPerKey: l.MaxWaitersPerKey}},
		Logger: s.log,
		Clock:  core.WallClock{},
		Quotas: serverQuotas{s},
	}
}

// raftLog is the core's ReplicatedLog on a node's Raft.
type raftLog struct{ n *node.Node }

func (l raftLog) Propose(data []byte) func() ([]fsm.Result, core.Outcome, error) {
	f := l.n.Raft().Apply(data, 0)
	return func() ([]fsm.Result, core.Outcome, error) {
		err := f.Error()
		if err != nil {
			if neverWritten(err) {
				return nil, core.Refused, err
			}
			return nil, core.Unknown, err
		}
		res, _ := f.Response().(*node.Applied)
		if res == nil {
			return nil, core.Unknown, fmt.Errorf("no result from the state machine")
		}
		return res.Results, core.Applied, nil
	}
}

func (l raftLog) Barrier() error { return l.n.Raft().Barrier(0).Error() }

func (l raftLog) Leadership() core.Leadership {
	return core.Leadership{Leader: l.n.Leads(), Term: l.n.Raft().CurrentTerm()}
}

// neverWritten reports whether Raft refused an entry before writing it to
// its log, so that nothing of it can ever be applied.
func neverWritten(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrEnqueueTimeout)
}

// servingPort is the core's view of the Server's serving state.
type servingPort struct{ s *Server }

func (p servingPort) SetServing(on bool)          { p.s.setServing(on) }
func (p servingPort) NotLeaderFrame() *wire.Frame { return p.s.notLeaderFrame() }

// promCore is the core's Metrics on the server's Prometheus registry.
type promCore struct{ m *metrics }

func (p promCore) Grant()       { p.m.grants.Inc() }
func (p promCore) Release()     { p.m.releases.Inc() }
func (p promCore) Expiry()      { p.m.expiries.Inc() }
func (p promCore) NotAcquired() { p.m.notAcquired.Inc() }
func (p promCore) CapacityReject(reason uint8) {
	p.m.capacityRejects.WithLabelValues(capacityLabel(reason)).Inc()
}
func (p promCore) AcquireSeconds(d time.Duration) { p.m.acquireSeconds.Observe(d.Seconds()) }
func (p promCore) QueueWait(d time.Duration)      { p.m.queueWait.Observe(d.Seconds()) }
func (p promCore) CommitSeconds(d time.Duration)  { p.m.commitSeconds.Observe(d.Seconds()) }

// capacityLabel is the limit label of a capacity reason in
// ticketing_capacity_rejects_total.
func capacityLabel(reason uint8) string {
	switch reason {
	case wire.CapacityHeld:
		return "held"
	case wire.CapacityKeyWaiters:
		return "key_waiters"
	case wire.CapacityWaiters:
		return "waiters"
	case wire.CapacityInFlight:
		return "in_flight"
	case wire.CapacityConnections:
		return "connections"
	}
	if q := quotaOfReason(reason); q != "" {
		return "principal_" + q
	}
	return "other"
}

// serverQuotas is the core's Quotas: the settings in force, and the usage
// gauges the core's counts are published to.
type serverQuotas struct{ s *Server }

func (q serverQuotas) QuotaOf(p string) core.Quota {
	qu := q.s.quotaOf(p)
	return core.Quota{HeldTickets: qu.HeldTickets, Waiters: qu.Waiters, CoordinationSessions: qu.CoordinationSessions}
}
func (q serverQuotas) Rejected(p, quota string)        { q.s.quotaRejected(p, quota) }
func (q serverQuotas) PublishWaiters(p string, n int)  { q.s.usageOf(p).waiters.Store(int64(n)) }
func (q serverQuotas) PublishSessions(p string, n int) { q.s.usageOf(p).sessions.Store(int64(n)) }
