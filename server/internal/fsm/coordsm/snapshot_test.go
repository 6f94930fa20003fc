package coordsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// rich builds a state with every part of the section, as the fsm tests'
// richCoordState does (one ticket granted first: token 1).
func rich(t *testing.T) (*State, uint64) {
	t.Helper()
	c, tokens := New(), uint64(1)
	do := func(kind Kind, o Op) *Result {
		t.Helper()
		r := c.Apply(1_700_000_000_000, kind, &o, &tokens)
		if r.Status != Success {
			t.Fatalf("%d %+v: %v", kind, o, r.Status)
		}
		if err := c.CheckInvariants(tokens); err != nil {
			t.Fatal(err)
		}
		return r
	}
	do(CreateNode, Op{Path: "/n", Config: NodeConfig{GraceMs: 12345, MaxWaiters: 7}})
	do(CreateNode, Op{Path: "/other"})
	a := do(Attach, Op{Path: "/n", Key: "key-a", SeqNo: 1, TimeoutMs: 10000}).Session
	b := do(Attach, Op{Path: "/n", SeqNo: 1, TimeoutMs: 10000}).Session
	s := do(Attach, Op{Path: "/n", SeqNo: 1, TimeoutMs: 5000, Desc: "c"}).Session
	do(CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 3, Data: "config"})
	do(Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 2, Data: "a's"})
	do(Acquire, Op{Session: b, SeqNo: 1, Name: "s", Count: 2, TimeoutMs: 60000})
	do(Acquire, Op{Session: s, SeqNo: 1, Name: "s", Count: Exclusive, TimeoutMs: WaitForever})
	do(Acquire, Op{Session: b, SeqNo: 1, Name: "eph", Count: 1, Ephemeral: true, Data: "endpoint"})
	do(Detach, Op{Session: s, SeqNo: 1})
	do(Attach, Op{Path: "/other", SeqNo: 1, TimeoutMs: 10000})
	return c, tokens
}

func readSection(data []byte, lastToken uint64) (*State, error) {
	d := &enc.Decoder{B: data}
	c := New()
	c.ReadSnapshot(d, lastToken)
	if d.Err == nil && len(d.B) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return c, d.Err
}

// TestSnapshotRefusesUnreachable: a section holding a state the operations
// do not reach is refused as corrupt, never loaded.
func TestSnapshotRefusesUnreachable(t *testing.T) {
	c, tokens := rich(t)
	data := c.AppendSnapshot(nil)
	r, err := readSection(data, tokens)
	if err != nil {
		t.Fatalf("the section of a reachable state: %v", err)
	}
	if again := r.AppendSnapshot(nil); !bytes.Equal(again, data) {
		t.Fatal("a section read and written again changed")
	}
	for _, tc := range []struct {
		name   string
		break_ func(c *State, tokens uint64)
	}{
		{"owner of another node's session", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].owners[0].Session = 4 }},
		{"owners over the limit", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].owners[0].Count = 4 }},
		{"order id above the token counter", func(c *State, tokens uint64) { c.nodes["/n"].sems["eph"].owners[0].OrderID = tokens + 1 }},
		{"queue out of order", func(c *State, _ uint64) {
			w := c.nodes["/n"].sems["s"].waiters
			w[0].OrderID, w[1].OrderID = w[1].OrderID, w[0].OrderID
		}},
		{"head waiter fits", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].waiters[0].Count = 1 }},
		{"unused ephemeral", func(c *State, _ uint64) { c.nodes["/n"].sems["eph"].owners = nil }},
		{"ephemeral with a limit", func(c *State, _ uint64) { c.nodes["/n"].sems["eph"].limit = 5 }},
		{"version above the last drawn", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].version = c.lastVersion + 1 }},
		{"attached with an expiry", func(c *State, _ uint64) { c.sessions[1].expiresAt = 5 }},
		{"owner with a deadline", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].owners[0].Deadline = 5 }},
		{"zero count", func(c *State, _ uint64) { c.nodes["/n"].sems["s"].waiters[1].Count = 0 }},
		{"invalid config", func(c *State, _ uint64) { c.nodes["/n"].cfg.GraceMs = 1 }},
		{"session timeout 0", func(c *State, _ uint64) { c.sessions[2].timeoutMs = 0 }},
	} {
		c, tokens := rich(t)
		tc.break_(c, tokens)
		if _, err := readSection(c.AppendSnapshot(nil), tokens); err == nil || !errors.Is(err, enc.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
}
