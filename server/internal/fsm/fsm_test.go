package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

var (
	ownerA = Owner{0xa}
	ownerB = Owner{0xb}
	ownerC = Owner{0xc}
)

func acq(key string, o Owner, leaseMs uint32) Op {
	return Op{Kind: OpAcquire, Key: key, Owner: o, LeaseMs: leaseMs}
}
func rel(key string, token uint64) Op { return Op{Kind: OpRelease, Key: key, Token: token} }
func exp(key string, token uint64) Op { return Op{Kind: OpExpire, Key: key, Token: token} }
func takeover(id, addr string) Op     { return Op{Kind: OpTakeover, NodeID: id, Addr: addr} }
func relOwner(key string, o Owner) Op { return Op{Kind: OpReleaseOwner, Key: key, Owner: o} }

// step is one batch and the results it must give; a zero Hold in a wanted
// result is not checked.
type step struct {
	time int64
	ops  []Op
	want []Result
}

func res(s Status) Result { return Result{Status: s} }
func resHold(s Status, token uint64, o Owner, lease uint32, granted, expires int64) Result {
	return Result{Status: s, Hold: Hold{Token: token, Owner: o, LeaseMs: lease, GrantedAt: granted, ExpiresAt: expires}}
}

func runSteps(t *testing.T, s *State, steps []step) {
	t.Helper()
	for i, st := range steps {
		got := s.Apply(Batch{Time: st.time, Ops: st.ops})
		if len(got) != len(st.ops) {
			t.Fatalf("batch %d: %d results for %d ops", i, len(got), len(st.ops))
		}
		for j, w := range st.want {
			g := got[j]
			if g.Status != w.Status || (w.Hold != Hold{} && g.Hold != w.Hold) {
				t.Fatalf("batch %d op %d (%+v): got %v %+v, want %v %+v", i, j, st.ops[j], g.Status, g.Hold, w.Status, w.Hold)
			}
		}
	}
}

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
		check func(t *testing.T, s *State)
	}{
		{"acquire free key grants token 1", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, []Result{resHold(Granted, 1, ownerA, 5000, 1000, 6000)}},
		}, func(t *testing.T, s *State) {
			if h, ok := s.Get("k"); !ok || h.Token != 1 || s.LastToken() != 1 || s.Len() != 1 {
				t.Fatalf("Get = %+v %v, last token %d, len %d", h, ok, s.LastToken(), s.Len())
			}
		}},
		{"same owner again is Existing with the same token", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, []Result{res(Granted)}},
			{2000, []Op{acq("k", ownerA, 9000)}, []Result{resHold(Existing, 1, ownerA, 5000, 1000, 6000)}},
		}, func(t *testing.T, s *State) {
			if s.LastToken() != 1 {
				t.Fatalf("Existing used a token: last token %d", s.LastToken())
			}
			if h, _ := s.Get("k"); h.LeaseMs != 5000 || h.ExpiresAt != 6000 {
				t.Fatalf("Existing changed the hold: %+v", h)
			}
		}},
		{"other owner is Busy", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, []Result{res(Granted)}},
			{1001, []Op{acq("k", ownerB, 5000)}, []Result{{Status: Busy}}},
		}, func(t *testing.T, s *State) {
			if h, _ := s.Get("k"); h.Owner != ownerA || s.LastToken() != 1 {
				t.Fatalf("Busy changed state: %+v, last token %d", h, s.LastToken())
			}
		}},
		{"release exact token", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{1500, []Op{rel("k", 1)}, []Result{resHold(Released, 1, ownerA, 5000, 1000, 6000)}},
		}, func(t *testing.T, s *State) {
			if _, ok := s.Get("k"); ok || s.Len() != 0 {
				t.Fatal("key still held after release")
			}
		}},
		{"release stale token or free key is NotHeld", []step{
			{1000, []Op{acq("k", ownerA, 5000), rel("k", 1), acq("k", ownerB, 5000)}, []Result{res(Granted), res(Released), res(Granted)}},
			{1100, []Op{rel("k", 1), rel("k", 3), rel("free", 2), rel("free", 0)}, []Result{res(NotHeld), res(NotHeld), res(NotHeld), res(NotHeld)}},
		}, func(t *testing.T, s *State) {
			if h, ok := s.Get("k"); !ok || h.Token != 2 || h.Owner != ownerB {
				t.Fatalf("NotHeld touched the current hold: %+v %v", h, ok)
			}
		}},
		{"release by owner ends that owner's hold", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{1500, []Op{relOwner("k", ownerA)}, []Result{resHold(Released, 1, ownerA, 5000, 1000, 6000)}},
		}, func(t *testing.T, s *State) {
			if _, ok := s.Get("k"); ok || s.Len() != 0 || s.LastToken() != 1 {
				t.Fatal("key still held after a release by its owner")
			}
		}},
		{"release by another owner, or of a free key, is NotHeld", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{1100, []Op{relOwner("k", ownerB), relOwner("free", ownerA), relOwner("", ownerA)}, []Result{res(NotHeld), res(NotHeld), res(NotHeld)}},
		}, func(t *testing.T, s *State) {
			if h, ok := s.Get("k"); !ok || h.Token != 1 || h.Owner != ownerA {
				t.Fatalf("NotHeld touched the current hold: %+v %v", h, ok)
			}
		}},
		{"release by owner then acquire in one batch hands off; a second release by the old owner is NotHeld", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{2000, []Op{relOwner("k", ownerA), acq("k", ownerB, 7000), relOwner("k", ownerA)},
				[]Result{res(Released), resHold(Granted, 2, ownerB, 7000, 2000, 9000), res(NotHeld)}},
		}, nil},
		{"expire before ExpiresAt is NotHeld", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{5999, []Op{exp("k", 1)}, []Result{res(NotHeld)}},
		}, func(t *testing.T, s *State) {
			if _, ok := s.Get("k"); !ok {
				t.Fatal("early expire ended the hold")
			}
		}},
		{"expire at ExpiresAt releases", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{6000, []Op{exp("k", 1)}, []Result{resHold(Released, 1, ownerA, 5000, 1000, 6000)}},
		}, func(t *testing.T, s *State) {
			if _, ok := s.Get("k"); ok {
				t.Fatal("still held")
			}
		}},
		{"expire after ExpiresAt releases", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{99999, []Op{exp("k", 1)}, []Result{resHold(Released, 1, ownerA, 5000, 1000, 6000)}},
		}, nil},
		{"expire with wrong token is NotHeld", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{9000, []Op{exp("k", 2), exp("k", 0), exp("other", 1)}, []Result{res(NotHeld), res(NotHeld), res(NotHeld)}},
		}, func(t *testing.T, s *State) {
			if h, ok := s.Get("k"); !ok || h.Token != 1 {
				t.Fatal("wrong-token expire ended the hold")
			}
		}},
		{"release then acquire in one batch hands off", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{2000, []Op{rel("k", 1), acq("k", ownerB, 7000)}, []Result{res(Released), resHold(Granted, 2, ownerB, 7000, 2000, 9000)}},
		}, nil},
		{"expire then acquire in one batch hands off", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{6000, []Op{exp("k", 1), acq("k", ownerB, 7000)}, []Result{res(Released), resHold(Granted, 2, ownerB, 7000, 6000, 13000)}},
		}, nil},
		{"time never goes backwards", []step{
			{5000, []Op{acq("a", ownerA, 1000)}, []Result{resHold(Granted, 1, ownerA, 1000, 5000, 6000)}},
			{3000, []Op{acq("b", ownerA, 1000)}, []Result{resHold(Granted, 2, ownerA, 1000, 5000, 6000)}},
			// An expire stamped before ExpiresAt but applied when lastTime is past it still waits for the batch
			// time to reach ExpiresAt: lastTime is 5000, b expires at 6000.
			{0, []Op{exp("b", 2)}, []Result{res(NotHeld)}},
		}, func(t *testing.T, s *State) {
			if s.LastTime() != 5000 {
				t.Fatalf("last time %d, want 5000", s.LastTime())
			}
		}},
		{"takeover restarts every lease in full and records the member", []step{
			{1000, []Op{acq("short", ownerA, 1000), acq("long", ownerB, 100000)}, nil},
			// At 1500 each lease restarts in full: short 2000 -> 2500, long 101000 -> 101500.
			{1500, []Op{takeover("n2", "10.0.0.2:5225")}, []Result{res(Done)}},
		}, func(t *testing.T, s *State) {
			if h, _ := s.Get("short"); h.ExpiresAt != 2500 || h.GrantedAt != 1000 || h.Token != 1 {
				t.Fatalf("short after takeover: %+v, want ExpiresAt 2500", h)
			}
			if h, _ := s.Get("long"); h.ExpiresAt != 101500 {
				t.Fatalf("long after takeover: %+v, want ExpiresAt 101500", h)
			}
			if a, ok := s.MemberAddr("n2"); !ok || a != "10.0.0.2:5225" {
				t.Fatalf("member n2 = %q %v", a, ok)
			}
		}},
		{"takeover never shortens", []step{
			{1000, []Op{acq("k", ownerA, 10000)}, nil},
			// A takeover stamped in the past (a lagging clock) is applied at lastTime.
			{500, []Op{takeover("n1", "a:1")}, []Result{res(Done)}},
		}, func(t *testing.T, s *State) {
			if h, _ := s.Get("k"); h.ExpiresAt != 11000 {
				t.Fatalf("ExpiresAt %d, want 11000 (max of old and now+lease)", h.ExpiresAt)
			}
		}},
		{"takeover keeps a later expiry", []step{
			{1000, []Op{acq("k", ownerA, 10000)}, nil},
			{1000, []Op{takeover("n1", "a:1")}, nil},
			{1200, []Op{acq("j", ownerB, 100)}, nil},
			{1300, []Op{takeover("n2", "b:2"), takeover("n1", "a:9")}, []Result{res(Done), res(Done)}},
		}, func(t *testing.T, s *State) {
			if h, _ := s.Get("k"); h.ExpiresAt != 11300 {
				t.Fatalf("k ExpiresAt %d, want 11300", h.ExpiresAt)
			}
			if h, _ := s.Get("j"); h.ExpiresAt != 1400 {
				t.Fatalf("j ExpiresAt %d, want 1400", h.ExpiresAt)
			}
			if m := s.Members(); !reflect.DeepEqual(m, [][2]string{{"n1", "a:9"}, {"n2", "b:2"}}) {
				t.Fatalf("members %v", m)
			}
		}},
		{"takeover without node id records no member", []step{
			{1000, []Op{takeover("", "x:1")}, []Result{res(Done)}},
		}, func(t *testing.T, s *State) {
			if len(s.Members()) != 0 {
				t.Fatalf("members %v", s.Members())
			}
		}},
		{"invalid ops leave the state unchanged", []step{
			{1000, []Op{acq("k", ownerA, 5000)}, nil},
			{1000, []Op{acq("j", ownerA, 0), acq("", ownerA, 5000), {Kind: 0, Key: "k"}, {Kind: 99, Key: "k", Token: 1}, acq("k", ownerB, 0)},
				[]Result{res(Invalid), res(Invalid), res(Invalid), res(Invalid), res(Invalid)}},
		}, func(t *testing.T, s *State) {
			if s.Len() != 1 || s.LastToken() != 1 {
				t.Fatalf("len %d, last token %d", s.Len(), s.LastToken())
			}
			if h, _ := s.Get("k"); h != (Hold{Token: 1, Owner: ownerA, LeaseMs: 5000, GrantedAt: 1000, ExpiresAt: 6000}) {
				t.Fatalf("hold changed: %+v", h)
			}
		}},
		{"empty batch advances time only", []step{
			{1000, nil, nil},
			{700, []Op{}, nil},
		}, func(t *testing.T, s *State) {
			if s.LastTime() != 1000 || s.Len() != 0 || s.LastToken() != 0 {
				t.Fatal("empty batches changed more than time")
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New()
			runSteps(t, s, c.steps)
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

// TestInvalidOpsStateUnchanged compares whole states: an invalid op changes
// nothing (batch time aside, which the batch carries, not the op).
func TestInvalidOpsStateUnchanged(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1000, Ops: []Op{acq("k", ownerA, 5000), takeover("n1", "a:1")}})
	before := s.Clone()
	res := s.Apply(Batch{Time: 1000, Ops: []Op{acq("x", ownerA, 0), acq("", ownerB, 1), {Kind: 200}, {Kind: 0}}})
	for i, r := range res {
		if r.Status != Invalid || r.Hold != (Hold{}) {
			t.Errorf("op %d: %+v, want Invalid with no hold", i, r)
		}
	}
	if !sameState(before, s) {
		t.Fatalf("state changed:\n%+v\n%+v", before, s)
	}
}

func TestTokensStrictlyIncrease(t *testing.T) {
	s := New()
	var last uint64
	rng := rand.New(rand.NewPCG(3, 4))
	held := map[string]uint64{}
	for now := int64(1); now < 3000; now++ {
		key := fmt.Sprintf("k%d", rng.IntN(20))
		var ops []Op
		if tok, ok := held[key]; ok {
			ops = append(ops, rel(key, tok))
		}
		ops = append(ops, acq(key, Owner{byte(now), byte(now >> 8)}, 1000))
		res := s.Apply(Batch{Time: now, Ops: ops})
		g := res[len(res)-1]
		if g.Status != Granted {
			t.Fatalf("at %d: %v", now, g.Status)
		}
		if g.Hold.Token <= last {
			t.Fatalf("token %d after %d", g.Hold.Token, last)
		}
		last = g.Hold.Token
		held[key] = last
	}
	if s.LastToken() != last {
		t.Fatalf("LastToken %d, last grant %d", s.LastToken(), last)
	}
}

func TestResultStatusString(t *testing.T) {
	for s := Status(0); s < 10; s++ {
		if s.String() == "" {
			t.Errorf("Status(%d) has no name", s)
		}
	}
	if Granted.String() != "granted" || Status(0).String() != "unknown" {
		t.Error("status names")
	}
}

func TestApplyIntoAppends(t *testing.T) {
	s := New()
	buf := make([]Result, 1, 8)
	buf = s.ApplyInto(Batch{Time: 1, Ops: []Op{acq("a", ownerA, 1), acq("a", ownerB, 1)}}, buf)
	if len(buf) != 3 || buf[1].Status != Granted || buf[2].Status != Busy {
		t.Fatalf("%+v", buf)
	}
}

func TestCloneIsDeep(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1, Ops: []Op{acq("a", ownerA, 10), takeover("n", "x")}})
	c := s.Clone()
	s.Apply(Batch{Time: 2, Ops: []Op{rel("a", 1), acq("b", ownerB, 10), takeover("m", "y")}})
	if _, ok := c.Get("a"); !ok || c.Len() != 1 || len(c.Members()) != 1 || c.LastTime() != 1 || c.LastToken() != 1 {
		t.Fatal("clone shares state with the original")
	}
	n := 0
	s.Range(func(string, Hold) bool { n++; return false })
	if n != 1 {
		t.Fatalf("Range did not stop: %d calls", n)
	}
}

// randomOps draws ops over a small key space so that grants, conflicts,
// releases, stale tokens, expiries and takeovers all happen. Tokens are drawn
// near lastToken so that many releases hit.
func randomBatch(rng *rand.Rand, now int64, lastToken uint64) Batch {
	keys := []string{"a", "b", "c", "d", "e", "orders/1", "clé", ""}
	owners := []Owner{ownerA, ownerB, ownerC}
	n := rng.IntN(8)
	b := Batch{Time: now + int64(rng.IntN(2000)) - 300}
	for range n {
		key := keys[rng.IntN(len(keys))]
		tok := uint64(0)
		if lastToken > 0 {
			tok = lastToken - uint64(rng.IntN(int(min(lastToken, 5))))
		}
		switch rng.IntN(11) {
		case 10:
			b.Ops = append(b.Ops, relOwner(key, owners[rng.IntN(3)]))
		case 0, 1, 2, 3:
			b.Ops = append(b.Ops, acq(key, owners[rng.IntN(3)], uint32(rng.IntN(3000))))
		case 4, 5:
			b.Ops = append(b.Ops, rel(key, tok))
		case 6, 7:
			b.Ops = append(b.Ops, exp(key, tok))
		case 8:
			b.Ops = append(b.Ops, takeover(fmt.Sprintf("n%d", rng.IntN(3)), fmt.Sprintf("10.0.0.%d:5225", rng.IntN(9))))
		case 9:
			b.Ops = append(b.Ops, Op{Kind: OpKind(rng.IntN(7)), Key: key, Token: tok, LeaseMs: uint32(rng.IntN(2))})
		}
	}
	return b
}

// TestDeterminism applies the same random batches to two fresh states, one
// directly and one through the batch codec and, partway, through a snapshot
// written and restored mid-stream (as a follower that installs a snapshot
// does); every result and the final snapshot bytes must be identical.
func TestDeterminism(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		a, b := New(), New()
		now := int64(1_700_000_000_000)
		restoreAt := 50 + rng.IntN(200)
		for i := range 300 {
			if i == restoreAt {
				b = snapshotRoundTrip(t, b) // b continues from its restored snapshot
			}
			batch := randomBatch(rng, now, a.LastToken())
			now += int64(rng.IntN(500))
			ra := a.Apply(batch)
			enc := AppendBatch(nil, &batch)
			if hasUnknownKind(batch) {
				// The codec refuses unknown kinds; apply the batch as is.
				if _, err := DecodeBatch(enc); err == nil {
					t.Fatal("DecodeBatch accepted an unknown op kind")
				}
			} else {
				dec, err := DecodeBatch(enc)
				if err != nil {
					t.Fatalf("seed %d batch %d: %v", seed, i, err)
				}
				batch = dec
			}
			rb := b.Apply(batch)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d batch %d (restored at %d): results differ:\n%+v\n%+v", seed, i, restoreAt, ra, rb)
			}
			checkInvariants(t, a)
		}
		var sa, sb bytes.Buffer
		if err := a.WriteSnapshot(&sa); err != nil {
			t.Fatal(err)
		}
		if err := b.WriteSnapshot(&sb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
			t.Fatalf("seed %d: snapshots differ after the same batches", seed)
		}
	}
}

func hasUnknownKind(b Batch) bool {
	for _, op := range b.Ops {
		if op.Kind < OpAcquire || op.Kind > OpReleaseOwner {
			return true
		}
	}
	return false
}

func checkInvariants(t *testing.T, s *State) {
	t.Helper()
	tokens := map[uint64]string{}
	s.Range(func(k string, h Hold) bool {
		if k == "" || h.LeaseMs == 0 {
			t.Fatalf("invalid hold %q %+v", k, h)
		}
		if h.Token == 0 || h.Token > s.LastToken() {
			t.Fatalf("hold %q token %d, last token %d", k, h.Token, s.LastToken())
		}
		if h.GrantedAt > s.LastTime() || h.ExpiresAt < h.GrantedAt+int64(h.LeaseMs) {
			t.Fatalf("hold %q %+v at last time %d", k, h, s.LastTime())
		}
		if o, dup := tokens[h.Token]; dup {
			t.Fatalf("token %d held by %q and %q", h.Token, o, k)
		}
		tokens[h.Token] = k
		return true
	})
}

func snapshotRoundTrip(t *testing.T, s *State) *State {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func BenchmarkApplyAcquireRelease(b *testing.B) {
	// 64 ops per batch: 32 acquires of fresh keys and the 32 releases of the
	// previous batch's grants, so the state stays at 32 holds.
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("orders/%d", i)
	}
	s := New()
	ops := make([]Op, 64)
	res := make([]Result, 0, 64)
	var prev []uint64
	half := 0
	now := int64(1)
	b.ReportAllocs()
	for b.Loop() {
		ops = ops[:0]
		cur := keys[half*32 : half*32+32]
		old := keys[(1-half)*32 : (1-half)*32+32]
		for i, k := range cur {
			ops = append(ops, Op{Kind: OpAcquire, Key: k, Owner: Owner{byte(i)}, LeaseMs: 30000})
		}
		for i, tok := range prev {
			ops = append(ops, Op{Kind: OpRelease, Key: old[i], Token: tok})
		}
		res = s.ApplyInto(Batch{Time: now, Ops: ops}, res[:0])
		prev = prev[:0]
		for _, r := range res[:32] {
			prev = append(prev, r.Hold.Token)
		}
		half = 1 - half
		now++
	}
}
