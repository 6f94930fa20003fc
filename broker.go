package ticketing

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

	"github.com/ticketing-io/ticketing/internal/coordlink"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Broker is the client: one per process, safe for concurrent use by any
// number of goroutines. It keeps one connection to the cluster leader and
// multiplexes every request over it, reconnecting in the background (see
// "Connections" in the package documentation for the order, the backoff and
// what a refusal means).
type Broker struct {
	cfg   *config
	addrs []string

	ctx    context.Context // cancelled at teardown
	cancel context.CancelFunc
	wg     sync.WaitGroup // manager, dialers, background releases, connection goroutines

	mu       sync.Mutex
	cur      *conn
	changed  chan struct{}          // closed and replaced on every state change
	closed   bool                   // Close was called: no new calls
	closing  chan struct{}          // closed when Close is called
	torn     bool                   // teardown started: no connections at all
	refusals map[string]*helloError // listed address -> its latest persistent hello refusal
	lastErr  error                  // why the last connection attempt or connection failed
	lastGood string                 // the last server that accepted a session: dialed first
	lastDead string                 // the server whose session just died (silent or dropped): dialed last
	served   map[string]bool        // addresses that accepted a session: they speak the protocol
	acquires int                    // Acquire calls running: Close's drain waits for them

	connWaiters atomic.Int32 // tests: calls waiting for a connection
	drainWaits  atomic.Int32 // tests: Close's drain waiting for something to finish

	rel *releaser

	// Coordination: the connections of sessions that have one of their
	// own (a server without shared sessions), ended at teardown, and the
	// sessions' handlers of the shared connection's notifications.
	dedicated  map[*conn]struct{}
	coordSubs  map[uint64]func(coordlink.Conn, wire.Frame)
	coordSubID uint64
}

// Connect returns a Broker for the comma-separated list of server addresses
// ("host:port,host:port"; a host without a port means port 5225). It returns
// at once and connects in the background; use WaitReady to wait for the
// connection. It fails only for a bad configuration: an empty or malformed
// address list, an unreadable CA file or client certificate, a token longer
// than 1024 bytes.
func Connect(addrs string, opts ...Option) (*Broker, error) {
	list, err := parseAddrs(addrs)
	if err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, addrs: list, changed: make(chan struct{}), closing: make(chan struct{}),
		refusals: make(map[string]*helloError), served: make(map[string]bool), dedicated: make(map[*conn]struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.rel = newReleaser(b)
	b.wg.Add(1)
	go b.run()
	return b, nil
}

// broadcastLocked wakes everybody waiting for a state change.
func (b *Broker) broadcastLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// maxFollows is how many leader hints (M frames naming the leader) the
// broker follows in a row before it backs off: enough to walk the whole list
// once plus a leader change on the way, never a storm between two servers
// that each name the other.
func (b *Broker) maxFollows() int { return len(b.addrs) + 2 }

// stableSession is how long a session must last for the backoff to start
// again from its base.
const stableSession = time.Second

// run is the connection manager.
func (b *Broker) run() {
	defer b.wg.Done()
	failures := 0 // rounds since the last session that lasted: the backoff exponent
	follows := 0  // leader hints followed since the last backoff
	hint := ""    // the leader named by the M that ended the last session
	ended := logLimiter{every: time.Second}
	failed := logLimiter{every: time.Second}
	connected := logLimiter{every: time.Second}
	for b.ctx.Err() == nil {
		c, addr := b.dialRound(b.dialOrder(hint), &follows, &failed)
		hint = ""
		if c == nil {
			if b.ctx.Err() != nil {
				return
			}
			failures++
			follows = 0
			if !b.sleep(b.backoff(failures)) {
				return
			}
			continue
		}
		b.mu.Lock()
		if b.torn {
			b.mu.Unlock()
			c.fail(&connFailure{kind: failClosed, addr: addr})
			return
		}
		b.cur = c
		b.lastGood = addr
		b.lastDead = ""
		b.served[addr] = true
		delete(b.refusals, addr)
		b.lastErr = nil
		b.broadcastLocked()
		b.mu.Unlock()
		connected.log(b.cfg.logger, slog.LevelDebug, "ticketing: connected", "addr", addr, "node", c.nodeID)

		<-c.done
		f := c.failureCause()
		b.mu.Lock()
		if b.cur == c {
			b.cur = nil
		}
		if !f.closed() {
			b.lastErr = errors.New(f.what())
		}
		if f.kind == failSilent || f.kind == failDrop {
			// A paused or cut-off server still accepts TCP (the kernel
			// answers), so dialing it first would cost a stagger of the
			// failover; try it after the others.
			b.lastDead = addr
		}
		b.broadcastLocked()
		b.mu.Unlock()
		if b.ctx.Err() != nil {
			return
		}
		ended.log(b.cfg.logger, slog.LevelInfo, "ticketing: connection ended", "addr", addr, "why", f.what(), "err", f.cause)
		if time.Since(c.born) > stableSession {
			failures, follows = 0, 0
		}
		if f.kind == failNotLeader && f.hint != "" && f.hint != addr && follows < b.maxFollows() {
			follows++
			hint = f.hint
			continue
		}
		failures++
		follows = 0
		if !b.sleep(b.backoff(failures)) {
			return
		}
	}
}

// dialOrder is the order of one round of connection attempts: the leader
// hint, then the last server that accepted a session, then the listed
// addresses in their order; the server whose session just died of silence
// or a dropped connection goes last unless it is the hint.
func (b *Broker) dialOrder(hint string) []string {
	b.mu.Lock()
	last, dead := b.lastGood, b.lastDead
	b.mu.Unlock()
	out := make([]string, 0, len(b.addrs)+2)
	seen := make(map[string]bool, len(b.addrs)+2)
	if dead != hint {
		seen[dead] = true
	}
	for _, a := range append([]string{hint, last}, b.addrs...) {
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

// dialRound runs one round of connection attempts over order: the first at
// once, the next one when every running attempt has failed or after
// dialStagger while one is still running (so a stuck address costs a
// stagger, not a dial timeout), and an address named by a hello's M right
// after the attempt that named it. It returns the first session established
// (later ones are closed) and its address, or nil when every attempt failed.
func (b *Broker) dialRound(order []string, follows *int, failed *logLimiter) (*conn, string) {
	return b.dialRoundWith(b.ctx, order, follows, failed, b)
}

// dialRoundWith is dialRound bounded by parent (and the broker's life),
// with the new connection's hooks.
func (b *Broker) dialRoundWith(parent context.Context, order []string, follows *int, failed *logLimiter, hooks connHooks) (*conn, string) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stopBroker := context.AfterFunc(b.ctx, cancel)
	defer stopBroker()
	done := make(chan struct{})
	defer close(done)
	type result struct {
		addr string
		c    *conn
		err  error
	}
	results := make(chan result)
	running := map[string]bool{}
	next := 0
	launch := func() {
		addr := order[next]
		next++
		running[addr] = true
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			c, err := dial(ctx, addr, b.cfg, 0, hooks, &b.wg)
			select {
			case results <- result{addr, c, err}:
			case <-done: // another attempt won
				if c != nil {
					c.fail(&connFailure{kind: failClosed, addr: addr})
				}
			}
		}()
	}
	stagger := time.NewTimer(b.cfg.dialStagger)
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
			b.attemptFailed(r.addr, r.err)
			failed.log(b.cfg.logger, slog.LevelDebug, "ticketing: connection attempt failed", "addr", r.addr, "err", r.err)
			var he *helloError
			if errors.As(r.err, &he) && he.hint != "" && he.hint != r.addr && !running[he.hint] && *follows < b.maxFollows() {
				*follows++
				order = slices.Insert(order, next, he.hint)
			}
			if next < len(order) {
				launch()
				stagger.Reset(b.cfg.dialStagger)
			} else if len(running) == 0 {
				return nil, ""
			}
		case <-stagger.C:
			if next < len(order) {
				launch()
				stagger.Reset(b.cfg.dialStagger)
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
func (b *Broker) attemptFailed(addr string, err error) {
	var he *helloError
	errors.As(err, &he)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastErr = err
	// A server that has served a session and now closes a hello without a
	// word stopped or crashed mid-hello: a failed attempt, not a wrong port.
	stopped := he != nil && he.reason == closedWithoutAnswer && b.served[addr]
	if he != nil && he.rejected && !stopped {
		b.refusals[addr] = he
	} else {
		delete(b.refusals, addr)
	}
	b.broadcastLocked()
}

// refusedByAll returns the refusal when every listed address refused the
// hello for the same reason; nil otherwise (a refusal by one node only moves
// the broker on, and calls wait for a connection). b.mu is held.
func (b *Broker) refusedByAll() error {
	first := b.refusals[b.addrs[0]]
	if first == nil {
		return nil
	}
	why := refusalReason(first)
	for _, a := range b.addrs[1:] {
		he := b.refusals[a]
		if he == nil || refusalReason(he) != why {
			return nil
		}
	}
	return first.err
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
	return "refused: " + detailOf(err)
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
func (b *Broker) backoff(n int) time.Duration {
	d := b.cfg.backoffBase
	for i := 1; i < n && d < b.cfg.backoffMax; i++ {
		d *= 2
	}
	d = min(d, b.cfg.backoffMax)
	return d/2 + rand.N(d/2+1)
}

func (b *Broker) sleep(d time.Duration) bool {
	if h := b.cfg.onBackoff; h != nil {
		h(d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}

// lateGrant implements connHooks: a G arrived for an acquire whose caller
// left; release that exact token in the background.
func (b *Broker) lateGrant(key string, token uint64) {
	_ = b.rel.enqueue(relJob{key: key, token: token, at: time.Now()}) // a drop is reported by enqueue
}

// acquireStarted and acquireDone count running Acquire calls, so that
// Close's drain also covers a grant that reaches its caller during Close.
func (b *Broker) acquireStarted() {
	b.mu.Lock()
	b.acquires++
	b.mu.Unlock()
}

func (b *Broker) acquireDone() {
	b.mu.Lock()
	b.acquires--
	if b.closed {
		b.broadcastLocked()
	}
	b.mu.Unlock()
}

func (b *Broker) closingCh() <-chan struct{} { return b.closing }

// orphaned implements connHooks: an acquire's connection ended before its
// final answer. Ask the leader, on the next connection, to end whatever that
// owner holds or waits for on the key (U).
func (b *Broker) orphaned(key string, owner wire.Owner, until time.Time) {
	b.rel.enqueueOwner(key, owner, until)
}

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// getConn returns a live connection to the leader, waiting for one while ctx
// allows. draining lets background releases run while Close drains them.
func (b *Broker) getConn(ctx context.Context, draining bool) (*conn, error) {
	for {
		b.mu.Lock()
		if b.torn || (b.closed && !draining) {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		if c := b.cur; c != nil && !c.dead() {
			b.mu.Unlock()
			return c, nil
		}
		if err := b.refusedByAll(); err != nil {
			b.mu.Unlock()
			return nil, err
		}
		ch := b.changed
		b.mu.Unlock()
		b.connWaiters.Add(1)
		select {
		case <-ch:
			b.connWaiters.Add(-1)
		case <-ctx.Done():
			b.connWaiters.Add(-1)
			b.mu.Lock()
			last := b.lastErr
			if wc := b.wrongClusterLocked(); wc != nil {
				// No server of the pinned cluster answered: say that one
				// of another cluster did, and was refused.
				last = wc
			}
			b.mu.Unlock()
			return nil, &waitError{ctx: ctx.Err(), last: last}
		}
	}
}

// awaitChange waits for the broker's next state change (a connection
// attempt's outcome, a new session); false when ctx ended first.
func (b *Broker) awaitChange(ctx context.Context) bool {
	b.mu.Lock()
	ch := b.changed
	b.mu.Unlock()
	b.connWaiters.Add(1)
	defer b.connWaiters.Add(-1)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitError is a context that ended while no connection was available.
type waitError struct {
	ctx  error
	last error
}

func (e *waitError) Error() string {
	if e.last != nil {
		return fmt.Sprintf("no connection to the leader yet (last attempt: %v): %v", e.last, e.ctx)
	}
	return fmt.Sprintf("no connection to the leader yet: %v", e.ctx)
}

func (e *waitError) Unwrap() []error { return []error{e.ctx, ErrUnavailable} }

// connectError turns a getConn failure into the error an operation returns;
// nothing was sent.
func connectError(op, key string, hasKey bool, err error) error {
	notSent := "not sent: "
	if op == "connect" {
		notSent = ""
	}
	if err == ErrClosed {
		if op == "connect" {
			return newOpError(op, key, hasKey, nil, "the broker is closed", ErrClosed)
		}
		return newOpError(op, key, hasKey, nil, "the broker is closed; nothing was sent", ErrClosed)
	}
	var we *waitError
	if errors.As(err, &we) {
		kinds := []error{we.ctx, ErrUnavailable}
		if errors.Is(we.last, ErrWrongCluster) {
			kinds = append(kinds, we.last)
		}
		return newOpError(op, key, hasKey, nil, notSent+we.Error(), kinds...)
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
	e := newOpError(op, key, hasKey, err, notSent+"the server refused the connection ("+detailOf(err)+"); the broker keeps retrying in the background", kinds...)
	e.hide = true
	return e
}

// WaitReady waits until the broker is connected to the leader and the hello
// is done. It returns promptly with ErrUnauthenticated (a refused token or
// client certificate) or another persistent refusal (unsupported version,
// server certificate not trusted, TLS on one side only, a peer that does not
// speak the protocol, server connection limit) when every listed server
// refused the connection for that same reason; the broker keeps retrying in
// the background. A refusal by some of the servers only moves the broker on
// to the next address, and WaitReady keeps waiting. If ctx ends first, the
// error wraps ctx.Err() and ErrUnavailable and says what the last attempt
// ran into.
func (b *Broker) WaitReady(ctx context.Context) error {
	if _, err := b.getConn(ctx, false); err != nil {
		return connectError("connect", "", false, err)
	}
	return nil
}

// Close closes the broker. New calls fail with ErrClosed at once. Close then
// releases what it can still reach, while the connection stays open:
//
//   - every acquire still waiting for its answer is cancelled and its
//     caller gets ErrClosed and ErrIndeterminate; a grant that arrives
//     anyway (also one that answers an acquire during Close) is released;
//   - background releases (Ticket.Close, compensating releases) run to
//     their outcome, each within its own ReleaseBound from when it was
//     queued; Ticket.Release still works.
//
// It waits for those (for at most ReleaseBound for the cancelled acquires),
// then closes the connection: calls still waiting then end with ErrClosed
// (an acquire also matches ErrIndeterminate), and a background release that
// could not start any more is reported to the release observer with
// ErrClosed. Close waits for the broker's goroutines to exit. It is safe to
// call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	close(b.closing)
	b.broadcastLocked()
	b.mu.Unlock()

	b.drain()
	b.rel.shutdown()

	b.mu.Lock()
	b.torn = true
	c := b.cur
	own := make([]*conn, 0, len(b.dedicated))
	for dc := range b.dedicated {
		own = append(own, dc)
	}
	b.broadcastLocked()
	b.mu.Unlock()
	b.cancel()
	if c != nil {
		c.fail(&connFailure{kind: failClosed, addr: c.addr})
	}
	for _, dc := range own {
		dc.fail(&connFailure{kind: failClosed, addr: dc.addr})
	}
	b.wg.Wait()
	return nil
}

// drain waits, for at most ReleaseBound, until no background release runs,
// no Acquire call is still running (each returns promptly once Close
// started) and no cancelled acquire still waits for its answer on the
// connection (a late grant is released as it arrives).
func (b *Broker) drain() {
	deadline := time.NewTimer(b.cfg.releaseBound)
	defer deadline.Stop()
	for {
		busy, idle := b.rel.busy()
		b.mu.Lock()
		c, changed, acquiring := b.cur, b.changed, b.acquires > 0
		b.mu.Unlock()
		var settled <-chan struct{}
		open := false
		if c != nil {
			open, settled = c.abandonedAcquires()
		}
		if !busy && !open && !acquiring {
			return
		}
		b.drainWaits.Add(1)
		select {
		case <-idle:
		case <-settled:
		case <-changed:
		case <-deadline.C:
			b.drainWaits.Add(-1)
			return
		}
		b.drainWaits.Add(-1)
	}
}
