package node

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// errStandingAside is what the pre-vote requests of a server that cannot
// write its log fail with: it does not stand for election.
var errStandingAside = errors.New("not standing for election: the last write to the Raft log failed (is the data directory's filesystem full?)")

// logHealth remembers that a write to the Raft log failed (a full disk,
// finding F2 of docs/reliability.md). hashicorp/raft makes a leader whose
// write fails step down, but nothing stops it from winning the next
// election (its log is as long as anyone's) and failing again, so a cluster
// with one full disk could serve nothing for as long as the disk was full.
// While the last write failed, less than hold ago, the server does not
// stand for election: its pre-votes are not sent (the pre-vote round keeps
// its term unchanged, so it disturbs nobody). A successful write (as a
// follower of a healthy leader, once space returns) ends that at once, and
// so does hold passing without writes, so that a cluster whose disks all
// filled up can elect a leader again once space returns.
type logHealth struct {
	failedAt atomic.Int64 // unix ns of the last failed write, 0 after a success
	hold     time.Duration
	logger   *slog.Logger
}

func (h *logHealth) wrote(err error) {
	if err == nil {
		if h.failedAt.Swap(0) != 0 {
			h.logger.Info("the Raft log can be written again: standing for election again")
		}
		return
	}
	if h.failedAt.Swap(time.Now().UnixNano()) == 0 {
		h.logger.Warn("writing the Raft log failed: not standing for election until a write succeeds",
			"err", err, "hold", h.hold, "fix", "free space on the data directory's filesystem")
	}
}

// standingAside reports whether the server must not stand for election.
func (h *logHealth) standingAside() bool {
	t := h.failedAt.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < h.hold
}

// healthLogStore is the Raft log store, reporting each write to logHealth.
type healthLogStore struct {
	raft.LogStore
	h *logHealth
}

func (s healthLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s healthLogStore) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	s.h.wrote(err)
	return err
}

// healthTransport is the Raft transport; it sends no pre-vote while the
// server stands aside (each refused pre-vote counts as denied).
type healthTransport struct {
	*raft.NetworkTransport
	h *logHealth
}

func (t healthTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.h.standingAside() {
		return errStandingAside
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// IsMonotonic passes the log store's answer on to Raft (see
// logstore.Store.IsMonotonic): Raft asks the store it is given.
func (s healthLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
