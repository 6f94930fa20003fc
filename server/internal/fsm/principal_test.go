package fsm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func acqBy(key string, o Owner, leaseMs uint32, p string) Op {
	op := acq(key, o, leaseMs)
	op.Principal = p
	return op
}

func relBy(key string, token uint64, p string) Op {
	op := rel(key, token)
	op.Principal = p
	return op
}

// TestPrincipalRelease: a hold records the principal it was granted to; a
// release naming another principal is Forbidden and changes nothing, even
// with the exact token; the owning principal, an unrestricted release (an
// admin) and any principal for a hold granted without one may end it.
func TestPrincipalRelease(t *testing.T) {
	s := New()
	runSteps(t, s, []step{
		{1000, []Op{acqBy("orders/1", ownerA, 5000, "orders"), acq("legacy", ownerB, 5000), acqBy("orders/2", ownerC, 5000, "orders")}, nil},
		{1100, []Op{relBy("orders/1", 1, "billing"), relBy("orders/1", 99, "billing")}, []Result{res(Forbidden), res(NotHeld)}},
	})
	if h, ok := s.Get("orders/1"); !ok || h.Principal != "orders" || h.Token != 1 {
		t.Fatalf("a forbidden release touched the hold: %+v %v", h, ok)
	}
	runSteps(t, s, []step{
		{1200, []Op{relBy("orders/1", 1, "orders"), relBy("legacy", 2, "billing"), rel("orders/2", 3)},
			[]Result{res(Released), res(Released), res(Released)}},
	})
	if s.Len() != 0 {
		t.Fatalf("%d holds left", s.Len())
	}
}

// TestPrincipalExisting: the same owner under another principal is not the
// existing holder (an owner read from a describe does not hand out the grant).
func TestPrincipalExisting(t *testing.T) {
	s := New()
	runSteps(t, s, []step{
		{1000, []Op{acqBy("k", ownerA, 5000, "orders")}, nil},
		{1100, []Op{acqBy("k", ownerA, 5000, "billing"), acqBy("k", ownerA, 5000, "orders"), acq("k", ownerA, 5000)},
			[]Result{res(Busy), res(Existing), res(Busy)}},
	})
}

// TestPrincipalCodec: ops with a principal round-trip through the log
// encoding; ops without one are encoded exactly as before (kind byte without
// the flag, no trailing field), and a flagged op with an empty principal is
// corrupt (it would have two encodings).
func TestPrincipalCodec(t *testing.T) {
	b := Batch{Time: 7, Ops: []Op{acqBy("k", ownerA, 1000, "orders"), relBy("k", 1, "billing"), acq("k", ownerB, 1)}}
	got, err := DecodeBatch(AppendBatch(nil, &b))
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Ops {
		if got.Ops[i] != b.Ops[i] {
			t.Fatalf("op %d: got %+v, want %+v", i, got.Ops[i], b.Ops[i])
		}
	}
	plain := AppendBatch(nil, &Batch{Time: 1, Ops: []Op{rel("k", 9)}})
	want := withCRC([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 9})
	if !bytes.Equal(plain, want) {
		t.Fatalf("an op without a principal changed its encoding:\n got % x\nwant % x", plain, want)
	}
	flagged := withCRC([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2 | kindPrincipal, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 9, 1, 'p'})
	if d, err := DecodeBatch(flagged); err != nil || d.Ops[0].Principal != "p" || d.Ops[0].Kind != OpRelease {
		t.Fatalf("flagged release: %+v, %v", d, err)
	}
	empty := withCRC([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2 | kindPrincipal, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 9, 0})
	if _, err := DecodeBatch(empty); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flag with an empty principal: got %v, want ErrCorrupt", err)
	}
	cut := withCRC([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2 | kindPrincipal, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 9, 3, 'p'})
	if _, err := DecodeBatch(cut); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("principal cut short: got %v, want ErrCorrupt", err)
	}
}

// principalBatchSeed is a fuzz seed with principals, kept in
// testdata/fuzz/FuzzDecodeBatch/principals (go test -run TestPrincipalFuzzSeed -update).
func principalBatchSeed() []byte {
	return AppendBatch(nil, &Batch{Time: 11, Ops: []Op{acqBy("orders/1", ownerA, 30000, "orders"), relBy("orders/1", 1, "billing"), acq("x", ownerB, 1)}})
}

func TestPrincipalFuzzSeed(t *testing.T) {
	path := filepath.Join("testdata", "fuzz", "FuzzDecodeBatch", "principals")
	want := corpusFile(principalBatchSeed())
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s missing or stale: run go test ./internal/fsm -run TestPrincipalFuzzSeed -update", path)
	}
}

// TestPrincipalReleaseOwner: a release by owner obeys the same rule as one
// by token.
func TestPrincipalReleaseOwner(t *testing.T) {
	s := New()
	by := func(op Op, p string) Op { op.Principal = p; return op }
	runSteps(t, s, []step{
		{1000, []Op{acqBy("k", ownerA, 5000, "orders"), acqBy("j", ownerB, 5000, "orders")}, nil},
		{1100, []Op{by(relOwner("k", ownerA), "billing"), by(relOwner("k", ownerB), "billing")}, []Result{res(Forbidden), res(NotHeld)}},
		{1200, []Op{by(relOwner("k", ownerA), "orders"), relOwner("j", ownerB)}, []Result{res(Released), res(Released)}},
	})
}

// TestHeldByPrincipal: the count of holds per principal follows grants,
// releases (by token and owner), expiries and refusals, and survives a
// snapshot and a clone.
func TestHeldByPrincipal(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1000, Ops: []Op{acqBy("o/1", ownerA, 5000, "orders"), acqBy("o/2", ownerB, 5000, "orders"),
		acqBy("b/1", ownerC, 5000, "billing"), acq("x", Owner{0xd}, 1000)}})
	want := func(orders, billing, none int) {
		t.Helper()
		if s.HeldBy("orders") != orders || s.HeldBy("billing") != billing || s.HeldBy("") != none {
			t.Fatalf("held by orders %d, billing %d, none %d; want %d %d %d", s.HeldBy("orders"), s.HeldBy("billing"), s.HeldBy(""), orders, billing, none)
		}
	}
	want(2, 1, 1)
	s.Apply(Batch{Time: 1100, Ops: []Op{relBy("o/1", 1, "billing"), relBy("o/1", 1, "orders"), {Kind: OpReleaseOwner, Key: "b/1", Owner: ownerC}}})
	want(1, 0, 1)
	s.Apply(Batch{Time: 2500, Ops: []Op{exp("x", 4)}})
	want(1, 0, 0)
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSnapshot(&buf); err != nil || s.HeldBy("orders") != 1 || s.HeldBy("") != 0 {
		t.Fatalf("after a snapshot: %v, orders %d", err, s.HeldBy("orders"))
	}
	c := s.Clone()
	s.Apply(Batch{Time: 2600, Ops: []Op{relBy("o/2", 2, "orders")}})
	if c.HeldBy("orders") != 1 || s.HeldBy("orders") != 0 {
		t.Fatalf("clone %d, original %d", c.HeldBy("orders"), s.HeldBy("orders"))
	}
}
