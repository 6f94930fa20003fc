package core

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Unit tests of the leader's core on fakes (fake_test.go): the rules of
// docs/design.md ("The leader's core") without Raft or fsync. The real-Raft
// tests (tickets_test.go, orphan_test.go, deadline_test.go, ...) prove the
// same rules end to end.

// grant acquires key for owner o on cn (free key) and returns the token.
func (h *coreHarness) grant(cn *fakeConn, id uint32, o byte, key string, lease uint8) uint64 {
	h.t.Helper()
	h.acquire(cn, id, o, key, 5, lease)
	h.settleAll()
	return h.expect(cn, fr(wire.TypeGranted, id))[0].Token
}

func opKinds(ops []fsm.Op) []fsm.OpKind {
	var k []fsm.OpKind
	for _, op := range ops {
		k = append(k, op.Kind)
	}
	return k
}

// Waiters are granted in arrival order, each by the entry that holds the
// release that frees the key (one commit per handoff).
func TestCoreFIFOOrderOfWaiters(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a := h.conn()
	tok := h.grant(a, 1, 'a', "k", 30)

	waiters := []*fakeConn{h.conn(), h.conn(), h.conn()}
	for i, cn := range waiters {
		h.acquire(cn, 10, byte('b'+i), "k", 10, 30)
		q := h.expect(cn, fr(wire.TypeQueued, 10))
		if q[0].Count != uint32(i+1) {
			t.Fatalf("waiter %d queued at position %d, want %d", i, q[0].Count, i+1)
		}
	}
	if h.c.inflight != 0 {
		t.Fatalf("queueing proposed %d batches; a waiter queues without a commit", h.c.inflight)
	}

	holder := a
	for i, cn := range waiters {
		before := len(h.proposals())
		h.release(holder, 2, "k", tok)
		h.settleAll()
		h.expect(holder, fr(wire.TypeReleased, 2))
		got := h.proposals()[before:]
		if len(got) != 1 || len(got[0]) != 2 || got[0][0].Kind != fsm.OpRelease || got[0][1].Kind != fsm.OpAcquire || got[0][1].Owner != fsm.Owner(owner(byte('b'+i))) {
			t.Fatalf("handoff %d proposed %v, want one entry [release, acquire by %c]", i, got, 'b'+i)
		}
		g := h.expect(cn, fr(wire.TypeGranted, 10))
		if g[0].Token <= tok {
			t.Fatalf("waiter %d granted token %d after token %d", i, g[0].Token, tok)
		}
		for _, later := range waiters[i+1:] {
			h.expect(later) // still waiting
		}
		holder, tok = cn, g[0].Token
	}
	if h.m.get("grant") != 4 || h.m.get("release") != 3 {
		t.Fatalf("metrics: %d grants, %d releases; want 4 and 3", h.m.get("grant"), h.m.get("release"))
	}
}

// A lease that runs out is expired through the log, and the head waiter is
// granted by the same entry.
func TestCoreHandoffOnExpiry(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	tok := h.grant(a, 1, 'a', "k", 1)
	h.acquire(b, 2, 'b', "k", 10, 5)
	h.expect(b, fr(wire.TypeQueued, 2))

	h.advance(999 * time.Millisecond)
	if h.c.inflight != 0 {
		t.Fatal("the lease expired before its time")
	}
	h.advance(time.Millisecond)
	if h.c.inflight != 1 {
		t.Fatalf("%d batches in flight at the lease's end, want the expiry", h.c.inflight)
	}
	h.settleAll()
	ps := h.proposals()
	last := ps[len(ps)-1]
	if len(last) != 2 || last[0].Kind != fsm.OpExpire || last[0].Token != tok || last[1].Kind != fsm.OpAcquire {
		t.Fatalf("expiry proposed %v, want one entry [expire token %d, acquire]", opKinds(last), tok)
	}
	g := h.expect(b, fr(wire.TypeGranted, 2))
	if hold, _ := h.log.hold("k"); hold.Token != g[0].Token || hold.Owner != fsm.Owner(owner('b')) {
		t.Fatalf("state holds %+v, want b's token %d", hold, g[0].Token)
	}
	h.expect(a) // the expired holder is told nothing
	if h.m.get("expiry") != 1 {
		t.Fatalf("%d expiries counted, want 1", h.m.get("expiry"))
	}
}

// A new leader restarts every lease in full from its takeover: leases are
// extended, never shortened.
func TestCoreTakeoverRestartsLeasesInFull(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a := h.conn()
	h.grant(a, 1, 'a', "k", 1)
	h.advance(600 * time.Millisecond)

	h.lead() // leadership lost and regained: term 2
	if got := h.srv.calls; len(got) < 2 || got[len(got)-2] || !got[len(got)-1] {
		t.Fatalf("setServing calls %v, want ... false, true", got)
	}
	h.advance(600 * time.Millisecond) // 1.2 s after the grant, 0.6 s after the takeover
	if h.c.inflight != 0 {
		t.Fatal("the lease was expired less than its length after the takeover")
	}
	h.advance(400 * time.Millisecond)
	h.settleAll()
	if _, held := h.log.hold("k"); held {
		t.Fatal("the hold outlived its full lease after the takeover")
	}
	if h.m.get("expiry") != 1 {
		t.Fatalf("%d expiries counted, want 1", h.m.get("expiry"))
	}
}

// A cancelled waiter is answered X and leaves the queue; the next one gets
// the key.
func TestCoreCancelOfQueuedWaiter(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b, c := h.conn(), h.conn(), h.conn()
	tok := h.grant(a, 1, 'a', "k", 30)
	h.acquire(b, 2, 'b', "k", 10, 30)
	h.acquire(c, 3, 'c', "k", 10, 30)
	h.expect(b, fr(wire.TypeQueued, 2))
	h.expect(c, fr(wire.TypeQueued, 3))

	h.cancel(b, 2, 'b')
	h.expect(b, fr(wire.TypeCancelled, 2))
	if h.c.inflight != 0 {
		t.Fatal("cancelling a queued waiter proposed something")
	}
	h.release(a, 4, "k", tok)
	h.settleAll()
	h.expect(a, fr(wire.TypeReleased, 4))
	h.expect(b)
	h.expect(c, fr(wire.TypeGranted, 3))
	if h.c.waiters != 0 || len(h.c.owners) != 0 {
		t.Fatalf("%d waiters and %d owners left", h.c.waiters, len(h.c.owners))
	}
}

// Requests of one owner share one waiter and one answer; the same owner on
// another key is not acquired; an owner asking for the key it holds gets its
// grant again without a commit.
func TestCoreDuplicateOwnerRequests(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b, b2 := h.conn(), h.conn(), h.conn()
	tok := h.grant(a, 1, 'a', "k", 30)

	h.acquire(b, 2, 'b', "k", 10, 30)
	h.acquire(b2, 3, 'b', "k", 10, 30) // the same owner again, on another connection
	h.expect(b, fr(wire.TypeQueued, 2))
	h.expect(b2, fr(wire.TypeQueued, 3))
	if n := h.c.queues["k"].waiting.Len(); n != 1 {
		t.Fatalf("%d queue entries for one owner, want 1", n)
	}
	h.acquire(b2, 4, 'b', "other", 10, 30) // that owner names an attempt on k
	h.expect(b2, fr(wire.TypeNotAcquired, 4))

	h.release(a, 5, "k", tok)
	h.settleAll()
	g1, g2 := h.expect(b, fr(wire.TypeGranted, 2)), h.expect(b2, fr(wire.TypeGranted, 3))
	if g1[0].Token != g2[0].Token {
		t.Fatalf("one owner's requests got tokens %d and %d", g1[0].Token, g2[0].Token)
	}
	before := len(h.proposals())
	h.acquire(b, 6, 'b', "k", 0, 30) // the holder asks again
	g3 := h.expect(b, fr(wire.TypeGranted, 6))
	if g3[0].Token != g1[0].Token || h.c.inflight != 0 || len(h.proposals()) != before {
		t.Fatalf("the holder's repeat got token %d (want %d) and proposed %d entries", g3[0].Token, g1[0].Token, len(h.proposals())-before)
	}
}

// A grant nobody can receive (its connection closed while the attempt was
// committing) is released at once, and the key goes to the next waiter.
func TestCoreOrphanGrantReleased(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	b, c := h.conn(), h.conn()
	step, open := h.gate(fakeStep{o: Applied})
	h.log.then(step)
	h.acquire(b, 1, 'b', "k", 10, 30) // its attempt is in flight, held at the gate
	h.acquire(c, 2, 'c', "k", 10, 30)
	h.expect(c, fr(wire.TypeQueued, 2))
	h.close(b)
	open()
	h.settle() // the grant: undelivered, so its release is proposed with c's attempt
	if h.c.inflight != 1 {
		t.Fatalf("%d batches in flight after the orphan grant, want its release", h.c.inflight)
	}
	ps := h.proposals()
	last := ps[len(ps)-1]
	if len(last) != 2 || last[0].Kind != fsm.OpRelease || last[1].Kind != fsm.OpAcquire {
		t.Fatalf("after the orphan grant proposed %v, want [release, acquire]", opKinds(last))
	}
	h.settleAll()
	h.expect(c, fr(wire.TypeGranted, 2))
	if hold, _ := h.log.hold("k"); hold.Owner != fsm.Owner(owner('c')) {
		t.Fatalf("the key is held by %x, want c", hold.Owner)
	}
	if h.m.get("release") != 0 {
		t.Fatal("an orphan release was counted as a client's release")
	}
}

// A batch refused before it was written, while this server stays leader, is
// proposed again with the same ops, and its requests are answered then.
// Requests accepted after it wait behind it: they go in the same entry,
// after its ops.
func TestCoreRefusedBatchReproposed(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	h.log.then(fakeStep{o: Refused})
	h.acquire(a, 1, 'a', "k", 5, 30)
	h.settle()
	h.expect(a) // no answer yet
	if _, held := h.log.hold("k"); held {
		t.Fatal("a refused batch was applied")
	}
	refused := h.proposals()[len(h.proposals())-1]
	h.acquire(b, 2, 'b', "j", 5, 30) // accepted meanwhile, proposed behind the retry
	if h.c.inflight != 0 {
		t.Fatal("a request was proposed ahead of the refused batch's retry")
	}
	h.advance(retryDelay)
	h.settleAll()
	h.expect(a, fr(wire.TypeGranted, 1))
	h.expect(b, fr(wire.TypeGranted, 2))
	ps := h.proposals()
	if again := ps[len(ps)-1]; len(again) != 2 || again[0] != refused[0] || again[1].Key != "j" {
		t.Fatalf("re-proposed %v, want the refused %v then the later acquire", again, refused)
	}
}

// An outcome that is unknown (the entry may be applied) ends its clients
// with E and makes the leader start over from the applied state: a new
// barrier and takeover, and timers rebuilt from what was applied.
func TestCoreUnknownOutcomeStartsOver(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	h.log.then(fakeStep{o: Unknown, apply: true})
	h.acquire(a, 1, 'a', "k", 5, 1)
	h.acquire(b, 2, 'b', "k", 5, 1) // queued behind a's attempt
	h.expect(b, fr(wire.TypeQueued, 2))
	epoch := h.c.epoch
	h.settle()
	e := h.expect(a, fr(wire.TypeError, 0))
	if wire.Code(e[0].Code) != wire.CodeInternal || !a.closing {
		t.Fatalf("a's client got code %d (closing %v), want internal and closed", e[0].Code, a.closing)
	}
	if h.c.epoch != epoch+1 || h.c.serving || !h.c.leading {
		t.Fatalf("after an unknown Outcome: epoch %d (was %d), serving %v, leading %v; want a new epoch, leading, not serving", h.c.epoch, epoch, h.c.serving, h.c.leading)
	}
	if calls := h.srv.calls; calls[len(calls)-1] {
		t.Fatal("the server was not told the core stopped serving")
	}
	h.takeover()
	if h.c.waiters != 0 {
		t.Fatal("waiters of the previous epoch survived the restart")
	}
	// The entry was applied after all: the new takeover found the hold and
	// expires it at its lease's end.
	if _, held := h.log.hold("k"); !held {
		t.Fatal("the fake did not apply the entry")
	}
	h.advance(time.Second)
	h.settleAll()
	if _, held := h.log.hold("k"); held {
		t.Fatal("the hold applied by the unknown entry was never expired: no timer after the restart")
	}
}

// A batch keeps each op with its cause through add and merge (retryNow
// merges refused batches in front of the pending one), so result i is
// answered for cause i.
func TestBatchKeepsOpsAndCausesInStep(t *testing.T) {
	var a, b, c batch
	a.add(fsm.Op{Kind: fsm.OpAcquire, Key: "a"}, cause{kind: causeAttempt})
	b.addRead(readReq{key: "r"})
	b.add(fsm.Op{Kind: fsm.OpRelease, Key: "b"}, cause{kind: causeRelease, id: 7})
	b.add(fsm.Op{Kind: fsm.OpExpire, Key: "c"}, cause{kind: causeExpire})
	c.merge(&a)
	c.merge(&b)
	if c.len() != 3 || len(c.reads) != 1 || c.empty() {
		t.Fatalf("merged batch has %d ops and %d reads, want 3 and 1", c.len(), len(c.reads))
	}
	want := []struct {
		key  string
		kind causeKind
	}{{"a", causeAttempt}, {"b", causeRelease}, {"c", causeExpire}}
	i := 0
	c.each(make([]fsm.Result, 3), func(op *fsm.Op, cs cause, _ fsm.Result) {
		if op.Key != want[i].key || cs.kind != want[i].kind {
			t.Fatalf("op %d is %q with cause %d, want %q with %d", i, op.Key, cs.kind, want[i].key, want[i].kind)
		}
		i++
	})
	if i != 3 {
		t.Fatalf("each visited %d ops, want 3", i)
	}
}
