package core

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// The fakes behind the core's ports, and a harness that drives the core's
// own steps (onRequest, onResult, event, fireTimers, retryNow, afterStep)
// from the test goroutine: no Raft, no fsync, no run loop, and nothing
// happens that the test did not ask for. The proposer and awaiter
// goroutines run as in production, so batches are proposed and their
// outcomes delivered in log order.

// fakeStep scripts the outcome of one proposal.
type fakeStep struct {
	o     Outcome       // what the awaiter reports
	apply bool          // apply the batch to the state (always for Applied)
	gate  chan struct{} // when set, the outcome waits until it is closed
}

// fakeLog is an in-memory replicated log: an fsm.State that applies each
// batch when its outcome is awaited (in log order), as scripted.
type fakeLog struct {
	mu       *sync.Mutex // shared with the log's peers (peer)
	st       *fsm.State
	script   []fakeStep
	proposed [][]fsm.Op // every proposed batch's ops, in order
	lead     Leadership
}

func (l *fakeLog) Propose(data []byte) func() ([]fsm.Result, Outcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := fsm.DecodeBatch(data)
	if err != nil {
		panic(err) // the core encoded it: a failure here is a core bug
	}
	l.proposed = append(l.proposed, b.Ops)
	step := fakeStep{o: Applied}
	if len(l.script) > 0 {
		step, l.script = l.script[0], l.script[1:]
	}
	return func() ([]fsm.Result, Outcome, error) {
		if step.gate != nil {
			<-step.gate
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		var res []fsm.Result
		if step.o == Applied || step.apply {
			res = l.st.Apply(b)
		}
		switch step.o {
		case Refused:
			return nil, Refused, errors.New("fake: refused before it was written")
		case Unknown:
			return nil, Unknown, errors.New("fake: Outcome unknown")
		}
		return res, Applied, nil
	}
}

func (l *fakeLog) Barrier() error { return nil }

// peer is another server's view of the same log: one state and one lock,
// but its own leadership, script and proposals, so that two cores can lead
// one after the other over the same applied state.
func (l *fakeLog) peer() *fakeLog { return &fakeLog{mu: l.mu, st: l.st} }

func (l *fakeLog) Leadership() Leadership {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lead
}

func (l *fakeLog) Read(fn func(*fsm.State)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l.st)
}

func (l *fakeLog) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Len()
}

// then scripts the outcomes of the next proposals.
func (l *fakeLog) then(steps ...fakeStep) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.script = append(l.script, steps...)
}

func (l *fakeLog) proposals() [][]fsm.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]fsm.Op(nil), l.proposed...)
}

func (l *fakeLog) hold(key string) (fsm.Hold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Get(key)
}

// fakeServing records what the core tells the server.
type fakeServing struct {
	mu    sync.Mutex
	calls []bool
}

func (s *fakeServing) SetServing(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, on)
}

func (s *fakeServing) NotLeaderFrame() *wire.Frame {
	return &wire.Frame{Type: wire.TypeNotLeader, Text: []byte("127.0.0.1:1")}
}

// fakeMetrics counts by name (the awaiter reports commit times from its
// goroutine, hence the lock).
type fakeMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *fakeMetrics) inc(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = make(map[string]int)
	}
	m.n[name]++
}

func (m *fakeMetrics) get(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

func (m *fakeMetrics) Grant()                         { m.inc("grant") }
func (m *fakeMetrics) Release()                       { m.inc("release") }
func (m *fakeMetrics) Expiry()                        { m.inc("expiry") }
func (m *fakeMetrics) NotAcquired()                   { m.inc("not_acquired") }
func (m *fakeMetrics) CapacityReject(reason uint8)    { m.inc(fmt.Sprint("capacity_", reason)) }
func (m *fakeMetrics) AcquireSeconds(d time.Duration) { m.inc("acquire_seconds") }
func (m *fakeMetrics) QueueWait(d time.Duration)      { m.inc("queue_wait") }
func (m *fakeMetrics) CommitSeconds(d time.Duration)  { m.inc("commit_seconds") }

// fakeClock moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	clk   *fakeClock
	at    time.Time
	armed bool
	ch    chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) ClockTimer {
	t := &fakeTimer{clk: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	select {
	case <-t.ch: // a value not yet received is discarded, as time.Timer does
	default:
	}
	t.at, t.armed = t.clk.now.Add(d), true
	t.clk.fireLocked()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
}

// coreHarness is a core on fakes, driven step by step.
type coreHarness struct {
	t     *testing.T
	c     *Core
	log   *fakeLog
	clk   *fakeClock
	srv   *fakeServing
	m     *fakeMetrics
	term  uint64
	gates []func()
	// sealed counts the batches the core proposed: the proposer goroutine
	// hands them to the fake log, and proposals waits for it to catch up.
	sealed int
}

// afterStep ends a step as the loop does, counting a batch it proposes.
func (h *coreHarness) afterStep() {
	before := h.c.inflight
	h.c.afterStep()
	if h.c.inflight > before {
		h.sealed++
	}
}

// proposals is the ops of every batch proposed so far, in log order.
func (h *coreHarness) proposals() [][]fsm.Op {
	h.t.Helper()
	for deadline := time.Now().Add(waitFor); ; {
		if ps := h.log.proposals(); len(ps) == h.sealed {
			return ps
		}
		if time.Now().After(deadline) {
			h.t.Fatal("the proposer did not hand the sealed batches to the log")
		}
		time.Sleep(time.Millisecond) // the proposer goroutine catches up
	}
}

// gate returns a step whose outcome waits until open is called (open may be
// called more than once; cleanup opens every gate).
func (h *coreHarness) gate(st fakeStep) (step fakeStep, open func()) {
	ch := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(ch) }) }
	h.gates = append(h.gates, open)
	st.gate = ch
	return st, open
}

// waitFor bounds every wait for the proposer/awaiter goroutines.
const waitFor = 10 * time.Second

func newCoreHarness(t *testing.T, limits Limits) *coreHarness {
	t.Helper()
	return newCoreHarnessOn(t, limits, &fakeLog{mu: &sync.Mutex{}, st: fsm.New()}, &fakeClock{now: time.UnixMilli(1_700_000_000_000)}, 0)
}

// newCoreHarnessOn is a core on log and clk (a peer of another harness's log
// and the same clock, for two leaders one after the other), leading in the
// term after term.
func newCoreHarnessOn(t *testing.T, limits Limits, log *fakeLog, clk *fakeClock, term uint64) *coreHarness {
	t.Helper()
	h := newFollowerHarness(t, limits, log, clk, term)
	h.lead()
	return h
}

// newFollowerHarness is a core on log and clk that does not lead yet.
func newFollowerHarness(t *testing.T, limits Limits, log *fakeLog, clk *fakeClock, term uint64) *coreHarness {
	t.Helper()
	h := &coreHarness{t: t, log: log, clk: clk, srv: &fakeServing{}, m: &fakeMetrics{}, term: term}
	h.c = New(Ports{Log: h.log, State: h.log, Server: h.srv, Metrics: h.m,
		Config: Config{NodeID: "n1", Advertise: "127.0.0.1:7000", Limits: limits}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: h.clk})
	go h.c.proposer()
	go h.c.awaiter()
	t.Cleanup(func() {
		close(h.c.stop)
		close(h.c.propose)
		for _, open := range h.gates {
			open()
		}
		<-h.c.drained
	})
	return h
}

// testLimits are the server's default limits.
func testLimits() Limits {
	return Limits{MaxHeld: 2_000_000, MaxWaitersPerKey: 10_000, MaxWaiters: 1_000_000}
}

// lead makes the core leader in a new term and waits until it serves.
func (h *coreHarness) lead() {
	h.t.Helper()
	h.elected()
	h.takeover()
}

// elected makes the core leader in a new term; its barrier is under way.
func (h *coreHarness) elected() {
	h.term++
	l := Leadership{Leader: true, Term: h.term}
	h.log.mu.Lock()
	h.log.lead = l
	h.log.mu.Unlock()
	h.c.event(coreEvent{leader: &l})
	h.afterStep()
}

// stalledTakeover makes the core leader in a new term and commits its
// takeover entry, whose outcome it returns without handling it: the core is
// stalled between the commit and its answer (onResult resumes it).
func (h *coreHarness) stalledTakeover() applied {
	h.t.Helper()
	h.elected()
	select {
	case ev := <-h.c.events:
		h.c.event(ev)
		h.afterStep()
	case <-time.After(waitFor):
		h.t.Fatal("no barrier result")
	}
	select {
	case a := <-h.c.results:
		return a
	case <-time.After(waitFor):
		h.t.Fatal("no Outcome for the takeover")
	}
	return applied{}
}

// takeover completes a leader's start: its barrier, then its takeover entry.
func (h *coreHarness) takeover() {
	h.t.Helper()
	select {
	case ev := <-h.c.events:
		h.c.event(ev)
		h.afterStep()
	case <-time.After(waitFor):
		h.t.Fatal("no barrier result")
	}
	h.settle()
	if !h.c.serving {
		h.t.Fatal("the core does not serve after its takeover was applied")
	}
}

// do hands the core one request, as the loop does, and proposes.
func (h *coreHarness) do(r Request) {
	if r.At.IsZero() {
		r.At = h.clk.Now()
	}
	h.c.onRequest(r)
	h.afterStep()
}

// settle waits for the outcome of the oldest batch in flight and handles it.
func (h *coreHarness) settle() {
	h.t.Helper()
	if h.c.inflight == 0 {
		h.t.Fatal("settle: no batch in flight")
	}
	select {
	case a := <-h.c.results:
		h.c.onResult(a)
		h.afterStep()
	case <-time.After(waitFor):
		h.t.Fatal("no Outcome for a proposed batch")
	}
}

// settleAll settles until nothing is in flight.
func (h *coreHarness) settleAll() {
	h.t.Helper()
	for h.c.inflight > 0 {
		h.settle()
	}
}

// advance moves the clock and handles the timers that fire, as the loop does.
func (h *coreHarness) advance(d time.Duration) {
	h.clk.advance(d)
	for {
		select {
		case <-h.c.timer.C():
			h.c.fireTimers()
		case <-h.c.retryT.C():
			h.c.retryNow()
		default:
			return
		}
		h.afterStep()
	}
}

// fakeConn is a client connection with no socket behind it: the frames the
// core sends pile up, where frames reads them. Like a connection, it takes
// no more once it is closing (closed, or ended by the core).
type fakeConn struct {
	out     []wire.Frame
	closing bool
	ended   bool // End was called
	forbids int  // Forbid calls
	deny    bool // AllowCoord refuses
}

func (f *fakeConn) Send(fr *wire.Frame) bool {
	if f.closing {
		return false
	}
	f.out = append(f.out, *fr)
	return true
}

func (f *fakeConn) Finish(id uint32, fr *wire.Frame) bool { return f.Send(fr) }

func (f *fakeConn) End(fr *wire.Frame) {
	if !f.closing {
		f.out = append(f.out, *fr)
		f.closing, f.ended = true, true
	}
}

func (f *fakeConn) Forbid(id uint32, op, key string, reason uint8) {
	f.forbids++
	f.Finish(id, &wire.Frame{Type: wire.TypeForbidden, ID: id, Reason: reason})
}

func (f *fakeConn) Remote() string { return "192.0.2.1:40000" }

func (f *fakeConn) AllowCoord(id uint32, op uint8, path string) bool {
	if f.deny {
		AnswerCoord(f, id, op, wire.CoordUnauthorized, nil)
	}
	return !f.deny
}

// conn is a new fake connection.
func (h *coreHarness) conn() *fakeConn { return &fakeConn{} }

// close ends cn as its reader does: no more answers, then the core is told.
func (h *coreHarness) close(cn *fakeConn) {
	cn.closing = true
	h.do(Request{Kind: reqClosed, Conn: cn})
}

func owner(b byte) wire.Owner { return wire.Owner{b} }

func (h *coreHarness) acquire(cn *fakeConn, id uint32, o byte, key string, wait, lease uint8) {
	h.do(Request{Kind: wire.TypeAcquire, Conn: cn, ID: id, Owner: owner(o), Key: key, Wait: wait, Lease: lease})
}

func (h *coreHarness) release(cn *fakeConn, id uint32, key string, token uint64) {
	h.do(Request{Kind: wire.TypeRelease, Conn: cn, ID: id, Key: key, Token: token})
}

func (h *coreHarness) cancel(cn *fakeConn, id uint32, o byte) {
	h.do(Request{Kind: wire.TypeCancel, Conn: cn, ID: id, Owner: owner(o)})
}

// frames takes every answer cn was sent since the last call.
func (h *coreHarness) frames(cn *fakeConn) []wire.Frame {
	out := cn.out
	cn.out = nil
	return out
}

// expect takes cn's answers and checks their types and ids, in order.
func (h *coreHarness) expect(cn *fakeConn, want ...wire.Frame) []wire.Frame {
	h.t.Helper()
	got := h.frames(cn)
	if len(got) != len(want) {
		h.t.Fatalf("got %d answers %v, want %d %v", len(got), types(got), len(want), types(want))
	}
	for i := range want {
		if got[i].Type != want[i].Type || got[i].ID != want[i].ID {
			h.t.Fatalf("answer %d is %v id %d, want %v id %d (all: %v)", i, got[i].Type, got[i].ID, want[i].Type, want[i].ID, types(got))
		}
	}
	return got
}

func types(fs []wire.Frame) []string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Type.String())
	}
	return s
}

func fr(t wire.Type, id uint32) wire.Frame { return wire.Frame{Type: t, ID: id} }
