package server

import (
	"testing"
	"time"
)

// pingServer is a Server with only what the pinger's bookkeeping uses, its
// clock pinned half-way into part 'at' of the ping interval.
func pingServer(interval time.Duration, at int64) *Server {
	s := &Server{cfg: Config{PingInterval: interval}, conns: map[*conn]struct{}{}, pingWake: make(chan struct{}, 1)}
	s.pingGroups = make([]map[*conn]struct{}, pingGroupsFor(interval))
	for i := range s.pingGroups {
		s.pingGroups[i] = map[*conn]struct{}{}
	}
	s.pingStart = time.Now().Add(-time.Duration(at)*s.pingPart() - s.pingPart()/2)
	return s
}

func (s *Server) join() *conn {
	c := &conn{}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c] = struct{}{}
	c.pingGroup, c.pingFrom = s.joinPingGroup()
	s.pingGroups[c.pingGroup][c] = struct{}{}
	return c
}

// A server without connections has no part to wake for: its pinger sleeps
// until a connection joins, instead of waking every part.
func TestPingerOfAnIdleServerHasNothingToWakeFor(t *testing.T) {
	s := pingServer(500*time.Millisecond, 1000)
	if p, ok := s.nextPingPart(900); ok {
		t.Fatalf("no connections, yet part %d is due to be pinged", p)
	}
}

// A connection is pinged first about one interval after it joined: in the
// group pinged last, and never by a part that began before it joined, even
// one the pinger has yet to catch up on.
func TestFirstPingComesAboutOneIntervalAfterJoining(t *testing.T) {
	const at = 1000
	s := pingServer(500*time.Millisecond, at)
	groups := int64(len(s.pingGroups))
	c := s.join()
	if want := int((at - 1) % groups); c.pingGroup != want {
		t.Fatalf("joined group %d, want %d (the group pinged last)", c.pingGroup, want)
	}
	// The pinger, behind by a whole interval, catches up from at-groups.
	p, ok := s.nextPingPart(at - groups)
	if !ok {
		t.Fatal("a connection joined, yet no part is due")
	}
	for q := at - groups; q < p; q++ {
		if len(s.pingable(q)) != 0 {
			t.Fatalf("part %d pings someone before part %d", q, p)
		}
	}
	if got := s.pingable(p); len(got) != 0 {
		t.Fatalf("part %d, which began before the connection joined, pings it", p)
	}
	next := at - 1 + groups
	if got := s.pingable(next); len(got) != 1 || got[0] != c {
		t.Fatalf("part %d (about one interval later) pings %d connections, want the new one", next, len(got))
	}
	if p, ok := s.nextPingPart(at); !ok || p != next {
		t.Fatalf("next part to wake for from %d: %d %v, want %d", at, p, ok, next)
	}
}
