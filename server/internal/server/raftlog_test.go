package server_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// jsonLogs keeps each server's JSON log records, by node id.
type jsonLogs struct {
	mu   sync.Mutex
	bufs map[string]*logBuffer
}

func (j *jsonLogs) logger(id string) *slog.Logger {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.bufs[id] == nil {
		j.bufs[id] = &logBuffer{}
	}
	return slog.New(slog.NewJSONHandler(j.bufs[id], nil))
}

// find returns the records of server id with message msg.
func (j *jsonLogs) find(t *testing.T, id, msg string) []map[string]any {
	j.mu.Lock()
	b := j.bufs[id]
	j.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s logged a line that is not JSON: %q", id, line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// Every server logs each change of leader, naming the new one; the leader
// logs a follower it cannot reach once, and again when it is back; Raft's
// own records are JSON records with fields like every other.
func TestRaftEventsLogged(t *testing.T) {
	logs := &jsonLogs{bufs: map[string]*logBuffer{}}
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Logger = logs.logger(cfg.NodeID)
	}))
	l := c.LeaderIndex(t)
	leaderID := c.Config(l).NodeID
	for i := range c.Len() {
		id := c.Config(i).NodeID
		testcluster.WaitFor(t, 10*time.Second, id+" logs the leader", func() bool {
			for _, r := range logs.find(t, id, "leader changed") {
				if r["leader"] == leaderID {
					return true
				}
			}
			return false
		})
	}

	f := (l + 1) % c.Len()
	followerID := c.Config(f).NodeID
	c.Kill(f)
	testcluster.WaitFor(t, 20*time.Second, "the leader logs the follower unreachable", func() bool {
		return len(logs.find(t, leaderID, "Raft peer unreachable: heartbeats to it fail")) > 0
	})
	c.Restart(f)
	testcluster.WaitFor(t, 20*time.Second, "the leader logs the follower back", func() bool {
		for _, r := range logs.find(t, leaderID, "Raft peer reachable again") {
			if r["peer"] == followerID && r["unreachable_for"] != nil {
				return true
			}
		}
		return false
	})
	if n := len(logs.find(t, leaderID, "Raft peer unreachable: heartbeats to it fail")); n != 1 {
		t.Errorf("the leader logged the follower unreachable %d times, want once", n)
	}
	// A leadership transfer: every server names the new leader.
	if err := c.Server(l).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	// The old leader may still serve for a moment after the transfer
	// returns: wait for a server other than it to lead.
	newID := ""
	testcluster.WaitFor(t, 20*time.Second, "a new leader serves", func() bool {
		for i := range c.Len() {
			if s := c.Server(i); s != nil && s.IsServing() && c.Config(i).NodeID != leaderID {
				newID = c.Config(i).NodeID
				return true
			}
		}
		return false
	})
	for i := range c.Len() {
		id := c.Config(i).NodeID
		testcluster.WaitFor(t, 10*time.Second, id+" logs the new leader "+newID, func() bool {
			for _, r := range logs.find(t, id, "leader changed") {
				if r["leader"] == newID && newID != leaderID {
					return true
				}
			}
			return false
		})
	}
	// Raft's own failure records while the follower was down: fields, not
	// text pasted into the message.
	for _, msg := range []string{"failed to appendEntries to", "failed to heartbeat to"} {
		for _, r := range logs.find(t, leaderID, msg) {
			if r["component"] != "raft" || r["peer"] == nil {
				t.Errorf("Raft record without its fields: %v", r)
			}
		}
	}
}
