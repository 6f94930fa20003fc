package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Client is the connection layer of one Ticketing client: it keeps one
// connection to the cluster leader, reconnecting in the background (the
// order, the backoff and what a refusal means are in package ticketing's
// documentation, "Connections"), and dials connections of their own for
// coordination sessions on servers that carry one session per connection.
// It is safe for concurrent use.
type Client struct {
	cfg   *Config
	addrs []string
	front Hooks // nil: the front sends no ticket acquires

	ctx    context.Context // cancelled at teardown
	cancel context.CancelFunc
	wg     sync.WaitGroup // manager, dialers, connection goroutines

	mu       sync.Mutex
	cur      *Conn
	changed  chan struct{}          // closed and replaced on every state change
	closed   bool                   // closing began: no new calls
	closing  chan struct{}          // closed when closing begins
	torn     bool                   // teardown started: no connections at all
	refusals map[string]*helloError // listed address -> its latest persistent hello refusal
	lastErr  error                  // why the last connection attempt or connection failed
	lastGood string                 // the last server that accepted a session: dialed first
	lastDead string                 // the server whose session just died (silent or dropped): dialed last
	served   map[string]bool        // addresses that accepted a session: they speak the protocol

	connWaiters atomic.Int32 // tests: calls waiting for a connection

	// Coordination: the connections of sessions that have one of their
	// own (a server without shared sessions), ended at teardown, and the
	// sessions' handlers of the shared connection's notifications.
	dedicated  map[*Conn]struct{}
	coordSubs  map[uint64]func(*Conn, wire.Frame)
	coordSubID uint64
}

// Hooks are what the front that sends ticket acquires is told by its
// connections (on their reader goroutines; neither may block).
type Hooks interface {
	// LateGrant: a G arrived for an acquire whose caller left; the front
	// must release that exact token.
	LateGrant(key string, token uint64)
	// Orphaned: an acquire was sent on a connection that ended before its
	// final answer; a grant it may have received can only be ended by its
	// owner (U) from now on, until until.
	Orphaned(key string, owner wire.Owner, until time.Time)
}

// New returns a client for addrs (see ParseAddrs) that connects in the
// background until Teardown. front may be nil.
func New(addrs []string, cfg *Config, front Hooks) *Client {
	t := &Client{cfg: cfg, addrs: addrs, front: front, changed: make(chan struct{}), closing: make(chan struct{}),
		refusals: make(map[string]*helloError), served: make(map[string]bool), dedicated: make(map[*Conn]struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(1)
	go t.run()
	return t
}

// Logger is the client's logger.
func (t *Client) Logger() *slog.Logger { return t.cfg.Logger }

// Config is the client's configuration.
func (t *Client) Config() *Config { return t.cfg }

// BeginClose refuses new calls from now on (Leader returns ErrClosed except
// to draining callers) and closes Closing. It returns false when closing had
// already begun.
func (t *Client) BeginClose() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.closed = true
	close(t.closing)
	t.broadcastLocked()
	return true
}

// Closing is closed when closing begins: acquires waiting for an in-flight
// slot give up (nothing sent).
func (t *Client) Closing() <-chan struct{} { return t.closing }

// IsClosed reports whether closing has begun.
func (t *Client) IsClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Teardown ends every connection (requests still pending get a closed
// failure) and waits for the client's goroutines. It begins closing if that
// had not begun; calling it again only waits.
func (t *Client) Teardown() {
	t.BeginClose()
	t.mu.Lock()
	t.torn = true
	c := t.cur
	own := make([]*Conn, 0, len(t.dedicated))
	for dc := range t.dedicated {
		own = append(own, dc)
	}
	t.broadcastLocked()
	t.mu.Unlock()
	t.cancel()
	if c != nil {
		c.End()
	}
	for _, dc := range own {
		dc.End()
	}
	t.wg.Wait()
}

// Wait waits until the client's goroutines have ended (after Teardown).
func (t *Client) Wait() { t.wg.Wait() }

// Close is Teardown (the coordination SDK closes a client it made itself).
func (t *Client) Close() error {
	t.Teardown()
	return nil
}

// Current is the connection to the leader, nil while there is none.
func (t *Client) Current() *Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Changed is closed at the client's next state change (a connection
// attempt's outcome, a new session, closing).
func (t *Client) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Wake wakes everybody waiting for a state change: the front's own state
// changed (a Close drain waits on it too).
func (t *Client) Wake() {
	t.mu.Lock()
	t.broadcastLocked()
	t.mu.Unlock()
}

// LastErr is why the last connection attempt or connection failed.
func (t *Client) LastErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastErr
}

// RefusedByAll returns the refusal when every listed address refused the
// hello for the same reason, nil otherwise.
func (t *Client) RefusedByAll() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusedByAll()
}

// NoConnection is the error of a wait for a connection that ctxErr ended.
func (t *Client) NoConnection(ctxErr error) error {
	return WaitFailed(ctxErr, t.LastErr())
}

// WaitFailed is a wait for a connection that ctxErr ended; last is what the
// last attempt ran into (nil: nothing yet).
func WaitFailed(ctxErr, last error) *WaitError { return &WaitError{ctx: ctxErr, last: last} }

// Addrs are the listed addresses, in their order.
func (t *Client) Addrs() []string { return t.addrs }

// ConnWaiters is how many calls wait for a connection (for tests).
func (t *Client) ConnWaiters() int32 { return t.connWaiters.Load() }

// The connection hooks: what a connection tells its client.

func (t *Client) lateGrant(key string, token uint64) {
	if t.front != nil {
		t.front.LateGrant(key, token)
	}
}

func (t *Client) orphaned(key string, owner wire.Owner, until time.Time) {
	if t.front != nil {
		t.front.Orphaned(key, owner, until)
	}
}

func (t *Client) closingCh() <-chan struct{} { return t.closing }

// broadcastLocked wakes everybody waiting for a state change.
func (t *Client) broadcastLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// MaxFollows is how many leader hints (M frames naming the leader) the
// broker follows in a row before it backs off: enough to walk the whole list
// once plus a leader change on the way, never a storm between two servers
// that each name the other.
func (t *Client) MaxFollows() int { return len(t.addrs) + 2 }

// StableSession is how long a session must last for the backoff to start
// again from its base.
const StableSession = time.Second

// dialing is one dial loop's state across its rounds.
type dialing struct {
	failures int // failed rounds since the last session that lasted: the backoff exponent
	follows  int // leader hints followed since the last backoff
	failed   logLimiter
}

func newDialing() *dialing { return &dialing{failed: logLimiter{every: time.Second}} }

// establish is the one dial loop, of the shared connection and of a
// session's own: rounds of connection attempts (the first led by hint)
// with the backoff between failed rounds, until one gives a session. stop,
// asked before every round and after every failed one, ends the loop with
// its error; so do the end of ctx (a *WaitError) and the client's teardown
// (ErrClosed) while it backs off.
func (t *Client) establish(ctx context.Context, hint string, d *dialing, hooks connHooks, stop func() error) (*Conn, string, error) {
	for {
		if err := stop(); err != nil {
			return nil, "", err
		}
		c, addr := t.dialRound(ctx, t.dialOrder(hint), &d.follows, &d.failed, hooks)
		if c != nil {
			return c, addr, nil
		}
		hint = ""
		if err := stop(); err != nil {
			return nil, "", err
		}
		d.failures++
		d.follows = 0
		if err := t.pause(ctx, t.backoff(d.failures)); err != nil {
			return nil, "", err
		}
	}
}

// tornDown is the shared connection's stop: only the client's teardown
// ends its dial loop.
func (t *Client) tornDown() error {
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// run is the connection manager of the shared connection.
func (t *Client) run() {
	defer t.wg.Done()
	d := newDialing()
	hint := "" // the leader named by the M that ended the last session
	ended := logLimiter{every: time.Second}
	connected := logLimiter{every: time.Second}
	for {
		c, addr, err := t.establish(t.ctx, hint, d, t, t.tornDown)
		if err != nil {
			return
		}
		hint = ""
		t.mu.Lock()
		if t.torn {
			t.mu.Unlock()
			c.End()
			return
		}
		t.cur = c
		t.lastGood = addr
		t.lastDead = ""
		t.served[addr] = true
		delete(t.refusals, addr)
		t.lastErr = nil
		t.broadcastLocked()
		t.mu.Unlock()
		connected.log(t.cfg.Logger, slog.LevelDebug, "ticketing: connected", "addr", addr, "node", c.nodeID)

		<-c.done
		f := c.failureCause()
		t.mu.Lock()
		if t.cur == c {
			t.cur = nil
		}
		if !f.Closed() {
			t.lastErr = errors.New(f.What())
		}
		if f.kind == failSilent || f.kind == failDrop {
			// A paused or cut-off server still accepts TCP (the kernel
			// answers), so dialing it first would cost a stagger of the
			// failover; try it after the others.
			t.lastDead = addr
		}
		t.broadcastLocked()
		t.mu.Unlock()
		if t.ctx.Err() != nil {
			return
		}
		ended.log(t.cfg.Logger, slog.LevelInfo, "ticketing: connection ended", "addr", addr, "why", f.What(), "err", f.Cause)
		if time.Since(c.born) > StableSession {
			d.failures, d.follows = 0, 0
		}
		if f.kind == failNotLeader && f.hint != "" && f.hint != addr && d.follows < t.MaxFollows() {
			d.follows++
			hint = f.hint
			continue
		}
		d.failures++
		d.follows = 0
		if t.pause(t.ctx, t.backoff(d.failures)) != nil {
			return
		}
	}
}

// dialOrder is the order of one round of connection attempts: the leader
// hint, then the last server that accepted a session, then the listed
// addresses in their order; the server whose session just died of silence
// or a dropped connection goes last unless it is the hint.
func (t *Client) dialOrder(hint string) []string {
	t.mu.Lock()
	last, dead := t.lastGood, t.lastDead
	t.mu.Unlock()
	out := make([]string, 0, len(t.addrs)+2)
	seen := make(map[string]bool, len(t.addrs)+2)
	if dead != hint {
		seen[dead] = true
	}
	for _, a := range append([]string{hint, last}, t.addrs...) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if dead != "" && dead != hint {
		out = append(out, dead)
	}
	return out
}

// dialRound runs one round of connection attempts over order: the
// first at once, the next one when every running attempt has failed or
// after the dial stagger while one is still running (so a stuck address
// costs a stagger, not a dial timeout), and an address named by a hello's M
// right after the attempt that named it. It returns the first session
// established (later ones are closed) and its address, or nil when every
// attempt failed. parent (and the client's life) bounds it; hooks are the
// new connection's.
func (t *Client) dialRound(parent context.Context, order []string, follows *int, failed *logLimiter, hooks connHooks) (*Conn, string) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stopClient := context.AfterFunc(t.ctx, cancel)
	defer stopClient()
	done := make(chan struct{})
	defer close(done)
	type result struct {
		addr string
		c    *Conn
		err  error
	}
	results := make(chan result)
	running := map[string]bool{}
	next := 0
	launch := func() {
		addr := order[next]
		next++
		running[addr] = true
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			c, err := dial(ctx, addr, t.cfg, 0, hooks, &t.wg)
			select {
			case results <- result{addr, c, err}:
			case <-done: // another attempt won
				if c != nil {
					c.fail(&Ended{kind: failClosed, addr: addr})
				}
			}
		}()
	}
	stagger := time.NewTimer(t.cfg.DialStagger)
	defer stagger.Stop()
	launch()
	for {
		select {
		case r := <-results:
			delete(running, r.addr)
			if r.err == nil {
				return r.c, r.addr
			}
			if ctx.Err() != nil {
				return nil, ""
			}
			t.attemptFailed(r.addr, r.err)
			failed.log(t.cfg.Logger, slog.LevelDebug, "ticketing: connection attempt failed", "addr", r.addr, "err", r.err)
			var he *helloError
			if errors.As(r.err, &he) && he.hint != "" && he.hint != r.addr && !running[he.hint] && *follows < t.MaxFollows() {
				*follows++
				order = slices.Insert(order, next, he.hint)
			}
			if next < len(order) {
				launch()
				stagger.Reset(t.cfg.DialStagger)
			} else if len(running) == 0 {
				return nil, ""
			}
		case <-stagger.C:
			if next < len(order) {
				launch()
				stagger.Reset(t.cfg.DialStagger)
			}
		case <-ctx.Done():
			return nil, ""
		}
	}
}

// attemptFailed records a failed connection attempt: a persistent refusal
// by a listed address is kept for that address (see refusedByAll); any
// other failure clears it, and so does a silent close of the hello by an
// address that has served a session before.
func (t *Client) attemptFailed(addr string, err error) {
	var he *helloError
	errors.As(err, &he)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastErr = err
	// A server that has served a session and now closes a hello without a
	// word stopped or crashed mid-hello: a failed attempt, not a wrong port.
	stopped := he != nil && he.reason == closedWithoutAnswer && t.served[addr]
	if he != nil && he.rejected && !stopped {
		t.refusals[addr] = he
	} else {
		delete(t.refusals, addr)
	}
	t.broadcastLocked()
}

// refusedByAll returns the refusal when every listed address refused the
// hello for the same reason; nil otherwise (a refusal by one node only moves
// the broker on, and calls wait for a connection). t.mu is held.
func (t *Client) refusedByAll() error {
	first := t.refusals[t.addrs[0]]
	if first == nil {
		return nil
	}
	why := refusalReason(first)
	for _, a := range t.addrs[1:] {
		he := t.refusals[a]
		if he == nil || refusalReason(he) != why {
			return nil
		}
	}
	return first.err
}

// wrongClusterLocked returns a listed server's refusal as a server of
// another cluster, nil if there is none. t.mu is held.
func (t *Client) wrongClusterLocked() error {
	for _, a := range t.addrs {
		if he := t.refusals[a]; he != nil && errors.Is(he.err, ErrWrongCluster) {
			return he.err
		}
	}
	return nil
}

// refusalReason names the kind of a hello refusal, to tell whether several
// servers refused for the same reason.
func refusalReason(he *helloError) string {
	if he.reason != "" {
		return he.reason
	}
	err := he.err
	var se *ServerError
	var ce *CapacityError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return "unauthenticated"
	case errors.As(err, &se):
		return fmt.Sprintf("error code %d", se.Code)
	case errors.As(err, &ce):
		return fmt.Sprintf("capacity reason %d", ce.Reason)
	case errors.As(err, &cv):
		return "server certificate"
	}
	return "refused: " + DetailOf(err)
}

// logLimiter lets through at most one line per period and counts the rest,
// so a flapping connection cannot flood the log.
type logLimiter struct {
	every      time.Duration
	next       time.Time
	suppressed int
}

func (l *logLimiter) log(lg *slog.Logger, level slog.Level, msg string, args ...any) {
	now := time.Now()
	if now.Before(l.next) {
		l.suppressed++
		return
	}
	l.next = now.Add(l.every)
	if l.suppressed > 0 {
		args = append(args, "suppressed", l.suppressed)
		l.suppressed = 0
	}
	lg.Log(context.Background(), level, msg, args...)
}

// backoff is an exponential delay with jitter: uniform in [d/2, d] where d
// doubles from the base up to the cap.
func (t *Client) backoff(n int) time.Duration {
	d := t.cfg.BackoffBase
	for i := 1; i < n && d < t.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, t.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// pause waits d between failed rounds: nil, ErrClosed when the client is
// torn down meanwhile, or a *WaitError when ctx ends first.
func (t *Client) pause(ctx context.Context, d time.Duration) error {
	if h := t.cfg.OnBackoff; h != nil {
		h(d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-t.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return t.NoConnection(ctx.Err())
	}
}

// Leader returns a live connection to the leader, waiting for one while ctx
// allows. draining lets background releases run while Close drains them.
// Its errors are ErrClosed, a *WaitError, or a refusal every listed server
// gave; ConnectError turns them into an operation's error.
func (t *Client) Leader(ctx context.Context, draining bool) (*Conn, error) {
	for {
		t.mu.Lock()
		if t.torn || (t.closed && !draining) {
			t.mu.Unlock()
			return nil, ErrClosed
		}
		if c := t.cur; c != nil && !c.dead() {
			t.mu.Unlock()
			return c, nil
		}
		if err := t.refusedByAll(); err != nil {
			t.mu.Unlock()
			return nil, err
		}
		ch := t.changed
		t.mu.Unlock()
		t.connWaiters.Add(1)
		select {
		case <-ch:
			t.connWaiters.Add(-1)
		case <-ctx.Done():
			t.connWaiters.Add(-1)
			t.mu.Lock()
			last := t.lastErr
			if wc := t.wrongClusterLocked(); wc != nil {
				// No server of the pinned cluster answered: say that one
				// of another cluster did, and was refused.
				last = wc
			}
			t.mu.Unlock()
			return nil, &WaitError{ctx: ctx.Err(), last: last}
		}
	}
}

// AwaitChange waits for the broker's next state change (a connection
// attempt's outcome, a new session); false when ctx ended first.
func (t *Client) AwaitChange(ctx context.Context) bool {
	t.mu.Lock()
	ch := t.changed
	t.mu.Unlock()
	t.connWaiters.Add(1)
	defer t.connWaiters.Add(-1)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// WaitError is a context that ended while no connection was available.
type WaitError struct {
	ctx  error
	last error
}

func (e *WaitError) Error() string {
	if e.last != nil {
		return fmt.Sprintf("no connection to the leader yet (last attempt: %v): %v", e.last, e.ctx)
	}
	return fmt.Sprintf("no connection to the leader yet: %v", e.ctx)
}

func (e *WaitError) Unwrap() []error { return []error{e.ctx, ErrUnavailable} }

// ConnectError turns a Leader failure into the error an operation returns;
// nothing was sent.
func ConnectError(op, key string, hasKey bool, err error) error {
	notSent := "not sent: "
	if op == "connect" {
		notSent = ""
	}
	if err == ErrClosed {
		if op == "connect" {
			return NewOpError(op, key, hasKey, nil, "the broker is closed", ErrClosed)
		}
		return NewOpError(op, key, hasKey, nil, "the broker is closed; nothing was sent", ErrClosed)
	}
	var we *WaitError
	if errors.As(err, &we) {
		kinds := []error{we.ctx, ErrUnavailable}
		if errors.Is(we.last, ErrWrongCluster) {
			kinds = append(kinds, we.last)
		}
		return NewOpError(op, key, hasKey, nil, notSent+we.Error(), kinds...)
	}
	kinds := []error{}
	switch {
	case errors.Is(err, ErrUnauthenticated):
		kinds = append(kinds, ErrUnauthenticated)
	case errors.Is(err, ErrWrongCluster):
		kinds = append(kinds, err, ErrUnavailable)
	case errors.Is(err, ErrCapacity):
		kinds = append(kinds, ErrCapacity)
	default:
		kinds = append(kinds, ErrUnavailable)
	}
	e := NewOpError(op, key, hasKey, err, notSent+"the server refused the connection ("+DetailOf(err)+"); the broker keeps retrying in the background", kinds...)
	e.Hide = true
	return e
}
