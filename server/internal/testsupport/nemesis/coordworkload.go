package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
)

// DialFunc opens a connection (from a namespace of the harness).
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// The coordination workload's node and semaphores.
const (
	CoordNode     = "/nemesis"
	coordLimit1   = "limit-1"
	coordLimit3   = "limit-3"
	coordElection = "leader"
	// coordElectionSem labels the election's holds in the history.
	coordElectionSem = "election " + coordElection
)

// CoordConfig shapes the coordination workload.
type CoordConfig struct {
	Sessions int           // sessions working at once (default 12)
	Timeout  time.Duration // their session timeout (default 3 s)
	Grace    time.Duration // the node's session grace period (default 3 s)
	// Dialers open the sessions' connections: session slot i uses
	// Dialers[i%len(Dialers)]; a nil entry dials from the root namespace.
	Dialers []DialFunc
	// Observer reaches the servers on a path no fault touches: it creates
	// the node and lists its sessions every 200 ms.
	Observer DialFunc
	// AbandonEvery is the mean time between two sessions the workload
	// abandons while they hold something: their connection goes silent
	// (both ways, open) and they never dial again, as a frozen or vanished
	// client process (default 8 s).
	AbandonEvery time.Duration
	Seed         uint64
	// MaxLag is the bound on how late a call may return after its context
	// ended (default 100 ms).
	MaxLag time.Duration
}

// ExpiryBound is how long after its client is gone a session may still
// be listed: its timeout and the node's grace period (docs/coordination.md:
// a detached session expires within timeout + grace of its detach, however
// many leader changes follow), the server's three ping intervals before it
// notices a silent connection (1.5 s by default), and 2 s for committing
// the expiry (an election may come first) and for the observer's polling.
func (c CoordConfig) ExpiryBound() time.Duration {
	return c.Timeout + c.Grace + 1500*time.Millisecond + 2*time.Second
}

// CoordWorkload is sessions of the coordination SDK taking turns on a
// limit-1 and a limit-3 semaphore and an Election, recording each hold as
// its holder saw it, every call's return against its context's deadline,
// and the sessions it gave up; an observer lists the node's sessions.
type CoordWorkload struct {
	cfg   CoordConfig
	addrs string
	h     *History
	stop  atomic.Bool
	wg    sync.WaitGroup
	obs   *coordination.Client

	obsStop, obsDone chan struct{}
	probeDone        chan struct{}
	nextAbandon      atomic.Int64 // history time (ns) after which the next grant is abandoned

	mu      sync.Mutex
	holds   []CoordHold
	calls   []CoordCall
	gaveUp  []CoordExpiry
	polls   []sessionPoll
	stalls  []stall // the probe's oversleeps, in time order
	clients []*coordination.Client
	live    map[*coordination.Session]bool
	// abandoned sessions restore in vain (their client dials no more)
	// until their restore window ends; Stop ends those still trying.
	abandoned []*coordination.Session
	errs      map[string]int
	opened    int
}

// stall is a time in which the process did not run (the probe overslept).
type stall struct{ from, to time.Duration }

type sessionPoll struct {
	call, ret time.Duration
	ids       map[uint64]bool
}

// NewCoordWorkload prepares the workload; Start runs it.
func NewCoordWorkload(cfg CoordConfig, addrs string, h *History) *CoordWorkload {
	if cfg.Sessions == 0 {
		cfg.Sessions = 12
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Second
	}
	if cfg.AbandonEvery == 0 {
		cfg.AbandonEvery = 8 * time.Second
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = 100 * time.Millisecond
	}
	return &CoordWorkload{cfg: cfg, addrs: addrs, h: h, errs: map[string]int{}, live: map[*coordination.Session]bool{},
		obsStop: make(chan struct{}), obsDone: make(chan struct{}), probeDone: make(chan struct{})}
}

// Start creates the node and the semaphores (through the observer's path,
// waiting up to ctx for a leader), then starts the observer and the
// sessions.
func (w *CoordWorkload) Start(ctx context.Context) error {
	obs, err := coordination.Dial(w.addrs, coordination.WithDialer(w.cfg.Observer), coordination.WithDialTimeout(2*time.Second)) //nolint:staticcheck // a Ticketing client of its own, with its own dialer
	if err != nil {
		return err
	}
	w.obs = obs
	retry := func(what string, f func(ctx context.Context) error) error {
		for {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := f(cctx)
			cancel()
			if err == nil || errors.Is(err, coordination.ErrAlreadyExists) {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			time.Sleep(100 * time.Millisecond) // no leader yet, say; bounded by ctx
		}
	}
	if err := retry("create node "+CoordNode, func(ctx context.Context) error {
		return obs.CreateNode(ctx, CoordNode, coordination.NodeConfig{SessionGracePeriod: w.cfg.Grace})
	}); err != nil {
		return err
	}
	var setup *coordination.Session
	if err := retry("setup session", func(ctx context.Context) error {
		var err error
		setup, err = obs.Session(ctx, CoordNode, coordination.WithTimeout(w.cfg.Timeout))
		return err
	}); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = setup.Close(cctx) // the node's semaphores are persistent
		cancel()
	}()
	for _, sem := range []struct {
		name  string
		limit uint64
	}{{coordLimit1, 1}, {coordLimit3, 3}} {
		if err := retry("create semaphore "+sem.name, func(ctx context.Context) error {
			return setup.CreateSemaphore(ctx, sem.name, sem.limit, nil)
		}); err != nil {
			return err
		}
	}
	w.nextAbandon.Store(int64(w.h.Now() + w.cfg.AbandonEvery))
	go w.observe()
	go w.probe()
	for i := 0; i < w.cfg.Sessions; i++ {
		w.wg.Add(1)
		go w.run(i, rand.New(rand.NewPCG(w.cfg.Seed, 0xc00d+uint64(i))))
	}
	return nil
}

// Stop ends the sessions' work, closes the sessions still working, waits
// (up to the expiry bound) until the server has let go of every session
// the workload gave up, and stops the observer.
func (w *CoordWorkload) Stop() {
	w.stop.Store(true)
	w.wg.Wait()
	w.mu.Lock()
	live := make([]*coordination.Session, 0, len(w.live))
	for s := range w.live {
		live = append(live, s)
	}
	w.mu.Unlock()
	for _, s := range live {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.Close(ctx) // one that cannot stop expires on the server instead
		cancel()
	}
	deadline := time.Now().Add(w.cfg.ExpiryBound() + 3*time.Second)
	for time.Now().Before(deadline) && !w.allGone() {
		time.Sleep(200 * time.Millisecond) // polling the observer's listings, with a deadline
	}
	close(w.obsStop)
	<-w.obsDone
	<-w.probeDone
	w.mu.Lock()
	clients, abandoned := w.clients, w.abandoned
	w.mu.Unlock()
	for _, s := range abandoned {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.Close(ctx) // nothing to send on: it ends on the client
		cancel()
	}
	for _, c := range clients {
		_ = c.Close()
	}
	_ = w.obs.Close()
}

// History returns what the workload recorded, with the observer's
// listings resolved into each given-up session's last and first-gone times.
func (w *CoordWorkload) History() ([]CoordHold, []CoordCall, []CoordExpiry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	exps := make([]CoordExpiry, 0, len(w.gaveUp))
	for _, e := range w.gaveUp {
		exps = append(exps, w.resolveLocked(e))
	}
	calls := append([]CoordCall(nil), w.calls...)
	for i := range calls {
		calls[i].Stalled = w.stalledLocked(max(calls[i].Deadline, calls[i].Ended), calls[i].Return)
	}
	return append([]CoordHold(nil), w.holds...), calls, exps
}

// stalledLocked is how much of [from, to] the probe saw the process not
// running.
func (w *CoordWorkload) stalledLocked(from, to time.Duration) time.Duration {
	var d time.Duration
	i := sort.Search(len(w.stalls), func(i int) bool { return w.stalls[i].to > from })
	for ; i < len(w.stalls) && w.stalls[i].from < to; i++ {
		d += min(w.stalls[i].to, to) - max(w.stalls[i].from, from)
	}
	return d
}

// probe sleeps 2 ms at a time and records every oversleep beyond 1 ms as
// a stall: a time in which the machine gave this process no CPU (2 busy
// cores), which delays any goroutine and is not the SDK's doing.
func (w *CoordWorkload) probe() {
	defer close(w.probeDone)
	const nap = 2 * time.Millisecond
	for {
		select {
		case <-w.obsStop:
			return
		default:
		}
		t0 := w.h.Now()
		time.Sleep(nap)
		if t1 := w.h.Now(); t1-t0 > nap+time.Millisecond {
			w.mu.Lock()
			w.stalls = append(w.stalls, stall{from: t0 + nap, to: t1})
			w.mu.Unlock()
		}
	}
}

func (w *CoordWorkload) resolveLocked(e CoordExpiry) CoordExpiry {
	e.LastSeen, e.Gone = e.Detached, -1
	for _, p := range w.polls {
		if p.ids[e.Session] && p.call > e.LastSeen {
			e.LastSeen = p.call
		}
	}
	for _, p := range w.polls {
		if p.call > e.LastSeen && !p.ids[e.Session] {
			e.Gone = p.ret
			break
		}
	}
	return e
}

func (w *CoordWorkload) allGone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.gaveUp {
		if w.resolveLocked(e).Gone < 0 {
			return false
		}
	}
	return true
}

// Errors are the errors the sessions saw, by text, with counts.
func (w *CoordWorkload) Errors() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.errs))
	for k, v := range w.errs {
		out[k] = v
	}
	return out
}

// Opened is how many sessions the workload started.
func (w *CoordWorkload) Opened() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.opened
}

func (w *CoordWorkload) noteErr(err error) {
	w.mu.Lock()
	w.errs[errShape.ReplaceAllString(err.Error(), "#")]++
	w.mu.Unlock()
}

// callContext is a call's context: it ends d after it was made, by a
// timer of its own that notes the moment it ends the context (before
// closing Done), so that a call's lag is counted from the moment its
// context really ended: a busy machine (2 cores, other work) can fire a
// timer well after its deadline, and that delay is not the SDK's. The lag
// after the deadline itself is reported too.
type callContext struct {
	context.Context // a cancel context: Done, Value, and propagation to children
	cancel          context.CancelCauseFunc
	deadline        time.Time
	timer           *time.Timer
	ended           atomic.Int64 // history time the timer ended it; 0: not (yet)
}

func (w *CoordWorkload) callContext(d time.Duration) *callContext {
	cc := &callContext{deadline: time.Now().Add(d)}
	cc.Context, cc.cancel = context.WithCancelCause(context.Background())
	cc.timer = time.AfterFunc(d, func() {
		cc.ended.Store(int64(w.h.Now()))
		cc.cancel(context.DeadlineExceeded)
	})
	return cc
}

// Deadline is the context's deadline (the SDK bounds what it derives by it).
func (cc *callContext) Deadline() (time.Time, bool) { return cc.deadline, true }

// Err is context.DeadlineExceeded once the timer ended the context, as
// for a context.WithTimeout.
func (cc *callContext) Err() error {
	if cc.Context.Err() == nil {
		return nil
	}
	return context.Cause(cc.Context)
}

// noteCall records a call made with cc that returned at ret, and ends cc.
func (w *CoordWorkload) noteCall(op string, cc *callContext, ret time.Duration, err error) {
	dl, _ := cc.Deadline()
	c := CoordCall{Op: op, Deadline: w.h.Since(dl), Ended: time.Duration(cc.ended.Load()), Return: ret}
	cc.timer.Stop()
	cc.cancel(context.Canceled)
	if err != nil {
		c.Err = err.Error()
	}
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.mu.Unlock()
}

func (w *CoordWorkload) observe() {
	defer close(w.obsDone)
	for {
		select {
		case <-w.obsStop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		call := w.h.Now()
		list, err := w.obs.ListSessions(ctx, CoordNode)
		ret := w.h.Now()
		cancel()
		if err != nil {
			continue // no leader now: the next listing tells
		}
		ids := make(map[uint64]bool, len(list))
		for _, s := range list {
			ids[s.ID] = true
		}
		w.mu.Lock()
		w.polls = append(w.polls, sessionPoll{call: call, ret: ret, ids: ids})
		w.mu.Unlock()
	}
}

// slot is one working session with what it needs to be abandoned.
type slot struct {
	c        *coordination.Client
	s        *coordination.Session
	f        *freezer
	e        *coordination.Election
	detached atomic.Int64 // history time of its last change to DETACHED
	gone     bool         // abandoned
}

func (w *CoordWorkload) run(i int, rng *rand.Rand) {
	defer w.wg.Done()
	for !w.stop.Load() {
		sl := w.open(i)
		if sl == nil {
			time.Sleep(time.Duration(100+rng.IntN(100)) * time.Millisecond) // no leader reachable now
			continue
		}
		for !w.stop.Load() && sl.s.Context().Err() == nil && !sl.gone {
			switch r := rng.IntN(100); {
			case r < 45:
				w.hold(sl, coordLimit1, 1, rng)
			case r < 80:
				w.hold(sl, coordLimit3, uint64(1+rng.IntN(2)), rng)
			default:
				w.lead(sl, rng)
			}
		}
		w.mu.Lock()
		delete(w.live, sl.s)
		w.mu.Unlock()
		if err := context.Cause(sl.s.Context()); !sl.gone && errors.Is(err, coordination.ErrSessionExpired) {
			// From its last change to DETACHED; one that ended without
			// ever being detached (told by the server), from now.
			det := time.Duration(sl.detached.Load())
			if det == 0 {
				det = w.h.Now()
			}
			w.mu.Lock()
			w.gaveUp = append(w.gaveUp, CoordExpiry{Session: sl.s.ID(), Detached: det})
			w.mu.Unlock()
		}
		if sl.gone || sl.s.Context().Err() != nil {
			continue
		}
		ctx := w.callContext(2 * time.Second)
		err := sl.s.Close(ctx)
		w.noteCall("close session", ctx, w.h.Now(), err)
	}
}

// open starts a session on a client of its own (so that abandoning it
// freezes nothing else).
func (w *CoordWorkload) open(i int) *slot {
	f := &freezer{base: w.cfg.Dialers[i%len(w.cfg.Dialers)]}
	c, err := coordination.Dial(w.addrs, coordination.WithDialer(f.dial), coordination.WithDialTimeout(2*time.Second)) //nolint:staticcheck // a Ticketing client of its own, with its own dialer
	if err != nil {
		w.noteErr(err)
		return nil
	}
	sl := &slot{c: c, f: f}
	w.mu.Lock()
	w.clients = append(w.clients, c)
	w.mu.Unlock()
	ctx := w.callContext(3 * time.Second)
	s, err := c.Session(ctx, CoordNode, coordination.WithTimeout(w.cfg.Timeout), coordination.WithDescription(fmt.Sprintf("nemesis slot %d", i)),
		coordination.WithStateCallback(func(st coordination.State) {
			if st == coordination.Detached {
				sl.detached.Store(int64(w.h.Now()))
			}
		}))
	w.noteCall("start session", ctx, w.h.Now(), err)
	if err != nil {
		w.noteErr(err)
		return nil
	}
	sl.s, sl.e = s, s.Election(coordElection)
	w.mu.Lock()
	w.live[s] = true
	w.opened++
	w.mu.Unlock()
	return sl
}

// randDur is uniform in [lo, hi).
func randDur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// claimAbandon reports whether this grant is the one to abandon.
func (w *CoordWorkload) claimAbandon(rng *rand.Rand) bool {
	next := w.nextAbandon.Load()
	if int64(w.h.Now()) < next {
		return false
	}
	gap := randDur(rng, w.cfg.AbandonEvery/2, w.cfg.AbandonEvery*3/2)
	return w.nextAbandon.CompareAndSwap(next, int64(w.h.Now()+gap))
}

// keep holds a grant until hold has passed (ending it with release) or its
// context ends, and records it; or abandons the session while holding.
func (w *CoordWorkload) keep(sl *slot, h CoordHold, hctx context.Context, hold time.Duration, release func(context.Context) error, rng *rand.Rand) {
	if w.claimAbandon(rng) {
		sl.gone = true
		sl.f.freeze()
		at := w.h.Now()
		w.mu.Lock()
		delete(w.live, sl.s)
		w.abandoned = append(w.abandoned, sl.s)
		w.gaveUp = append(w.gaveUp, CoordExpiry{Session: sl.s.ID(), Detached: at, Abandoned: true})
		w.mu.Unlock()
		// Nothing answers the session any more: its hold must end at the
		// client's deadline. The limit check sees it if it ends too late;
		// one that never ends is cut off here, well after any bound.
		select {
		case <-hctx.Done():
			h.To, h.Why = w.h.Now(), "abandoned: "+context.Cause(hctx).Error()
		case <-time.After(w.cfg.Timeout + w.cfg.Grace + 5*time.Second):
			h.To, h.Why = w.h.Now(), "abandoned: the hold's context never ended"
			w.noteErr(fmt.Errorf("an abandoned session's hold on %s did not end within its timeout and grace", h.Sem))
		}
		w.addHold(h)
		return
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
		h.To, h.Why = w.h.Now(), "released"
		ctx := w.callContext(2 * time.Second)
		err := release(ctx)
		w.noteCall("release "+h.Sem, ctx, w.h.Now(), err)
		if err != nil && !errors.Is(err, coordination.ErrNotLeading) {
			w.noteErr(err)
		}
	case <-hctx.Done():
		h.To, h.Why = w.h.Now(), context.Cause(hctx).Error()
	}
	w.addHold(h)
}

func (w *CoordWorkload) addHold(h CoordHold) {
	w.mu.Lock()
	w.holds = append(w.holds, h)
	w.mu.Unlock()
}

func (w *CoordWorkload) hold(sl *slot, sem string, count uint64, rng *rand.Rand) {
	ctx := w.callContext(randDur(rng, 300*time.Millisecond, 3*time.Second))
	call := w.h.Now()
	l, err := sl.s.AcquireSemaphore(ctx, sem, coordination.Count(count))
	ret := w.h.Now()
	ctxEnded := ctx.Err() != nil
	w.noteCall("acquire "+sem, ctx, ret, err)
	if err != nil {
		if !ctxEnded {
			w.noteErr(err)
			time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond) // restoring, say: do not spin
		}
		return
	}
	hold := randDur(rng, 20*time.Millisecond, 400*time.Millisecond)
	if rng.IntN(10) == 0 {
		hold = randDur(rng, time.Second, 3*time.Second) // across a fault, sometimes
	}
	w.keep(sl, CoordHold{Session: sl.s.ID(), Sem: sem, Count: l.Count(), Token: l.Token(), Call: call, From: ret}, l.Context(), hold, l.Release, rng)
}

func (w *CoordWorkload) lead(sl *slot, rng *rand.Rand) {
	ctx := w.callContext(randDur(rng, 300*time.Millisecond, 3*time.Second))
	call := w.h.Now()
	ld, err := sl.e.Campaign(ctx, []byte(fmt.Sprintf("session %d", sl.s.ID())))
	ret := w.h.Now()
	ctxEnded := ctx.Err() != nil
	w.noteCall("campaign", ctx, ret, err)
	if err != nil {
		if !ctxEnded {
			w.noteErr(err)
			time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
		}
		return
	}
	w.keep(sl, CoordHold{Session: sl.s.ID(), Sem: coordElectionSem, Election: true, Count: 1, Token: ld.Token, Call: call, From: ret},
		ld.Context, randDur(rng, 100*time.Millisecond, time.Second), sl.e.Resign, rng)
}

// Check runs the coordination checks over what was recorded.
func (w *CoordWorkload) Check() CoordCheck {
	holds, calls, exps := w.History()
	sort.Slice(exps, func(i, j int) bool { return exps[i].Detached < exps[j].Detached })
	return CheckCoord(holds, calls, exps, CoordLimits{
		Limits:      map[string]uint64{coordLimit1: 1, coordLimit3: 3, coordElectionSem: 1},
		ExpiryBound: w.cfg.ExpiryBound(),
		MaxLag:      w.cfg.MaxLag,
	})
}

// errAbandoned: an abandoned session's client dials no more.
var errAbandoned = errors.New("nemesis: this client was abandoned")

// freezer dials through base and can freeze every connection it made: a
// frozen connection stays open but carries nothing either way (writes are
// dropped, reads deliver nothing until the connection ends), and no new
// one is dialled.
type freezer struct {
	base DialFunc

	mu     sync.Mutex
	frozen bool
	conns  []*frozenConn
}

func (f *freezer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	frozen := f.frozen
	f.mu.Unlock()
	if frozen {
		return nil, errAbandoned
	}
	dial := f.base
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	c, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fc := &frozenConn{Conn: c}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		_ = c.Close()
		return nil, errAbandoned
	}
	f.conns = append(f.conns, fc)
	return fc, nil
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
	for _, c := range f.conns {
		c.frozen.Store(true)
	}
}

type frozenConn struct {
	net.Conn
	frozen atomic.Bool
}

func (c *frozenConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.frozen.Load() {
			return n, err
		}
	}
}

func (c *frozenConn) Write(b []byte) (int, error) {
	if c.frozen.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}
