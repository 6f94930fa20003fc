package coordsm_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// Counts follows nodes, sessions (attached or not), owners and waiters.
func TestCounts(t *testing.T) {
	const now = 1_700_000_000_000
	c, tokens := coordsm.New(), uint64(0)
	if got := c.Counts(); got != (coordsm.Counts{}) {
		t.Fatalf("empty state: %+v", got)
	}
	c.Apply(now, coordsm.CreateNode, &coordsm.Op{Path: "/locks"}, &tokens)
	c.Apply(now, coordsm.CreateNode, &coordsm.Op{Path: "/jobs"}, &tokens)
	start := func() uint64 {
		return c.Apply(now, coordsm.Attach, &coordsm.Op{Path: "/locks", SeqNo: 1, TimeoutMs: 10000}, &tokens).Session
	}
	a, b, d := start(), start(), start()
	c.Apply(now, coordsm.CreateSem, &coordsm.Op{Session: a, SeqNo: 1, Name: "db", Limit: 2}, &tokens)
	c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: a, SeqNo: 1, Name: "db", Count: 1}, &tokens)
	c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: b, SeqNo: 1, Name: "db", Count: 1}, &tokens)
	c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: d, SeqNo: 1, Name: "db", Count: 2, TimeoutMs: 5000}, &tokens)
	c.Apply(now, coordsm.Detach, &coordsm.Op{Session: d, SeqNo: 1}, &tokens)
	want := coordsm.Counts{Nodes: 2, Sessions: 3, Attached: 2, Owners: 2, Waiters: 1}
	if got := c.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
}
