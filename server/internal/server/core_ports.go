package server

// This file holds the core's seams: the small interfaces through which the
// core reaches Raft, the applied state, metrics, the server's serving state
// and the clock, and the adapters the real Server supplies. Unit tests
// (core_unit_test.go) supply fakes instead: no Raft, no fsync.

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// outcome is what became of one proposed batch.
type outcome uint8

const (
	// outcomeApplied: committed and applied; the results are the state
	// machine's, one per op.
	outcomeApplied outcome = iota
	// outcomeRefused: refused before it was written to the log, so nothing
	// of it can ever be applied (not leader, leadership transfer, shutdown).
	outcomeRefused
	// outcomeUnknown: it may or may not be applied, now or later.
	outcomeUnknown
)

// replicatedLog is Raft as the core uses it.
type replicatedLog interface {
	// propose appends one encoded batch (fsm.AppendBatch) to the log. It
	// returns at once; the entry's outcome comes from wait, which blocks.
	propose(data []byte) (wait func() (res *node.Applied, o outcome, err error))
	// barrier blocks until every entry committed before it is applied.
	barrier() error
	// leadership is this server's role and current term, read now.
	leadership() leadership
}

// appliedState is the state machine's applied state (node.Node supplies it).
type appliedState interface {
	// Read runs fn with the applied state; fn must not keep it.
	Read(fn func(*fsm.State))
	// Held is the number of tickets held in the applied state.
	Held() int
}

// servingState is the server around the core (Server supplies it).
type servingState interface {
	// setServing is told when the takeover is applied (true) and when
	// leadership is lost (false).
	setServing(on bool)
	// notLeaderFrame is the M to send to a client this server cannot serve.
	notLeaderFrame() *wire.Frame
}

// coreMetrics is where the core counts what it does.
type coreMetrics interface {
	grant()
	release()
	expiry()
	notAcquired()
	capacityReject(limit string)
	acquireSeconds(d time.Duration) // arrival to grant
	queueWait(d time.Duration)      // arrival to grant of a queued acquire
	commitSeconds(d time.Duration)  // proposal to outcome of a batch
}

// coreConfig is the configuration the core reads.
type coreConfig struct {
	nodeID    string // recorded in the takeover entry
	advertise string // the client address recorded in the takeover entry
	limits    Limits
}

// clock is the core's time: now, and timers that fire on its channel.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) clockTimer
	After(d time.Duration) <-chan time.Time
}

// clockTimer is a timer of a clock. Reset discards a value not yet received,
// as time.Timer.Reset does since Go 1.23.
type clockTimer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
}

// corePorts are the seams a core is built with.
type corePorts struct {
	log     replicatedLog
	state   appliedState
	srv     servingState
	metrics coreMetrics
	cfg     coreConfig
	logger  *slog.Logger
	clk     clock
	quota   quotaPort // per-principal quotas; nil: none
}

// serverPorts are the real Server's adapters.
func serverPorts(s *Server) corePorts {
	return corePorts{
		log:     raftLog{s.node},
		state:   s.node,
		srv:     s,
		metrics: promCore{s.metrics},
		cfg:     coreConfig{nodeID: s.cfg.NodeID, advertise: s.cfg.AdvertiseClientAddr, limits: s.cfg.Limits},
		logger:  s.log,
		clk:     wallClock{},
		quota:   serverQuotas{s},
	}
}

// raftLog is the replicatedLog of a node's Raft.
type raftLog struct{ n *node.Node }

func (l raftLog) propose(data []byte) func() (*node.Applied, outcome, error) {
	f := l.n.Raft().Apply(data, 0)
	return func() (*node.Applied, outcome, error) {
		err := f.Error()
		if err != nil {
			if neverWritten(err) {
				return nil, outcomeRefused, err
			}
			return nil, outcomeUnknown, err
		}
		res, _ := f.Response().(*node.Applied)
		if res == nil {
			return nil, outcomeUnknown, fmt.Errorf("no result from the state machine")
		}
		return res, outcomeApplied, nil
	}
}

func (l raftLog) barrier() error { return l.n.Raft().Barrier(0).Error() }

func (l raftLog) leadership() leadership {
	return leadership{leader: l.n.Leads(), term: l.n.Raft().CurrentTerm()}
}

// neverWritten reports whether Raft refused an entry before writing it to
// its log, so that nothing of it can ever be applied.
func neverWritten(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrEnqueueTimeout)
}

// promCore is the coreMetrics of the server's Prometheus registry.
type promCore struct{ m *metrics }

func (p promCore) grant()                         { p.m.grants.Inc() }
func (p promCore) release()                       { p.m.releases.Inc() }
func (p promCore) expiry()                        { p.m.expiries.Inc() }
func (p promCore) notAcquired()                   { p.m.notAcquired.Inc() }
func (p promCore) capacityReject(limit string)    { p.m.capacityRejects.WithLabelValues(limit).Inc() }
func (p promCore) acquireSeconds(d time.Duration) { p.m.acquireSeconds.Observe(d.Seconds()) }
func (p promCore) queueWait(d time.Duration)      { p.m.queueWait.Observe(d.Seconds()) }
func (p promCore) commitSeconds(d time.Duration)  { p.m.commitSeconds.Observe(d.Seconds()) }

// wallClock is the real clock.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (wallClock) NewTimer(d time.Duration) clockTimer    { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (t wallTimer) C() <-chan time.Time   { return t.t.C }
func (t wallTimer) Reset(d time.Duration) { t.t.Reset(d) }
