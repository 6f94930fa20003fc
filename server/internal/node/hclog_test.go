package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log destination written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON records written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a record is not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// raftServer stands for the raft.Server values Raft passes as peers.
type raftServer struct{ id, addr string }

func (s raftServer) String() string { return "{Voter " + s.id + " " + s.addr + "}" }

// Raft's records reach a JSON log as records with fields (not pasted into
// the message); below warnings nothing is written; a peer's repeated
// failure is written burst times per window, then summarized once with the
// count when the window ends, whether or not another record comes.
func TestRaftRecordsStructuredAndRateLimited(t *testing.T) {
	var buf syncBuffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	h := newHCLog(l).(*raftLog)
	h.lim.window = 200 * time.Millisecond // the test's own window; the server's is raftLogWindow
	down := raftServer{"n2", "10.0.0.2:5226"}
	h.Info("entering follower state", "follower", "n1")
	for range 50 {
		h.Error("failed to appendEntries to", "peer", down, "error", errors.New("dial tcp 10.0.0.2:5226: connect: connection refused"))
	}
	h.Warn("failed to heartbeat to", "peer", raftServer{"n3", "10.0.0.3:5226"}, "backoff time", 10*time.Millisecond)

	deadline := time.Now().Add(10 * time.Second)
	var recs []map[string]any
	for {
		recs = buf.records(t)
		if len(recs) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // waiting for the window's summary, with a deadline
	}
	var appendRecs, summaries, others int
	for _, r := range recs {
		if r["component"] != "raft" {
			t.Errorf("record without component=raft: %v", r)
		}
		switch r["msg"] {
		case "failed to appendEntries to":
			appendRecs++
			if r["level"] != "ERROR" || r["peer"] != down.String() || !strings.Contains(r["error"].(string), "connection refused") {
				t.Errorf("appendEntries record lacks its fields: %v", r)
			}
		case "similar Raft records suppressed":
			summaries++
			if r["suppressed"] != float64(48) || r["peer"] != down.String() || r["message"] != "failed to appendEntries to" {
				t.Errorf("summary %v, want 48 suppressed for %s", r, down)
			}
		case "failed to heartbeat to":
			others++
			if r["level"] != "WARN" || r["peer"] != "{Voter n3 10.0.0.3:5226}" {
				t.Errorf("heartbeat record lacks its fields: %v", r)
			}
		default:
			t.Errorf("unexpected record %v (info is not written)", r)
		}
	}
	if appendRecs != raftLogBurst || summaries != 1 || others != 1 {
		t.Fatalf("%d appendEntries records, %d summaries, %d heartbeat records; want %d, 1, 1:\n%v", appendRecs, summaries, others, raftLogBurst, recs)
	}
}
