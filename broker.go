package ticketing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Broker is the client: one per process, safe for concurrent use by any
// number of goroutines. It keeps one connection to the cluster leader and
// multiplexes every request over it, reconnecting in the background (to the
// leader named by an M frame, otherwise to the listed addresses in turn, with
// jittered exponential backoff).
type Broker struct {
	cfg   *config
	addrs []string

	ctx    context.Context // cancelled at teardown
	cancel context.CancelFunc
	wg     sync.WaitGroup // manager, workers, connection goroutines

	mu       sync.Mutex
	cur      *conn
	changed  chan struct{} // closed and replaced on every state change
	closed   bool          // Close was called: no new calls
	torn     bool          // teardown started: no connections at all
	rejected error         // a persistent hello refusal, reported promptly
	lastErr  error         // why the last connection attempt or connection failed

	rel *releaser
}

// Connect returns a Broker for the comma-separated list of server addresses
// ("host:port,host:port"). It returns at once and connects in the
// background; use WaitReady to wait for the connection. It fails only for a
// bad configuration: an empty or malformed address list, an unreadable CA
// file or client certificate, a token longer than 1024 bytes.
func Connect(addrs string, opts ...Option) (*Broker, error) {
	list, err := parseAddrs(addrs)
	if err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, addrs: list, changed: make(chan struct{})}
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

// run is the connection manager.
func (b *Broker) run() {
	defer b.wg.Done()
	next := 0      // index of the next listed address to try
	failures := 0  // consecutive failed attempts, for the backoff
	redirects := 0 // consecutive hello redirects (M with a hint)
	hint := ""     // the leader named by an M frame
	for b.ctx.Err() == nil {
		addr := hint
		hint = ""
		if addr == "" {
			addr = b.addrs[next%len(b.addrs)]
			next++
		}
		c, err := dial(b.ctx, addr, b.cfg, 0, b, &b.wg)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			var he *helloError
			errors.As(err, &he)
			b.mu.Lock()
			b.lastErr = err
			if he != nil && he.rejected {
				b.rejected = he.err
				b.broadcastLocked()
			}
			b.mu.Unlock()
			b.cfg.logger.Debug("ticketing: connection attempt failed", "addr", addr, "err", err)
			if he != nil && he.hint != "" && he.hint != addr && redirects < 2*len(b.addrs)+2 {
				redirects++
				hint = he.hint
				continue
			}
			redirects = 0
			failures++
			if !b.sleep(b.backoff(failures)) {
				return
			}
			continue
		}
		redirects = 0
		b.mu.Lock()
		if b.torn {
			b.mu.Unlock()
			c.fail(&connFailure{kind: failClosed, addr: addr})
			return
		}
		b.cur = c
		b.rejected = nil
		b.lastErr = nil
		b.broadcastLocked()
		b.mu.Unlock()
		b.cfg.logger.Debug("ticketing: connected", "addr", addr, "node", c.nodeID)

		<-c.done
		f := c.failureCause()
		b.mu.Lock()
		if b.cur == c {
			b.cur = nil
		}
		if !f.closed() {
			b.lastErr = errors.New(f.what())
		}
		b.broadcastLocked()
		b.mu.Unlock()
		if b.ctx.Err() != nil {
			return
		}
		b.cfg.logger.Info("ticketing: connection ended", "addr", addr, "why", f.what(), "err", f.cause)
		if time.Since(c.born) > time.Second {
			failures = 0
		}
		if f.kind == failNotLeader && f.hint != "" && f.hint != addr {
			hint = f.hint
			continue
		}
		failures++
		if !b.sleep(b.backoff(failures)) {
			return
		}
	}
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
	b.rel.enqueue(relJob{key: key, token: token, at: time.Now()})
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
		if b.rejected != nil {
			err := b.rejected
			b.mu.Unlock()
			return nil, err
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			b.mu.Lock()
			last := b.lastErr
			b.mu.Unlock()
			return nil, &waitError{ctx: ctx.Err(), last: last}
		}
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
		return newOpError(op, key, hasKey, nil, notSent+we.Error(), we.ctx, ErrUnavailable)
	}
	kinds := []error{}
	switch {
	case errors.Is(err, ErrUnauthenticated):
		kinds = append(kinds, ErrUnauthenticated)
	case errors.Is(err, ErrCapacity):
		kinds = append(kinds, ErrCapacity)
	default:
		kinds = append(kinds, ErrUnavailable)
	}
	e := newOpError(op, key, hasKey, err, notSent+"the server refused the connection ("+trimPrefix(err.Error())+"); the broker keeps retrying in the background", kinds...)
	e.hide = true
	return e
}

func trimPrefix(s string) string {
	const p = "ticketing: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// WaitReady waits until the broker is connected to the leader and the hello
// is done. It returns promptly with ErrUnauthenticated (a refused token or
// client certificate) or another persistent refusal (unsupported version,
// server certificate not trusted, TLS on one side only, a peer that does not
// speak the protocol, server connection limit) while the server refuses the
// connection; the broker keeps retrying
// in the background. If ctx ends first, the error wraps ctx.Err() and
// ErrUnavailable and says what the last attempt ran into.
func (b *Broker) WaitReady(ctx context.Context) error {
	if _, err := b.getConn(ctx, false); err != nil {
		return connectError("connect", "", false, err)
	}
	return nil
}

// Close closes the broker. Calls still waiting end with ErrClosed (an
// acquire that may have been sent also matches ErrIndeterminate). Background
// releases already queued by Ticket.Close get a short grace period (about a
// second) to finish while the connection is still open; whatever remains is
// abandoned and reported to the release observer with ErrClosed (those
// tickets expire with their lease). Close waits for the broker's goroutines
// to exit. It is safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	b.broadcastLocked()
	b.mu.Unlock()

	b.rel.drain(b.cfg.drainTimeout)

	b.mu.Lock()
	b.torn = true
	c := b.cur
	b.broadcastLocked()
	b.mu.Unlock()
	b.cancel()
	if c != nil {
		c.fail(&connFailure{kind: failClosed, addr: c.addr})
	}
	b.wg.Wait()
	return nil
}
