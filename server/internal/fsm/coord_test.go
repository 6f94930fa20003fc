package fsm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// harness applies one coordination op per batch at its current time.
type harness struct {
	t   testing.TB
	s   *State
	now int64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, s: New(), now: 1000} }

func (h *harness) do(kind OpKind, o CoordOp) *CoordResult {
	h.t.Helper()
	res := h.s.Apply(Batch{Time: h.now, Ops: []Op{{Kind: kind, Coord: &o}}})
	if res[0].Status != Done || res[0].Coord == nil {
		h.t.Fatalf("%d %+v: fsm status %v, coord %v", kind, o, res[0].Status, res[0].Coord)
	}
	checkCoordInvariants(h.t, h.s)
	return res[0].Coord
}

// want applies the op and fails unless it ends with status st.
func (h *harness) want(st CoordStatus, kind OpKind, o CoordOp) *CoordResult {
	h.t.Helper()
	r := h.do(kind, o)
	if r.Status != st {
		h.t.Fatalf("op %d %+v: status %v, want %v", kind, o, r.Status, st)
	}
	return r
}

func (h *harness) node(path string) {
	h.t.Helper()
	h.want(CoordSuccess, OpCoordCreateNode, CoordOp{Path: path})
}

// start starts a session with key k, seq_no 1 and a 10 s timeout.
func (h *harness) start(path, k string) uint64 {
	h.t.Helper()
	return h.want(CoordSuccess, OpCoordAttach, CoordOp{Path: path, Key: k, SeqNo: 1, TimeoutMs: 10000}).Session
}

func (h *harness) sem(sess uint64, name string, limit uint64) {
	h.t.Helper()
	h.want(CoordSuccess, OpCoordCreateSem, CoordOp{Session: sess, SeqNo: 1, Name: name, Limit: limit})
}

func (h *harness) acquire(sess uint64, name string, count, timeout uint64) *CoordResult {
	h.t.Helper()
	return h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: sess, SeqNo: 1, Name: name, Count: count, TimeoutMs: timeout})
}

func (h *harness) release(sess uint64, name string) *CoordResult {
	h.t.Helper()
	return h.want(CoordSuccess, OpCoordRelease, CoordOp{Session: sess, SeqNo: 1, Name: name})
}

func (h *harness) describe(name string) SemaphoreInfo {
	h.t.Helper()
	info, st := h.s.DescribeSemaphore("/n", name, true, true)
	if st != CoordSuccess {
		h.t.Fatalf("describe %q: %v", name, st)
	}
	return info
}

// sessionsOf lists the sessions of holders, in order.
func sessionsOf(hs []Holder) []uint64 {
	out := []uint64{}
	for _, x := range hs {
		out = append(out, x.Session)
	}
	return out
}

func eventsOf(r *CoordResult, k CoordEventKind) []CoordEvent {
	var out []CoordEvent
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

func TestCoordNodes(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"", "/", "x", "/a/", "//a", "/a//b", "/" + strings.Repeat("x", MaxCoordPath)} {
		h.want(CoordBadRequest, OpCoordCreateNode, CoordOp{Path: p})
	}
	h.node("/" + strings.Repeat("x", MaxCoordPath-1))
	h.node("/path/to/mynode")
	h.want(CoordAlreadyExists, OpCoordCreateNode, CoordOp{Path: "/path/to/mynode"})
	info, ok := h.s.DescribeNode("/path/to/mynode")
	if !ok || info.Config != DefaultNodeConfig {
		t.Fatalf("describe = %+v %v, want the defaults %+v", info, ok, DefaultNodeConfig)
	}
	if DefaultNodeConfig.SelfCheckMs != 1000 || DefaultNodeConfig.GraceMs != 10000 ||
		DefaultNodeConfig.ReadMode != ReadRelaxed || DefaultNodeConfig.AttachMode != AttachStrict {
		t.Fatalf("defaults %+v differ from docs/coordination.md", DefaultNodeConfig)
	}
	// Grace must be strictly greater than the self-check period; modes known.
	for _, cfg := range []NodeConfig{{SelfCheckMs: 10000}, {GraceMs: 1000}, {SelfCheckMs: 5, GraceMs: 5}, {ReadMode: 3}, {AttachMode: 3}} {
		h.want(CoordBadRequest, OpCoordCreateNode, CoordOp{Path: "/bad", Config: cfg})
		h.want(CoordBadRequest, OpCoordAlterNode, CoordOp{Path: "/path/to/mynode", Config: cfg})
	}
	if _, ok := h.s.DescribeNode("/bad"); ok {
		t.Fatal("an invalid create made a node")
	}
	// Alter changes only the fields given.
	h.want(CoordSuccess, OpCoordAlterNode, CoordOp{Path: "/path/to/mynode", Config: NodeConfig{GraceMs: 20000, ReadMode: ReadStrict}})
	info, _ = h.s.DescribeNode("/path/to/mynode")
	want := DefaultNodeConfig
	want.GraceMs, want.ReadMode = 20000, ReadStrict
	if info.Config != want {
		t.Fatalf("after alter: %+v, want %+v", info.Config, want)
	}
	h.want(CoordNotFound, OpCoordAlterNode, CoordOp{Path: "/missing"})
	h.want(CoordNotFound, OpCoordDropNode, CoordOp{Path: "/missing"})
	h.want(CoordSuccess, OpCoordDropNode, CoordOp{Path: "/path/to/mynode"})
	if _, ok := h.s.DescribeNode("/path/to/mynode"); ok {
		t.Fatal("dropped node still described")
	}
	h.node("/path/to/mynode") // a dropped path can be created again
	if r := h.s.Apply(Batch{Time: h.now, Ops: []Op{{Kind: OpCoordCreateNode}}}); r[0].Status != Invalid {
		t.Fatalf("op without payload: %v, want invalid", r[0].Status)
	}
}

func TestCoordDropNodeEndsSessions(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	h.node("/other")
	a, b := h.start("/n", ""), h.start("/n", "")
	o := h.start("/other", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	r := h.want(CoordSuccess, OpCoordDropNode, CoordOp{Path: "/n"})
	ended := eventsOf(r, EventSessionEnded)
	if len(ended) != 2 || ended[0].Session != a || ended[1].Session != b || ended[0].Reason != EndDropped {
		t.Fatalf("session events %+v, want a and b ended by the drop", ended)
	}
	if len(eventsOf(r, EventGranted)) != 0 {
		t.Fatalf("drop granted a waiter of a session it ends: %+v", r.Events)
	}
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || ch[0].Name != "s" || !ch[0].Data || !ch[0].Owners {
		t.Fatalf("changed events %+v, want s deleted", ch)
	}
	h.want(CoordSessionExpired, OpCoordRelease, CoordOp{Session: a, SeqNo: 1, Name: "s"})
	if _, ok := h.s.Session(o); !ok {
		t.Fatal("a session of another node ended")
	}
}

func TestCoordSessionStartRestore(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	h.node("/m")
	for _, o := range []CoordOp{
		{Path: "/n", TimeoutMs: 0},
		{Path: "/n", TimeoutMs: MaxSessionTimeout + 1},
		{Path: "/n", TimeoutMs: 1, Desc: strings.Repeat("d", MaxCoordDesc+1)},
		{Path: "/n", TimeoutMs: 1, Key: strings.Repeat("k", MaxCoordKey+1)},
	} {
		h.want(CoordBadRequest, OpCoordAttach, o)
	}
	h.want(CoordNotFound, OpCoordAttach, CoordOp{Path: "/missing", TimeoutMs: 1})
	id := h.want(CoordSuccess, OpCoordAttach, CoordOp{Path: "/n", Key: strings.Repeat("k", MaxCoordKey), SeqNo: 5,
		TimeoutMs: MaxSessionTimeout, Desc: strings.Repeat("d", MaxCoordDesc)}).Session
	id2 := h.start("/n", "")
	if id == 0 || id2 <= id {
		t.Fatalf("session ids %d then %d, want increasing from 1", id, id2)
	}
	key := strings.Repeat("k", MaxCoordKey)
	h.want(CoordBadSession, OpCoordAttach, CoordOp{Path: "/n", Session: id, Key: "wrong", SeqNo: 9, TimeoutMs: 1})
	h.want(CoordBadSession, OpCoordAttach, CoordOp{Path: "/n", Session: id, Key: key, SeqNo: 4, TimeoutMs: 1})
	h.want(CoordSessionExpired, OpCoordAttach, CoordOp{Path: "/n", Session: 999, Key: key, SeqNo: 9, TimeoutMs: 1})
	h.want(CoordSessionExpired, OpCoordAttach, CoordOp{Path: "/m", Session: id, Key: key, SeqNo: 9, TimeoutMs: 1})
	// An equal seq_no is a retried attach; a higher one takes the session over
	// and may change its timeout and description.
	h.want(CoordSuccess, OpCoordAttach, CoordOp{Path: "/n", Session: id, Key: key, SeqNo: 5, TimeoutMs: MaxSessionTimeout})
	r := h.want(CoordSuccess, OpCoordAttach, CoordOp{Path: "/n", Session: id, Key: key, SeqNo: 6, TimeoutMs: 7000, Desc: "new"})
	if r.Session != id || r.SeqNo != 6 {
		t.Fatalf("restore answered %+v", r)
	}
	info, _ := h.s.Session(id)
	if info.TimeoutMs != 7000 || info.Desc != "new" || info.SeqNo != 6 || !info.Attached {
		t.Fatalf("after restore: %+v", info)
	}
	// The older attach can no longer act for the session.
	h.want(CoordBadSession, OpCoordCreateSem, CoordOp{Session: id, SeqNo: 5, Name: "s", Limit: 1})
	h.want(CoordBadSession, OpCoordDetach, CoordOp{Session: id, SeqNo: 5})
	if info, _ := h.s.Session(id); !info.Attached {
		t.Fatal("a detach from the older attach detached the session")
	}
	h.want(CoordSessionExpired, OpCoordCreateSem, CoordOp{Session: 999, SeqNo: 1, Name: "s", Limit: 1})
	if got := h.s.Sessions("/n"); len(got) != 2 || got[0].ID != id || got[1].ID != id2 {
		t.Fatalf("Sessions(/n) = %+v", got)
	}
}

func TestCoordSessionLimit(t *testing.T) {
	h := newHarness(t)
	h.want(CoordSuccess, OpCoordCreateNode, CoordOp{Path: "/n", Config: NodeConfig{MaxSessions: 2}})
	h.start("/n", "")
	b := h.start("/n", "")
	h.want(CoordLimitExceeded, OpCoordAttach, CoordOp{Path: "/n", SeqNo: 1, TimeoutMs: 1})
	h.want(CoordSuccess, OpCoordStop, CoordOp{Session: b, SeqNo: 1})
	h.start("/n", "") // room again
}

func TestCoordDetachExpire(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a := h.start("/n", "k") // timeout 10 s
	b, c := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.sem(a, "t", 1)
	h.acquire(a, "s", 2, 0)
	h.acquire(a, "t", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.acquire(c, "s", 1, WaitForever)
	h.want(CoordNotFound, OpCoordAcquire, CoordOp{Session: c, SeqNo: 1, Name: "u", Count: 1})
	h.want(CoordPreconditionFailed, OpCoordExpire, CoordOp{Session: a})
	h.now = 2000
	h.want(CoordSuccess, OpCoordDetach, CoordOp{Session: a, SeqNo: 1})
	if info, _ := h.s.Session(a); info.Attached || info.ExpiresAt != 12000 {
		t.Fatalf("after detach: %+v, want detached until 12000", info)
	}
	h.now = 5000
	h.want(CoordSuccess, OpCoordDetach, CoordOp{Session: a, SeqNo: 1}) // again: the expiry stays
	if info, _ := h.s.Session(a); info.ExpiresAt != 12000 {
		t.Fatalf("a second detach moved the expiry to %d", info.ExpiresAt)
	}
	h.now = 11999
	h.want(CoordPreconditionFailed, OpCoordExpire, CoordOp{Session: a})
	h.now = 12000
	r := h.want(CoordSuccess, OpCoordExpire, CoordOp{Session: a})
	// One entry: a's holds released, both waiters granted in FIFO order.
	if e := eventsOf(r, EventSessionEnded); len(e) != 1 || e[0].Session != a || e[0].Reason != EndExpired {
		t.Fatalf("ended: %+v", e)
	}
	g := eventsOf(r, EventGranted)
	if len(g) != 2 || g[0].Session != b || g[1].Session != c || g[0].OrderID >= g[1].OrderID {
		t.Fatalf("granted %+v, want b then c", g)
	}
	if info := h.describe("s"); info.Count != 2 || !slices.Equal(sessionsOf(info.Owners), []uint64{b, c}) {
		t.Fatalf("s after expiry: %+v", info)
	}
	if info := h.describe("t"); info.Count != 0 {
		t.Fatalf("t still held after its owner expired: %+v", info)
	}
	h.want(CoordSessionExpired, OpCoordExpire, CoordOp{Session: a})
	h.want(CoordSessionExpired, OpCoordAttach, CoordOp{Path: "/n", Session: a, Key: "k", SeqNo: 2, TimeoutMs: 1})
}

func TestCoordRestoreBeatsExpire(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a := h.start("/n", "k")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.want(CoordSuccess, OpCoordDetach, CoordOp{Session: a, SeqNo: 1})
	h.now += 20000 // past the expiry, but the restore commits first
	h.want(CoordSuccess, OpCoordAttach, CoordOp{Path: "/n", Session: a, Key: "k", SeqNo: 2, TimeoutMs: 10000})
	h.want(CoordPreconditionFailed, OpCoordExpire, CoordOp{Session: a})
	if info := h.describe("s"); !slices.Equal(sessionsOf(info.Owners), []uint64{a}) {
		t.Fatalf("restored session lost its hold: %+v", info)
	}
}

func TestCoordStop(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(CoordBadSession, OpCoordStop, CoordOp{Session: a, SeqNo: 0})
	r := h.want(CoordSuccess, OpCoordStop, CoordOp{Session: a, SeqNo: 1})
	if e := eventsOf(r, EventSessionEnded); len(e) != 1 || e[0].Reason != EndStopped {
		t.Fatalf("ended: %+v", e)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != b {
		t.Fatalf("granted: %+v", g)
	}
	h.want(CoordSessionExpired, OpCoordStop, CoordOp{Session: a, SeqNo: 1})
}

func TestCoordTakeoverGrace(t *testing.T) {
	h := newHarness(t)
	h.want(CoordSuccess, OpCoordCreateNode, CoordOp{Path: "/n", Config: NodeConfig{GraceMs: 5000}})
	a := h.start("/n", "") // attached, timeout 10 s
	b := h.start("/n", "")
	h.now = 2000
	h.want(CoordSuccess, OpCoordDetach, CoordOp{Session: b, SeqNo: 1}) // expires at 12000
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
	h.want(CoordSuccess, OpCoordExpire, CoordOp{Session: b})
	h.now = 17999 // within timeout + grace of the takeover: nobody expires
	h.want(CoordPreconditionFailed, OpCoordExpire, CoordOp{Session: a})
	h.now = 18000
	h.want(CoordSuccess, OpCoordExpire, CoordOp{Session: a})
	// A takeover never shortens an expiry: one further away than takeover +
	// timeout + grace stays.
	c := h.start("/n", "")
	h.want(CoordSuccess, OpCoordDetach, CoordOp{Session: c, SeqNo: 1}) // 28000
	h.s.Apply(Batch{Time: 1, Ops: []Op{takeover("n3", "addr")}})       // clock behind: time stays 18000
	if info, _ := h.s.Session(c); info.ExpiresAt != 18000+10000+5000 {
		t.Fatalf("after a second takeover: %+v", info)
	}
}

func TestCoordSemaphoreCreate(t *testing.T) {
	h := newHarness(t)
	h.want(CoordSuccess, OpCoordCreateNode, CoordOp{Path: "/n", Config: NodeConfig{MaxSemaphores: 2}})
	a := h.start("/n", "")
	h.want(CoordBadRequest, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "s", Limit: 0})
	h.want(CoordBadRequest, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "", Limit: 1})
	h.want(CoordBadRequest, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: strings.Repeat("n", MaxCoordName+1), Limit: 1})
	h.want(CoordBadRequest, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "s", Limit: 1, Data: strings.Repeat("d", MaxCoordData+1)})
	h.want(CoordSuccess, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: strings.Repeat("n", MaxCoordName), Limit: 1, Data: strings.Repeat("d", MaxCoordData)})
	h.want(CoordSuccess, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "s", Limit: 10, Data: "cfg"})
	h.want(CoordAlreadyExists, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "s", Limit: 3})
	h.want(CoordLimitExceeded, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "t", Limit: 3})
	h.want(CoordLimitExceeded, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "e", Count: 1, Ephemeral: true})
	if info := h.describe("s"); info.Limit != 10 || info.Data != "cfg" || info.Ephemeral || info.Count != 0 {
		t.Fatalf("s = %+v", info)
	}
}

func TestCoordCountLimitSharedExclusive(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	h.want(CoordBadRequest, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 0})
	h.want(CoordBadRequest, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 4})
	if r := h.acquire(a, "s", 1, 0); !r.Acquired || r.Count != 1 {
		t.Fatalf("shared: %+v", r)
	}
	if r := h.acquire(b, "s", 2, 0); !r.Acquired {
		t.Fatalf("count 2 with 1 of 3 held: %+v", r)
	}
	if r := h.acquire(c, "s", 1, 0); r.Acquired || r.Queued {
		t.Fatalf("count 1 with 3 of 3 held: %+v", r)
	}
	h.release(a, "s")
	// Exclusive waits for everything to be free, then holds the whole limit.
	if r := h.acquire(c, "s", Exclusive, 0); r.Acquired {
		t.Fatalf("exclusive granted while 2 are held: %+v", r)
	}
	h.release(b, "s")
	r := h.acquire(c, "s", Exclusive, 0)
	if !r.Acquired || r.Count != 3 {
		t.Fatalf("exclusive on a free semaphore: %+v, want count 3", r)
	}
	if info := h.describe("s"); info.Count != 3 {
		t.Fatalf("count %d under an exclusive hold, want the limit 3", info.Count)
	}
	if r := h.acquire(a, "s", 1, 0); r.Acquired {
		t.Fatalf("shared granted under an exclusive hold: %+v", r)
	}
}

func TestCoordTryOnceNeverQueues(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	before := h.s.LastToken()
	r := h.acquire(b, "s", 1, 0)
	if r.Acquired || r.Queued || r.OrderID != 0 || h.s.LastToken() != before {
		t.Fatalf("try once on a held semaphore: %+v, last token %d -> %d", r, before, h.s.LastToken())
	}
	if info := h.describe("s"); len(info.Waiters) != 0 {
		t.Fatalf("try once queued: %+v", info)
	}
	// With a waiter ahead, even a count that fits is not granted at once.
	h.want(CoordSuccess, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "big", Limit: 3})
	h.acquire(a, "big", 2, 0)
	h.acquire(b, "big", 2, WaitForever)
	c := h.start("/n", "")
	if r := h.acquire(c, "big", 1, 0); r.Acquired || r.Queued {
		t.Fatalf("try once jumped the queue: %+v", r)
	}
}

func TestCoordFIFOHeadOfLine(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c, d := h.start("/n", ""), h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	h.acquire(a, "s", 2, 0)
	rb := h.acquire(b, "s", 2, WaitForever) // does not fit: queued
	rc := h.acquire(c, "s", 1, WaitForever) // would fit, but b is ahead
	rd := h.acquire(d, "s", 1, WaitForever)
	if !rb.Queued || !rc.Queued || !rd.Queued || !(rb.OrderID < rc.OrderID && rc.OrderID < rd.OrderID) {
		t.Fatalf("queued %+v %+v %+v", rb, rc, rd)
	}
	if info := h.describe("s"); !slices.Equal(sessionsOf(info.Waiters), []uint64{b, c, d}) || info.Count != 2 {
		t.Fatalf("head-of-line blocking broken: %+v", info)
	}
	r := h.release(a, "s")
	g := eventsOf(r, EventGranted)
	if !r.Changed || len(g) != 2 || g[0].Session != b || g[1].Session != c || g[0].OrderID != rb.OrderID || g[1].OrderID != rc.OrderID {
		t.Fatalf("after release: %+v, want b then c granted with their order ids", r)
	}
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || !ch[0].Owners || ch[0].Data {
		t.Fatalf("changed: %+v", ch)
	}
	if info := h.describe("s"); !slices.Equal(sessionsOf(info.Owners), []uint64{b, c}) || !slices.Equal(sessionsOf(info.Waiters), []uint64{d}) {
		t.Fatalf("after release: %+v", info)
	}
}

func TestCoordOrderIDsAreFencingTokens(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	tick := h.s.Apply(Batch{Time: h.now, Ops: []Op{acq("k", ownerA, 1000)}})[0].Hold.Token
	r1 := h.acquire(a, "s", 1, 0)
	r2 := h.acquire(b, "s", 1, WaitForever)
	tick2 := h.s.Apply(Batch{Time: h.now, Ops: []Op{rel("k", tick), acq("k", ownerB, 1000)}})[1].Hold.Token
	// One counter for tickets and semaphores: no order id equals a token.
	if !(tick < r1.OrderID && r1.OrderID < r2.OrderID && r2.OrderID < tick2) || h.s.LastToken() != tick2 {
		t.Fatalf("ticket %d, orders %d %d, ticket %d, last %d: want strictly increasing from one counter",
			tick, r1.OrderID, r2.OrderID, tick2, h.s.LastToken())
	}
	// On one semaphore every grant's order id exceeds the earlier grants'.
	g := eventsOf(h.release(a, "s"), EventGranted)
	if len(g) != 1 || g[0].OrderID != r2.OrderID || g[0].OrderID <= r1.OrderID {
		t.Fatalf("grant %+v after order %d", g, r1.OrderID)
	}
	if r3 := h.acquire(a, "s", 1, WaitForever); r3.OrderID <= r2.OrderID {
		t.Fatalf("later acquire got order %d <= %d", r3.OrderID, r2.OrderID)
	}
}

func TestCoordReplaceWaiterKeepsPosition(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	h.acquire(a, "s", 3, 0)
	rb := h.acquire(b, "s", 2, WaitForever)
	h.acquire(c, "s", 1, WaitForever)
	r := h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: b, SeqNo: 1, Name: "s", Count: 3, TimeoutMs: 5000, Data: "v2"})
	ab := eventsOf(r, EventAborted)
	if !r.Queued || r.OrderID != rb.OrderID || len(ab) != 1 || ab[0].Session != b || ab[0].OrderID != rb.OrderID {
		t.Fatalf("replace: %+v, want queued with order %d and the earlier request aborted", r, rb.OrderID)
	}
	info := h.describe("s")
	if !slices.Equal(sessionsOf(info.Waiters), []uint64{b, c}) || info.Waiters[0].Count != 3 || info.Waiters[0].Data != "v2" ||
		info.Waiters[0].Deadline != h.now+5000 {
		t.Fatalf("after replace: %+v", info.Waiters)
	}
	// A replacement with timeout 0 that does not fit leaves the queue, and
	// c behind it is granted if it now fits.
	h.sem(a, "t", 3)
	h.acquire(a, "t", 1, 0)
	h.acquire(b, "t", 3, WaitForever)
	h.acquire(c, "t", 1, WaitForever) // fits, but blocked behind b
	r = h.acquire(b, "t", 3, 0)
	if r.Acquired || r.Queued {
		t.Fatalf("try-once replacement that does not fit: %+v", r)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != c {
		t.Fatalf("c not granted once b left the head: %+v", r.Events)
	}
	h.release(a, "s")
	h.release(b, "s")
	h.release(c, "s")
	// A replacement that fits is granted at once, in its queue position.
	h.release(c, "s")
	h.acquire(c, "s", 2, 0)
	h.acquire(b, "s", 2, WaitForever) // 1+2 held of 3
	r = h.acquire(b, "s", 1, WaitForever)
	if !r.Acquired || r.Count != 1 || len(eventsOf(r, EventGranted)) != 0 {
		t.Fatalf("fitting replacement: %+v, want acquired without a grant event for itself", r)
	}
}

func TestCoordReplaceOwnerCount(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	r1 := h.acquire(a, "s", 3, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(CoordBadRequest, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 4})
	h.release(b, "s")
	h.acquire(b, "s", 1, WaitForever)
	h.want(CoordSuccess, OpCoordRelease, CoordOp{Session: b, SeqNo: 1, Name: "x"})
	// Same count: new data, nothing else.
	r := h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 3, Data: "d"})
	if !r.Acquired || r.OrderID != r1.OrderID || len(eventsOf(r, EventGranted)) != 0 {
		t.Fatalf("same count: %+v", r)
	}
	// Lower: b fits and is granted in the same entry.
	r = h.acquire(a, "s", 2, 0)
	if !r.Acquired || r.Count != 2 || r.OrderID != r1.OrderID {
		t.Fatalf("lowered: %+v", r)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != b {
		t.Fatalf("lowering did not wake b: %+v", r.Events)
	}
	// Larger than held: refused, unchanged.
	h.want(CoordBadRequest, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 3})
	if info := h.describe("s"); info.Count != 3 || info.Owners[0].Count != 2 || info.Owners[0].Data != "" {
		t.Fatalf("after a refused raise: %+v", info)
	}
}

func TestCoordRelease(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.acquire(a, "s", 2, 0)
	h.acquire(a, "s", 1, 0) // lowers
	h.acquire(a, "s", 1, 0)
	rb := h.acquire(b, "s", 2, WaitForever)
	if r := h.release(a, "s"); !r.Changed {
		t.Fatalf("release after three acquires: %+v", r)
	}
	if r := h.release(a, "s"); r.Changed {
		t.Fatalf("second release changed something: %+v", r)
	}
	if r := h.release(a, "missing"); r.Changed {
		t.Fatalf("release of a missing semaphore: %+v", r)
	}
	h.acquire(a, "s", 1, WaitForever) // a waits behind b's hold
	r := h.release(a, "s")
	if ab := eventsOf(r, EventAborted); !r.Changed || len(ab) != 1 || ab[0].Session != a {
		t.Fatalf("release of a wait: %+v", r)
	}
	if info := h.describe("s"); len(info.Waiters) != 0 || info.Owners[0].OrderID != rb.OrderID {
		t.Fatalf("after: %+v", info)
	}
}

func TestCoordEphemeral(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.want(CoordNotFound, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "e", Count: 1})
	r := h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "e", Count: Exclusive, Ephemeral: true})
	if !r.Acquired || r.Count != math.MaxUint64 {
		t.Fatalf("exclusive on a new ephemeral: %+v", r)
	}
	if info := h.describe("e"); !info.Ephemeral || info.Limit != math.MaxUint64 {
		t.Fatalf("ephemeral: %+v", info)
	}
	h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: b, SeqNo: 1, Name: "e", Count: 1, TimeoutMs: WaitForever, Ephemeral: true})
	h.release(a, "e") // b waits: kept, b granted
	if info := h.describe("e"); !slices.Equal(sessionsOf(info.Owners), []uint64{b}) {
		t.Fatalf("after a's release: %+v", info)
	}
	r = h.release(b, "e")
	if _, st := h.s.DescribeSemaphore("/n", "e", false, false); st != CoordNotFound {
		t.Fatalf("ephemeral kept after the last release: %v", st)
	}
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || !ch[0].Data || !ch[0].Owners {
		t.Fatalf("deletion not reported as changed: %+v", ch)
	}
	// A try-once replacement that leaves the queue of an ephemeral deletes it
	// when it was the last user.
	h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "e", Count: 1, Ephemeral: true})
	h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: b, SeqNo: 1, Name: "e", Count: Exclusive, TimeoutMs: 1, Ephemeral: true})
	h.now += 1
	orderB := h.describe("e").Waiters[0].OrderID
	h.want(CoordSuccess, OpCoordTimeout, CoordOp{Session: b, Name: "e", OrderID: orderB})
	h.release(a, "e")
	if _, st := h.s.DescribeSemaphore("/n", "e", false, false); st != CoordNotFound {
		t.Fatalf("ephemeral kept: %v", st)
	}
}

func TestCoordUpdate(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	r := h.want(CoordSuccess, OpCoordUpdateSem, CoordOp{Session: b, SeqNo: 1, Name: "s", Data: "v"}) // b owns nothing
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || !ch[0].Data || ch[0].Owners {
		t.Fatalf("update events %+v", r.Events)
	}
	if h.describe("s").Data != "v" {
		t.Fatal("data not updated")
	}
	h.want(CoordNotFound, OpCoordUpdateSem, CoordOp{Session: b, SeqNo: 1, Name: "x", Data: "v"})
	h.want(CoordBadRequest, OpCoordUpdateSem, CoordOp{Session: b, SeqNo: 1, Name: "s", Data: strings.Repeat("d", MaxCoordData+1)})
}

func TestCoordDelete(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.want(CoordNotFound, OpCoordDeleteSem, CoordOp{Session: a, SeqNo: 1, Name: "x"})
	r1 := h.acquire(a, "s", 1, 0)
	r2 := h.acquire(b, "s", 1, 0)
	r3 := h.acquire(c, "s", 2, WaitForever)
	h.want(CoordPreconditionFailed, OpCoordDeleteSem, CoordOp{Session: c, SeqNo: 1, Name: "s"})
	r := h.want(CoordSuccess, OpCoordDeleteSem, CoordOp{Session: c, SeqNo: 1, Name: "s", Force: true})
	ab, lost := eventsOf(r, EventAborted), eventsOf(r, EventLost)
	if len(ab) != 1 || ab[0].Session != c || ab[0].OrderID != r3.OrderID {
		t.Fatalf("aborted %+v", ab)
	}
	// Owners are told (YDB tells them nothing).
	if len(lost) != 2 || lost[0].Session != a || lost[0].OrderID != r1.OrderID || lost[1].Session != b || lost[1].OrderID != r2.OrderID {
		t.Fatalf("lost %+v, want a and b told", lost)
	}
	if rr := h.release(a, "s"); rr.Changed {
		t.Fatal("release after force delete changed something")
	}
	// An unused semaphore deletes without force.
	h.sem(a, "t", 1)
	h.want(CoordSuccess, OpCoordDeleteSem, CoordOp{Session: a, SeqNo: 1, Name: "t"})
}

func TestCoordWaiterTimeout(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.acquire(a, "s", 1, 0)
	rb := h.acquire(b, "s", 2, 3000)
	h.acquire(c, "s", 1, WaitForever)
	h.now += 2999
	h.want(CoordPreconditionFailed, OpCoordTimeout, CoordOp{Session: b, Name: "s", OrderID: rb.OrderID})
	h.now += 1
	h.want(CoordPreconditionFailed, OpCoordTimeout, CoordOp{Session: b, Name: "s", OrderID: rb.OrderID + 100})
	h.want(CoordPreconditionFailed, OpCoordTimeout, CoordOp{Session: b, Name: "x", OrderID: rb.OrderID})
	h.want(CoordSessionExpired, OpCoordTimeout, CoordOp{Session: 999, Name: "s", OrderID: rb.OrderID})
	r := h.want(CoordSuccess, OpCoordTimeout, CoordOp{Session: b, Name: "s", OrderID: rb.OrderID})
	if to := eventsOf(r, EventTimedOut); len(to) != 1 || to[0].Session != b {
		t.Fatalf("timed out: %+v", r.Events)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != c {
		t.Fatalf("c behind the timed-out head not granted: %+v", r.Events)
	}
	// A granted waiter cannot be timed out afterwards.
	h.want(CoordPreconditionFailed, OpCoordTimeout, CoordOp{Session: c, Name: "s", OrderID: 0})
}

func TestCoordWaiterLimit(t *testing.T) {
	h := newHarness(t)
	h.want(CoordSuccess, OpCoordCreateNode, CoordOp{Path: "/n", Config: NodeConfig{MaxWaiters: 1}})
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(CoordLimitExceeded, OpCoordAcquire, CoordOp{Session: c, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: WaitForever})
	// The limit refuses that one request only; others go on.
	if g := eventsOf(h.release(a, "s"), EventGranted); len(g) != 1 || g[0].Session != b {
		t.Fatalf("b not granted: %+v", g)
	}
	h.acquire(c, "s", 1, WaitForever)
}

func TestCoordDescribe(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.want(CoordSuccess, OpCoordCreateSem, CoordOp{Session: a, SeqNo: 1, Name: "s", Limit: 1, Data: "sd"})
	h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: a, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: 7, Data: "od"})
	h.want(CoordSuccess, OpCoordAcquire, CoordOp{Session: b, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: 9, Data: "wd"})
	info, st := h.s.DescribeSemaphore("/n", "s", false, false)
	if st != CoordSuccess || info.Owners != nil || info.Waiters != nil || info.Data != "sd" || info.Count != 1 || info.Limit != 1 {
		t.Fatalf("describe without lists: %+v %v", info, st)
	}
	info = h.describe("s")
	wantO := []Holder{{OrderID: info.Owners[0].OrderID, Session: a, Count: 1, TimeoutMs: 7, Data: "od"}}
	wantW := []Holder{{OrderID: info.Owners[0].OrderID + 1, Session: b, Count: 1, TimeoutMs: 9, Data: "wd", Deadline: h.now + 9}}
	if !reflect.DeepEqual(info.Owners, wantO) || !reflect.DeepEqual(info.Waiters, wantW) {
		t.Fatalf("describe: %+v\nwant owners %+v waiters %+v", info, wantO, wantW)
	}
	if _, st := h.s.DescribeSemaphore("/missing", "s", true, true); st != CoordNotFound {
		t.Fatal("missing node described")
	}
	if n, _ := h.s.DescribeNode("/n"); n.Sessions != 2 || n.Semaphores != 1 || n.Waiters != 1 {
		t.Fatalf("node %+v", n)
	}
}

func TestCoordStatusNames(t *testing.T) {
	want := []string{"SUCCESS", "NOT_FOUND", "ALREADY_EXISTS", "BAD_REQUEST", "PRECONDITION_FAILED", "ABORTED",
		"SESSION_EXPIRED", "BAD_SESSION", "UNAUTHORIZED", "LIMIT_EXCEEDED"}
	for i, w := range want {
		if got := CoordStatus(i).String(); got != w {
			t.Errorf("status %d = %s, want %s (the wire numbers are fixed)", i, got, w)
		}
	}
}

// coordStream is a reproducible random stream of coordination operations
// over a few nodes, sessions and semaphores, with leader takeovers and
// tickets, so that every rule interacts with the others. It picks live
// sessions and their current seq_no most of the time (from a shadow state it
// applies the stream to), and stale or unknown ones sometimes.
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
			o := &CoordOp{Session: uint64(rng.IntN(20)), SeqNo: uint64(rng.IntN(3)), Path: paths[rng.IntN(2)], Name: names[rng.IntN(3)]}
			if live := shadow.Sessions(""); len(live) > 0 && rng.IntN(8) != 0 {
				ss := live[rng.IntN(len(live))]
				o.Session, o.SeqNo, o.Path = ss.ID, ss.SeqNo, ss.Path
			}
			var kind OpKind
			switch rng.IntN(16) {
			case 0:
				kind, o.Config = OpCoordCreateNode, NodeConfig{MaxWaiters: uint32(rng.IntN(4))}
			case 1:
				kind, o.Config = OpCoordAlterNode, NodeConfig{GraceMs: uint32(rng.IntN(20000))}
			case 2:
				if rng.IntN(10) == 0 {
					kind = OpCoordDropNode
				} else {
					kind = OpCoordExpire
				}
			case 3, 4:
				kind, o.TimeoutMs, o.Key = OpCoordAttach, uint64(rng.IntN(10000)+1), "k"
				o.SeqNo += uint64(rng.IntN(2))
				if rng.IntN(2) == 0 {
					o.Session = 0
				}
			case 5:
				kind = OpCoordDetach
			case 6:
				if kind = OpCoordStop; rng.IntN(3) != 0 {
					kind = OpCoordDetach
				}
			case 7:
				kind, o.Limit, o.Data = OpCoordCreateSem, uint64(rng.IntN(4)), "d"
			case 8:
				kind, o.Data = OpCoordUpdateSem, fmt.Sprint(i)
			case 9:
				kind, o.Force = OpCoordDeleteSem, rng.IntN(2) == 0
			case 10, 11, 12, 13:
				kind, o.Count, o.Ephemeral = OpCoordAcquire, uint64(rng.IntN(4)), rng.IntN(2) == 0
				if rng.IntN(6) == 0 {
					o.Count = Exclusive
				}
				o.TimeoutMs = []uint64{0, 500, 5000, WaitForever}[rng.IntN(4)]
			case 14:
				kind = OpCoordRelease
			case 15:
				kind, o.OrderID = OpCoordTimeout, shadow.LastToken()-uint64(rng.IntN(5))
			}
			ops = append(ops, Op{Kind: kind, Coord: o})
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
	snap := func(s *State) map[key]SemaphoreInfo {
		out := make(map[key]SemaphoreInfo)
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
