package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// harness applies one coordination op per batch at its current time.
type harness struct {
	t   testing.TB
	s   *State
	now int64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, s: New(), now: 1000} }

func (h *harness) do(kind coordsm.Kind, o coordsm.Op) *coordsm.Result {
	h.t.Helper()
	res := h.s.Apply(Batch{Time: h.now, Ops: []Op{{Kind: OpKind(kind), Coord: &o}}})
	if res[0].Status != Done || res[0].Coord == nil {
		h.t.Fatalf("%d %+v: fsm status %v, coord %v", kind, o, res[0].Status, res[0].Coord)
	}
	checkCoordInvariants(h.t, h.s)
	return res[0].Coord
}

// want applies the op and fails unless it ends with status st.
func (h *harness) want(st coordsm.Status, kind coordsm.Kind, o coordsm.Op) *coordsm.Result {
	h.t.Helper()
	r := h.do(kind, o)
	if r.Status != st {
		h.t.Fatalf("op %d %+v: status %v, want %v", kind, o, r.Status, st)
	}
	return r
}

func (h *harness) node(path string) {
	h.t.Helper()
	h.want(coordsm.Success, coordsm.CreateNode, coordsm.Op{Path: path})
}

// start starts a session with key k, seq_no 1 and a 10 s timeout.
func (h *harness) start(path, k string) uint64 {
	h.t.Helper()
	return h.want(coordsm.Success, coordsm.Attach, coordsm.Op{Path: path, Key: k, SeqNo: 1, TimeoutMs: 10000}).Session
}

func (h *harness) sem(sess uint64, name string, limit uint64) {
	h.t.Helper()
	h.want(coordsm.Success, coordsm.CreateSem, coordsm.Op{Session: sess, SeqNo: 1, Name: name, Limit: limit})
}

func (h *harness) acquire(sess uint64, name string, count, timeout uint64) *coordsm.Result {
	h.t.Helper()
	return h.want(coordsm.Success, coordsm.Acquire, coordsm.Op{Session: sess, SeqNo: 1, Name: name, Count: count, TimeoutMs: timeout})
}

func (h *harness) release(sess uint64, name string) *coordsm.Result {
	h.t.Helper()
	return h.want(coordsm.Success, coordsm.Release, coordsm.Op{Session: sess, SeqNo: 1, Name: name})
}

func eventsOf(r *coordsm.Result, k coordsm.EventKind) []coordsm.Event {
	var out []coordsm.Event
	for _, e := range r.Events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// checkCoordInvariants checks what every operation must preserve: counts and
// indexes agree with the holders, owners come before waiters in order-id
// order, the head waiter does not fit, no unused ephemeral semaphore, and the
// state survives a snapshot round trip (whose reader checks the same).
func checkCoordInvariants(t testing.TB, s *State) {
	t.Helper()
	if err := s.coord.CheckInvariants(s.lastToken); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := s.WriteSnapshot(&a); err != nil {
		t.Fatal(err)
	}
	first := bytes.Clone(a.Bytes())
	r, err := ReadSnapshot(&a)
	if err != nil {
		t.Fatalf("snapshot of a reachable state does not read: %v", err)
	}
	if err := r.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, b.Bytes()) {
		t.Fatal("snapshot round trip changed the state")
	}
}

// TestCoordOpWithoutPayloadIsInvalid: the dispatcher refuses a
// coordination kind without its payload before coordsm sees it.
func TestCoordOpWithoutPayloadIsInvalid(t *testing.T) {
	h := newHarness(t)
	if r := h.s.Apply(Batch{Time: h.now, Ops: []Op{{Kind: OpKind(coordsm.CreateNode)}}}); r[0].Status != Invalid {
		t.Fatalf("op without payload: %v, want invalid", r[0].Status)
	}
}

func TestCoordTakeoverGrace(t *testing.T) {
	h := newHarness(t)
	h.want(coordsm.Success, coordsm.CreateNode, coordsm.Op{Path: "/n", Config: coordsm.NodeConfig{GraceMs: 5000}})
	a := h.start("/n", "") // attached, timeout 10 s
	b := h.start("/n", "")
	h.now = 2000
	h.want(coordsm.Success, coordsm.Detach, coordsm.Op{Session: b, SeqNo: 1}) // expires at 12000
	h.now = 3000
	h.s.Apply(Batch{Time: h.now, Ops: []Op{takeover("n2", "addr")}})
	checkCoordInvariants(t, h.s)
	// a, attached, is detached by the takeover: timeout + grace from it; b
	// keeps its detach time: timeout + grace from its detach.
	for id, want := range map[uint64]int64{a: 3000 + 10000 + 5000, b: 2000 + 10000 + 5000} {
		info, _ := h.s.Session(id)
		if info.Attached || info.ExpiresAt != want {
			t.Fatalf("session %d after takeover: %+v, want detached until %d", id, info, want)
		}
	}
	// More leader changes do not push the expiries out: a detached session
	// expires within timeout + grace of its detach however many follow.
	for _, at := range []int64{9000, 15000, 16999} {
		h.now = at
		h.s.Apply(Batch{Time: h.now, Ops: []Op{takeover("n3", "addr")}})
	}
	if info, _ := h.s.Session(b); info.ExpiresAt != 17000 || info.DetachedAt != 2000 {
		t.Fatalf("b after three more takeovers: %+v, want expiry 17000 from its detach at 2000", info)
	}
	h.now = 17000
	h.want(coordsm.Success, coordsm.Expire, coordsm.Op{Session: b})
	h.now = 17999 // within timeout + grace of the takeover: nobody expires
	h.want(coordsm.PreconditionFailed, coordsm.Expire, coordsm.Op{Session: a})
	h.now = 18000
	h.want(coordsm.Success, coordsm.Expire, coordsm.Op{Session: a})
	// A takeover never shortens an expiry: one further away than takeover +
	// timeout + grace stays.
	c := h.start("/n", "")
	h.want(coordsm.Success, coordsm.Detach, coordsm.Op{Session: c, SeqNo: 1}) // 28000
	h.s.Apply(Batch{Time: 1, Ops: []Op{takeover("n3", "addr")}})              // clock behind: time stays 18000
	if info, _ := h.s.Session(c); info.ExpiresAt != 18000+10000+5000 {
		t.Fatalf("after a second takeover: %+v", info)
	}
}

func TestCoordOrderIDsAreFencingTokens(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	tick := h.s.Apply(Batch{Time: h.now, Ops: []Op{acq("k", ownerA, 1000)}})[0].Hold.Token
	r1 := h.acquire(a, "s", 1, 0)
	r2 := h.acquire(b, "s", 1, coordsm.WaitForever)
	tick2 := h.s.Apply(Batch{Time: h.now, Ops: []Op{rel("k", tick), acq("k", ownerB, 1000)}})[1].Hold.Token
	// One counter for tickets and semaphores: no order id equals a token.
	if !(tick < r1.OrderID && r1.OrderID < r2.OrderID && r2.OrderID < tick2) || h.s.LastToken() != tick2 {
		t.Fatalf("ticket %d, orders %d %d, ticket %d, last %d: want strictly increasing from one counter",
			tick, r1.OrderID, r2.OrderID, tick2, h.s.LastToken())
	}
	// On one semaphore every grant's order id exceeds the earlier grants'.
	g := eventsOf(h.release(a, "s"), coordsm.EventGranted)
	if len(g) != 1 || g[0].OrderID != r2.OrderID || g[0].OrderID <= r1.OrderID {
		t.Fatalf("grant %+v after order %d", g, r1.OrderID)
	}
	if r3 := h.acquire(a, "s", 1, coordsm.WaitForever); r3.OrderID <= r2.OrderID {
		t.Fatalf("later acquire got order %d <= %d", r3.OrderID, r2.OrderID)
	}
}

func coordStream(seed uint64, n int) []Batch {
	rng := newRand(seed)
	shadow := New()
	paths := []string{"/a", "/b"}
	names := []string{"s", "t", "e"}
	var out []Batch
	now := int64(1000)
	for i := 0; i < n; i++ {
		now += int64(rng.IntN(3000))
		var ops []Op
		for j := 0; j <= rng.IntN(3); j++ {
			o := &coordsm.Op{Session: uint64(rng.IntN(20)), SeqNo: uint64(rng.IntN(3)), Path: paths[rng.IntN(2)], Name: names[rng.IntN(3)]}
			if live := shadow.Sessions(""); len(live) > 0 && rng.IntN(8) != 0 {
				ss := live[rng.IntN(len(live))]
				o.Session, o.SeqNo, o.Path = ss.ID, ss.SeqNo, ss.Path
			}
			var kind coordsm.Kind
			switch rng.IntN(16) {
			case 0:
				kind, o.Config = coordsm.CreateNode, coordsm.NodeConfig{MaxWaiters: uint32(rng.IntN(4))}
			case 1:
				kind, o.Config = coordsm.AlterNode, coordsm.NodeConfig{GraceMs: uint32(rng.IntN(20000))}
			case 2:
				if rng.IntN(10) == 0 {
					kind = coordsm.DropNode
				} else {
					kind = coordsm.Expire
				}
			case 3, 4:
				kind, o.TimeoutMs, o.Key = coordsm.Attach, uint64(rng.IntN(10000)+1), "k"
				o.SeqNo += uint64(rng.IntN(2))
				if rng.IntN(2) == 0 {
					o.Session = 0
				}
			case 5:
				kind = coordsm.Detach
			case 6:
				if kind = coordsm.Stop; rng.IntN(3) != 0 {
					kind = coordsm.Detach
				}
			case 7:
				kind, o.Limit, o.Data = coordsm.CreateSem, uint64(rng.IntN(4)), "d"
			case 8:
				kind, o.Data = coordsm.UpdateSem, fmt.Sprint(i)
			case 9:
				kind, o.Force = coordsm.DeleteSem, rng.IntN(2) == 0
			case 10, 11, 12, 13:
				kind, o.Count, o.Ephemeral = coordsm.Acquire, uint64(rng.IntN(4)), rng.IntN(2) == 0
				if rng.IntN(6) == 0 {
					o.Count = coordsm.Exclusive
				}
				o.TimeoutMs = []uint64{0, 500, 5000, coordsm.WaitForever}[rng.IntN(4)]
			case 14:
				kind = coordsm.Release
			case 15:
				kind, o.OrderID = coordsm.Timeout, shadow.LastToken()-uint64(rng.IntN(5))
			}
			ops = append(ops, Op{Kind: OpKind(kind), Coord: o})
			if rng.IntN(20) == 0 {
				ops = append(ops, takeover("n", "x"))
			}
			if rng.IntN(10) == 0 {
				ops = append(ops, acq(fmt.Sprint("k", rng.IntN(3)), Owner{byte(rng.IntN(3))}, 1000))
			}
		}
		b := Batch{Time: now, Ops: ops}
		shadow.Apply(b)
		out = append(out, b)
	}
	return out
}

// TestCoordDeterminism: a stream of operations gives the same results and
// the same state on every replica, whether it applies the whole log or a
// snapshot taken mid-stream and the rest of the log; every batch also goes
// through its encoding, as it does in the Raft log.
func TestCoordDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		stream := coordStream(seed, 300)
		a, b := New(), New()
		mid := len(stream) / 2
		granted, queued := 0, 0
		for i, batch := range stream {
			enc := AppendBatch(nil, &batch)
			dec, err := DecodeBatch(enc)
			if err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, i, err)
			}
			if i == mid {
				var buf bytes.Buffer
				if err := b.WriteSnapshot(&buf); err != nil {
					t.Fatal(err)
				}
				if b, err = ReadSnapshot(&buf); err != nil {
					t.Fatalf("seed %d: mid-stream snapshot: %v", seed, err)
				}
			}
			b.Clone().Apply(dec) // a clone shares nothing: applying to it leaves b alone
			ra, rb := a.Apply(batch), b.Apply(dec)
			if !reflect.DeepEqual(ra, rb) {
				t.Fatalf("seed %d batch %d: results differ:\n%+v\n%+v", seed, i, ra, rb)
			}
			for _, r := range ra {
				if r.Coord != nil && r.Coord.Acquired {
					granted++
				}
				if r.Coord != nil && r.Coord.Queued {
					queued++
				}
			}
			checkCoordInvariants(t, a)
		}
		var sa, sb bytes.Buffer
		if err := a.WriteSnapshot(&sa); err != nil {
			t.Fatal(err)
		}
		if err := b.WriteSnapshot(&sb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
			t.Fatalf("seed %d: replicas diverged", seed)
		}
		if granted == 0 || queued == 0 {
			t.Fatalf("seed %d: the stream granted %d and queued %d: it does not exercise the queue", seed, granted, queued)
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// TestCoordSemaphoreVersion: every op that changes a semaphore's data,
// owners or waiters gives it a new version, never one it had before (a
// semaphore deleted and created again included), so a describe read in
// pages can tell whether the pages come from one state.
func TestCoordSemaphoreVersion(t *testing.T) {
	type key struct{ path, name string }
	snap := func(s *State) map[key]coordsm.SemaphoreInfo {
		out := make(map[key]coordsm.SemaphoreInfo)
		for _, n := range s.CoordNodes() {
			p := n.Path
			for _, name := range s.SemaphoreNames(p) {
				info, _ := s.DescribeSemaphore(p, name, true, true)
				out[key{p, name}] = info
			}
		}
		return out
	}
	changes := 0
	for seed := uint64(1); seed <= 20; seed++ {
		s := New()
		seen := make(map[key]map[uint64]bool)
		before := snap(s)
		for i, batch := range coordStream(seed, 300) {
			s.Apply(batch)
			after := snap(s)
			for k, a := range after {
				b, existed := before[k]
				if existed {
					av, bv := a, b
					av.Version, bv.Version = 0, 0
					if reflect.DeepEqual(av, bv) {
						continue
					}
					changes++
				}
				if a.Version == b.Version || seen[k][a.Version] {
					t.Fatalf("seed %d batch %d: semaphore %v has version %d again after a change:\n%+v\nwas\n%+v", seed, i, k, a.Version, a, b)
				}
				if seen[k] == nil {
					seen[k] = make(map[uint64]bool)
				}
				seen[k][a.Version] = true
			}
			before = after
		}
	}
	if changes == 0 {
		t.Fatal("the streams changed no semaphore")
	}
}
