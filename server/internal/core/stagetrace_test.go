package core

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// The stage trace reports each client batch once, every stage measured
// between its own two stamps (on the core's clock), and nothing for the
// core's own entries such as the takeover.
func TestStageTraceReportsEachStageOfABatch(t *testing.T) {
	got := map[string][]time.Duration{}
	SetStageTrace(func(stage string, d time.Duration) { got[stage] = append(got[stage], d) })
	h := newCoreHarness(t, testLimits()) // the core keeps the trace it was made with
	SetStageTrace(nil)
	if len(got) != 0 {
		t.Fatalf("the takeover entry was traced: %v", got)
	}

	step, open := h.gate(fakeStep{o: Applied})
	h.log.then(step)
	cn := h.conn()
	const gathered, committing = 2 * time.Millisecond, 5 * time.Millisecond
	h.do(Request{Kind: wire.TypeAcquire, Conn: cn, ID: 1, Owner: owner('a'), Key: "k", Wait: 5, Lease: 30, At: h.clk.Now().Add(-gathered)})
	h.proposals()
	// The proposer stamps the batch before it hands it to the awaiter; once
	// the awaiter took it, only its outcome is still to come.
	for deadline := time.Now().Add(waitFor); len(h.c.await) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the awaiter did not take the proposal")
		}
	}
	h.advance(committing)
	open()
	h.settleAll()
	h.expect(cn, fr(wire.TypeGranted, 1))

	want := map[string]time.Duration{
		StageGather: gathered, StagePropose: 0, StageCommit: committing,
		StageResult: 0, StageAnswer: 0, StageTotal: gathered + committing,
	}
	for stage, d := range want {
		if len(got[stage]) != 1 || got[stage][0] != d {
			t.Errorf("stage %s: reported %v, want once %v", stage, got[stage], d)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stages reported: %v, want exactly %v", got, want)
	}
}

// The benchmark's in-flight bound holds: with one batch in flight, the next
// requests gather until its outcome, then go as one batch.
func TestInFlightBatchesBoundsTheProposals(t *testing.T) {
	SetInFlightBatches(1)
	h := newCoreHarness(t, testLimits())
	SetInFlightBatches(maxInFlightBatches)

	step, open := h.gate(fakeStep{o: Applied})
	h.log.then(step)
	a, b, c := h.conn(), h.conn(), h.conn()
	h.acquire(a, 1, 'a', "ka", 5, 30)
	h.acquire(b, 1, 'b', "kb", 5, 30)
	h.acquire(c, 1, 'c', "kc", 5, 30)
	before := len(h.proposals())
	if h.c.inflight != 1 {
		t.Fatalf("%d batches in flight, want 1", h.c.inflight)
	}
	open()
	h.settleAll()
	got := h.proposals()[before-1:]
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 2 {
		t.Fatalf("proposed %v, want [acquire] then [acquire acquire]", got)
	}
	for _, cn := range []*fakeConn{a, b, c} {
		h.expect(cn, fr(wire.TypeGranted, 1))
	}
}
