package coordsm

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// harness applies one op at a time at its current time, with its own
// fencing-token counter (the dispatcher's, in package fsm), and checks the
// invariants after each.
type harness struct {
	t      testing.TB
	c      *State
	tokens uint64
	now    int64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, c: New(), now: 1000} }

func (h *harness) do(kind Kind, o Op) *Result {
	h.t.Helper()
	r := h.c.Apply(h.now, kind, &o, &h.tokens)
	checkInvariants(h.t, h.c, h.tokens)
	return r
}

// want applies the op and fails unless it ends with status st.
func (h *harness) want(st Status, kind Kind, o Op) *Result {
	h.t.Helper()
	r := h.do(kind, o)
	if r.Status != st {
		h.t.Fatalf("op %d %+v: status %v, want %v", kind, o, r.Status, st)
	}
	return r
}

func (h *harness) node(path string) {
	h.t.Helper()
	h.want(Success, CreateNode, Op{Path: path})
}

// start starts a session with key k, seq_no 1 and a 10 s timeout.
func (h *harness) start(path, k string) uint64 {
	h.t.Helper()
	return h.want(Success, Attach, Op{Path: path, Key: k, SeqNo: 1, TimeoutMs: 10000}).Session
}

func (h *harness) sem(sess uint64, name string, limit uint64) {
	h.t.Helper()
	h.want(Success, CreateSem, Op{Session: sess, SeqNo: 1, Name: name, Limit: limit})
}

func (h *harness) acquire(sess uint64, name string, count, timeout uint64) *Result {
	h.t.Helper()
	return h.want(Success, Acquire, Op{Session: sess, SeqNo: 1, Name: name, Count: count, TimeoutMs: timeout})
}

func (h *harness) release(sess uint64, name string) *Result {
	h.t.Helper()
	return h.want(Success, Release, Op{Session: sess, SeqNo: 1, Name: name})
}

func (h *harness) describe(name string) SemaphoreInfo {
	h.t.Helper()
	info, st := h.c.DescribeSemaphore("/n", name, true, true)
	if st != Success {
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

func eventsOf(r *Result, k EventKind) []Event {
	var out []Event
	for _, e := range r.Events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// checkInvariants checks what every operation must preserve: counts and
// indexes agree with the holders, owners come before waiters in order-id
// order, the head waiter does not fit, no unused ephemeral semaphore, and the
// state survives a snapshot round trip (whose reader checks the same).
func checkInvariants(t testing.TB, c *State, tokens uint64) {
	t.Helper()
	if err := c.CheckInvariants(tokens); err != nil {
		t.Fatal(err)
	}
	first := c.AppendSnapshot(nil)
	if len(first) == 0 {
		if !c.Empty() {
			t.Fatal("a state that is not empty wrote no snapshot section")
		}
		return
	}
	d := &enc.Decoder{B: first}
	r := New()
	r.ReadSnapshot(d, tokens)
	if d.Err != nil || len(d.B) != 0 {
		t.Fatalf("snapshot of a reachable state does not read: %v (%d bytes left)", d.Err, len(d.B))
	}
	if again := r.AppendSnapshot(nil); !slices.Equal(first, again) {
		t.Fatal("snapshot round trip changed the state")
	}
}

func TestNodes(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"", "/", "x", "/a/", "//a", "/a//b", "/" + strings.Repeat("x", MaxPath)} {
		h.want(BadRequest, CreateNode, Op{Path: p})
	}
	h.node("/" + strings.Repeat("x", MaxPath-1))
	h.node("/path/to/mynode")
	h.want(AlreadyExists, CreateNode, Op{Path: "/path/to/mynode"})
	info, ok := h.c.DescribeNode("/path/to/mynode")
	if !ok || info.Config != DefaultNodeConfig {
		t.Fatalf("describe = %+v %v, want the defaults %+v", info, ok, DefaultNodeConfig)
	}
	if DefaultNodeConfig.SelfCheckMs != 1000 || DefaultNodeConfig.GraceMs != 10000 ||
		DefaultNodeConfig.ReadMode != ReadRelaxed || DefaultNodeConfig.AttachMode != AttachStrict {
		t.Fatalf("defaults %+v differ from docs/coordination.md", DefaultNodeConfig)
	}
	// Grace must be strictly greater than the self-check period; modes known.
	for _, cfg := range []NodeConfig{{SelfCheckMs: 10000}, {GraceMs: 1000}, {SelfCheckMs: 5, GraceMs: 5}, {ReadMode: 3}, {AttachMode: 3}} {
		h.want(BadRequest, CreateNode, Op{Path: "/bad", Config: cfg})
		h.want(BadRequest, AlterNode, Op{Path: "/path/to/mynode", Config: cfg})
	}
	if _, ok := h.c.DescribeNode("/bad"); ok {
		t.Fatal("an invalid create made a node")
	}
	// Alter changes only the fields given.
	h.want(Success, AlterNode, Op{Path: "/path/to/mynode", Config: NodeConfig{GraceMs: 20000, ReadMode: ReadStrict}})
	info, _ = h.c.DescribeNode("/path/to/mynode")
	want := DefaultNodeConfig
	want.GraceMs, want.ReadMode = 20000, ReadStrict
	if info.Config != want {
		t.Fatalf("after alter: %+v, want %+v", info.Config, want)
	}
	h.want(NotFound, AlterNode, Op{Path: "/missing"})
	h.want(NotFound, DropNode, Op{Path: "/missing"})
	h.want(Success, DropNode, Op{Path: "/path/to/mynode"})
	if _, ok := h.c.DescribeNode("/path/to/mynode"); ok {
		t.Fatal("dropped node still described")
	}
	h.node("/path/to/mynode") // a dropped path can be created again
}

func TestDropNodeEndsSessions(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	h.node("/other")
	a, b := h.start("/n", ""), h.start("/n", "")
	o := h.start("/other", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	r := h.want(Success, DropNode, Op{Path: "/n"})
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
	h.want(SessionExpired, Release, Op{Session: a, SeqNo: 1, Name: "s"})
	if _, ok := h.c.Session(o); !ok {
		t.Fatal("a session of another node ended")
	}
}

func TestSessionStartRestore(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	h.node("/m")
	for _, o := range []Op{
		{Path: "/n", TimeoutMs: 0},
		{Path: "/n", TimeoutMs: MaxSessionTimeout + 1},
		{Path: "/n", TimeoutMs: 1, Desc: strings.Repeat("d", MaxDesc+1)},
		{Path: "/n", TimeoutMs: 1, Key: strings.Repeat("k", MaxKey+1)},
	} {
		h.want(BadRequest, Attach, o)
	}
	h.want(NotFound, Attach, Op{Path: "/missing", TimeoutMs: 1})
	id := h.want(Success, Attach, Op{Path: "/n", Key: strings.Repeat("k", MaxKey), SeqNo: 5,
		TimeoutMs: MaxSessionTimeout, Desc: strings.Repeat("d", MaxDesc)}).Session
	id2 := h.start("/n", "")
	if id == 0 || id2 <= id {
		t.Fatalf("session ids %d then %d, want increasing from 1", id, id2)
	}
	key := strings.Repeat("k", MaxKey)
	h.want(BadSession, Attach, Op{Path: "/n", Session: id, Key: "wrong", SeqNo: 9, TimeoutMs: 1})
	h.want(BadSession, Attach, Op{Path: "/n", Session: id, Key: key, SeqNo: 4, TimeoutMs: 1})
	h.want(SessionExpired, Attach, Op{Path: "/n", Session: 999, Key: key, SeqNo: 9, TimeoutMs: 1})
	h.want(SessionExpired, Attach, Op{Path: "/m", Session: id, Key: key, SeqNo: 9, TimeoutMs: 1})
	// An equal seq_no is a retried attach; a higher one takes the session over
	// and may change its timeout and description.
	h.want(Success, Attach, Op{Path: "/n", Session: id, Key: key, SeqNo: 5, TimeoutMs: MaxSessionTimeout})
	r := h.want(Success, Attach, Op{Path: "/n", Session: id, Key: key, SeqNo: 6, TimeoutMs: 7000, Desc: "new"})
	if r.Session != id || r.SeqNo != 6 {
		t.Fatalf("restore answered %+v", r)
	}
	info, _ := h.c.Session(id)
	if info.TimeoutMs != 7000 || info.Desc != "new" || info.SeqNo != 6 || !info.Attached {
		t.Fatalf("after restore: %+v", info)
	}
	// The older attach can no longer act for the session.
	h.want(BadSession, CreateSem, Op{Session: id, SeqNo: 5, Name: "s", Limit: 1})
	h.want(BadSession, Detach, Op{Session: id, SeqNo: 5})
	if info, _ := h.c.Session(id); !info.Attached {
		t.Fatal("a detach from the older attach detached the session")
	}
	h.want(SessionExpired, CreateSem, Op{Session: 999, SeqNo: 1, Name: "s", Limit: 1})
	if got := h.c.Sessions("/n"); len(got) != 2 || got[0].ID != id || got[1].ID != id2 {
		t.Fatalf("Sessions(/n) = %+v", got)
	}
}

func TestSessionLimit(t *testing.T) {
	h := newHarness(t)
	h.want(Success, CreateNode, Op{Path: "/n", Config: NodeConfig{MaxSessions: 2}})
	h.start("/n", "")
	b := h.start("/n", "")
	h.want(LimitExceeded, Attach, Op{Path: "/n", SeqNo: 1, TimeoutMs: 1})
	h.want(Success, Stop, Op{Session: b, SeqNo: 1})
	h.start("/n", "") // room again
}

func TestDetachExpire(t *testing.T) {
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
	h.want(NotFound, Acquire, Op{Session: c, SeqNo: 1, Name: "u", Count: 1})
	h.want(PreconditionFailed, Expire, Op{Session: a})
	h.now = 2000
	h.want(Success, Detach, Op{Session: a, SeqNo: 1})
	if info, _ := h.c.Session(a); info.Attached || info.ExpiresAt != 12000 {
		t.Fatalf("after detach: %+v, want detached until 12000", info)
	}
	h.now = 5000
	h.want(Success, Detach, Op{Session: a, SeqNo: 1}) // again: the expiry stays
	if info, _ := h.c.Session(a); info.ExpiresAt != 12000 {
		t.Fatalf("a second detach moved the expiry to %d", info.ExpiresAt)
	}
	h.now = 11999
	h.want(PreconditionFailed, Expire, Op{Session: a})
	h.now = 12000
	r := h.want(Success, Expire, Op{Session: a})
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
	h.want(SessionExpired, Expire, Op{Session: a})
	h.want(SessionExpired, Attach, Op{Path: "/n", Session: a, Key: "k", SeqNo: 2, TimeoutMs: 1})
}

func TestRestoreBeatsExpire(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a := h.start("/n", "k")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.want(Success, Detach, Op{Session: a, SeqNo: 1})
	h.now += 20000 // past the expiry, but the restore commits first
	h.want(Success, Attach, Op{Path: "/n", Session: a, Key: "k", SeqNo: 2, TimeoutMs: 10000})
	h.want(PreconditionFailed, Expire, Op{Session: a})
	if info := h.describe("s"); !slices.Equal(sessionsOf(info.Owners), []uint64{a}) {
		t.Fatalf("restored session lost its hold: %+v", info)
	}
}

func TestStop(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(BadSession, Stop, Op{Session: a, SeqNo: 0})
	r := h.want(Success, Stop, Op{Session: a, SeqNo: 1})
	if e := eventsOf(r, EventSessionEnded); len(e) != 1 || e[0].Reason != EndStopped {
		t.Fatalf("ended: %+v", e)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != b {
		t.Fatalf("granted: %+v", g)
	}
	h.want(SessionExpired, Stop, Op{Session: a, SeqNo: 1})
}

func TestSemaphoreCreate(t *testing.T) {
	h := newHarness(t)
	h.want(Success, CreateNode, Op{Path: "/n", Config: NodeConfig{MaxSemaphores: 2}})
	a := h.start("/n", "")
	h.want(BadRequest, CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 0})
	h.want(BadRequest, CreateSem, Op{Session: a, SeqNo: 1, Name: "", Limit: 1})
	h.want(BadRequest, CreateSem, Op{Session: a, SeqNo: 1, Name: strings.Repeat("n", MaxName+1), Limit: 1})
	h.want(BadRequest, CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 1, Data: strings.Repeat("d", MaxData+1)})
	h.want(Success, CreateSem, Op{Session: a, SeqNo: 1, Name: strings.Repeat("n", MaxName), Limit: 1, Data: strings.Repeat("d", MaxData)})
	h.want(Success, CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 10, Data: "cfg"})
	h.want(AlreadyExists, CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 3})
	h.want(LimitExceeded, CreateSem, Op{Session: a, SeqNo: 1, Name: "t", Limit: 3})
	h.want(LimitExceeded, Acquire, Op{Session: a, SeqNo: 1, Name: "e", Count: 1, Ephemeral: true})
	if info := h.describe("s"); info.Limit != 10 || info.Data != "cfg" || info.Ephemeral || info.Count != 0 {
		t.Fatalf("s = %+v", info)
	}
}

func TestCountLimitSharedExclusive(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	h.want(BadRequest, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 0})
	h.want(BadRequest, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 4})
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

func TestTryOnceNeverQueues(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	before := h.tokens
	r := h.acquire(b, "s", 1, 0)
	if r.Acquired || r.Queued || r.OrderID != 0 || h.tokens != before {
		t.Fatalf("try once on a held semaphore: %+v, last token %d -> %d", r, before, h.tokens)
	}
	if info := h.describe("s"); len(info.Waiters) != 0 {
		t.Fatalf("try once queued: %+v", info)
	}
	// With a waiter ahead, even a count that fits is not granted at once.
	h.want(Success, CreateSem, Op{Session: a, SeqNo: 1, Name: "big", Limit: 3})
	h.acquire(a, "big", 2, 0)
	h.acquire(b, "big", 2, WaitForever)
	c := h.start("/n", "")
	if r := h.acquire(c, "big", 1, 0); r.Acquired || r.Queued {
		t.Fatalf("try once jumped the queue: %+v", r)
	}
}

func TestFIFOHeadOfLine(t *testing.T) {
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

func TestReplaceWaiterKeepsPosition(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	h.acquire(a, "s", 3, 0)
	rb := h.acquire(b, "s", 2, WaitForever)
	h.acquire(c, "s", 1, WaitForever)
	r := h.want(Success, Acquire, Op{Session: b, SeqNo: 1, Name: "s", Count: 3, TimeoutMs: 5000, Data: "v2"})
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

func TestReplaceOwnerCount(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 3)
	r1 := h.acquire(a, "s", 3, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(BadRequest, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 4})
	h.release(b, "s")
	h.acquire(b, "s", 1, WaitForever)
	h.want(Success, Release, Op{Session: b, SeqNo: 1, Name: "x"})
	// Same count: new data, nothing else.
	r := h.want(Success, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 3, Data: "d"})
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
	h.want(BadRequest, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 3})
	if info := h.describe("s"); info.Count != 3 || info.Owners[0].Count != 2 || info.Owners[0].Data != "" {
		t.Fatalf("after a refused raise: %+v", info)
	}
}

func TestRelease(t *testing.T) {
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

func TestEphemeral(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.want(NotFound, Acquire, Op{Session: a, SeqNo: 1, Name: "e", Count: 1})
	r := h.want(Success, Acquire, Op{Session: a, SeqNo: 1, Name: "e", Count: Exclusive, Ephemeral: true})
	if !r.Acquired || r.Count != math.MaxUint64 {
		t.Fatalf("exclusive on a new ephemeral: %+v", r)
	}
	if info := h.describe("e"); !info.Ephemeral || info.Limit != math.MaxUint64 {
		t.Fatalf("ephemeral: %+v", info)
	}
	h.want(Success, Acquire, Op{Session: b, SeqNo: 1, Name: "e", Count: 1, TimeoutMs: WaitForever, Ephemeral: true})
	h.release(a, "e") // b waits: kept, b granted
	if info := h.describe("e"); !slices.Equal(sessionsOf(info.Owners), []uint64{b}) {
		t.Fatalf("after a's release: %+v", info)
	}
	r = h.release(b, "e")
	if _, st := h.c.DescribeSemaphore("/n", "e", false, false); st != NotFound {
		t.Fatalf("ephemeral kept after the last release: %v", st)
	}
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || !ch[0].Data || !ch[0].Owners {
		t.Fatalf("deletion not reported as changed: %+v", ch)
	}
	// A try-once replacement that leaves the queue of an ephemeral deletes it
	// when it was the last user.
	h.want(Success, Acquire, Op{Session: a, SeqNo: 1, Name: "e", Count: 1, Ephemeral: true})
	h.want(Success, Acquire, Op{Session: b, SeqNo: 1, Name: "e", Count: Exclusive, TimeoutMs: 1, Ephemeral: true})
	h.now += 1
	orderB := h.describe("e").Waiters[0].OrderID
	h.want(Success, Timeout, Op{Session: b, Name: "e", OrderID: orderB})
	h.release(a, "e")
	if _, st := h.c.DescribeSemaphore("/n", "e", false, false); st != NotFound {
		t.Fatalf("ephemeral kept: %v", st)
	}
}

func TestUpdate(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	r := h.want(Success, UpdateSem, Op{Session: b, SeqNo: 1, Name: "s", Data: "v"}) // b owns nothing
	if ch := eventsOf(r, EventChanged); len(ch) != 1 || !ch[0].Data || ch[0].Owners {
		t.Fatalf("update events %+v", r.Events)
	}
	if h.describe("s").Data != "v" {
		t.Fatal("data not updated")
	}
	h.want(NotFound, UpdateSem, Op{Session: b, SeqNo: 1, Name: "x", Data: "v"})
	h.want(BadRequest, UpdateSem, Op{Session: b, SeqNo: 1, Name: "s", Data: strings.Repeat("d", MaxData+1)})
}

func TestDelete(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.want(NotFound, DeleteSem, Op{Session: a, SeqNo: 1, Name: "x"})
	r1 := h.acquire(a, "s", 1, 0)
	r2 := h.acquire(b, "s", 1, 0)
	r3 := h.acquire(c, "s", 2, WaitForever)
	h.want(PreconditionFailed, DeleteSem, Op{Session: c, SeqNo: 1, Name: "s"})
	r := h.want(Success, DeleteSem, Op{Session: c, SeqNo: 1, Name: "s", Force: true})
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
	h.want(Success, DeleteSem, Op{Session: a, SeqNo: 1, Name: "t"})
}

func TestWaiterTimeout(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 2)
	h.acquire(a, "s", 1, 0)
	rb := h.acquire(b, "s", 2, 3000)
	h.acquire(c, "s", 1, WaitForever)
	h.now += 2999
	h.want(PreconditionFailed, Timeout, Op{Session: b, Name: "s", OrderID: rb.OrderID})
	h.now += 1
	h.want(PreconditionFailed, Timeout, Op{Session: b, Name: "s", OrderID: rb.OrderID + 100})
	h.want(PreconditionFailed, Timeout, Op{Session: b, Name: "x", OrderID: rb.OrderID})
	h.want(SessionExpired, Timeout, Op{Session: 999, Name: "s", OrderID: rb.OrderID})
	r := h.want(Success, Timeout, Op{Session: b, Name: "s", OrderID: rb.OrderID})
	if to := eventsOf(r, EventTimedOut); len(to) != 1 || to[0].Session != b {
		t.Fatalf("timed out: %+v", r.Events)
	}
	if g := eventsOf(r, EventGranted); len(g) != 1 || g[0].Session != c {
		t.Fatalf("c behind the timed-out head not granted: %+v", r.Events)
	}
	// A granted waiter cannot be timed out afterwards.
	h.want(PreconditionFailed, Timeout, Op{Session: c, Name: "s", OrderID: 0})
}

func TestWaiterLimit(t *testing.T) {
	h := newHarness(t)
	h.want(Success, CreateNode, Op{Path: "/n", Config: NodeConfig{MaxWaiters: 1}})
	a, b, c := h.start("/n", ""), h.start("/n", ""), h.start("/n", "")
	h.sem(a, "s", 1)
	h.acquire(a, "s", 1, 0)
	h.acquire(b, "s", 1, WaitForever)
	h.want(LimitExceeded, Acquire, Op{Session: c, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: WaitForever})
	// The limit refuses that one request only; others go on.
	if g := eventsOf(h.release(a, "s"), EventGranted); len(g) != 1 || g[0].Session != b {
		t.Fatalf("b not granted: %+v", g)
	}
	h.acquire(c, "s", 1, WaitForever)
}

func TestDescribe(t *testing.T) {
	h := newHarness(t)
	h.node("/n")
	a, b := h.start("/n", ""), h.start("/n", "")
	h.want(Success, CreateSem, Op{Session: a, SeqNo: 1, Name: "s", Limit: 1, Data: "sd"})
	h.want(Success, Acquire, Op{Session: a, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: 7, Data: "od"})
	h.want(Success, Acquire, Op{Session: b, SeqNo: 1, Name: "s", Count: 1, TimeoutMs: 9, Data: "wd"})
	info, st := h.c.DescribeSemaphore("/n", "s", false, false)
	if st != Success || info.Owners != nil || info.Waiters != nil || info.Data != "sd" || info.Count != 1 || info.Limit != 1 {
		t.Fatalf("describe without lists: %+v %v", info, st)
	}
	info = h.describe("s")
	wantO := []Holder{{OrderID: info.Owners[0].OrderID, Session: a, Count: 1, TimeoutMs: 7, Data: "od"}}
	wantW := []Holder{{OrderID: info.Owners[0].OrderID + 1, Session: b, Count: 1, TimeoutMs: 9, Data: "wd", Deadline: h.now + 9}}
	if !reflect.DeepEqual(info.Owners, wantO) || !reflect.DeepEqual(info.Waiters, wantW) {
		t.Fatalf("describe: %+v\nwant owners %+v waiters %+v", info, wantO, wantW)
	}
	if _, st := h.c.DescribeSemaphore("/missing", "s", true, true); st != NotFound {
		t.Fatal("missing node described")
	}
	if n, _ := h.c.DescribeNode("/n"); n.Sessions != 2 || n.Semaphores != 1 || n.Waiters != 1 {
		t.Fatalf("node %+v", n)
	}
}

func TestStatusNames(t *testing.T) {
	want := []string{"SUCCESS", "NOT_FOUND", "ALREADY_EXISTS", "BAD_REQUEST", "PRECONDITION_FAILED", "ABORTED",
		"SESSION_EXPIRED", "BAD_SESSION", "UNAUTHORIZED", "LIMIT_EXCEEDED"}
	for i, w := range want {
		if got := Status(i).String(); got != w {
			t.Errorf("status %d = %s, want %s (the wire numbers are fixed)", i, got, w)
		}
	}
}

// coordStream is a reproducible random stream of coordination operations
// over a few nodes, sessions and semaphores, with leader takeovers and
// tickets, so that every rule interacts with the others. It picks live
// sessions and their current seq_no most of the time (from a shadow state it
// applies the stream to), and stale or unknown ones sometimes.
