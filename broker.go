package ticketing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Broker is the client: one per process, safe for concurrent use by any
// number of goroutines. It keeps one connection to the cluster leader and
// multiplexes every request over it, reconnecting in the background (see
// "Connections" in the package documentation for the order, the backoff and
// what a refusal means).
type Broker struct {
	cfg *config
	t   *transport.Client // the connection layer, shared with coordination.New

	mu       sync.Mutex
	acquires int // Acquire calls running: Close's drain waits for them

	drainWaits atomic.Int32 // tests: Close's drain waiting for something to finish

	rel *releaser
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
	b := &Broker{cfg: cfg}
	b.rel = newReleaser(b)
	b.t = transport.New(list, &cfg.Config, brokerHooks{b})
	transport.Register(b, b.t)
	return b, nil
}

// brokerHooks is what the broker's connections tell it about its acquires.
type brokerHooks struct{ b *Broker }

// LateGrant: a G arrived for an acquire whose caller left; release that
// exact token in the background.
func (h brokerHooks) LateGrant(key string, token uint64) { h.b.lateGrant(key, token) }

// Orphaned: an acquire's connection ended before its final answer. Ask the
// leader, on the next connection, to end whatever that owner holds or waits
// for on the key (U).
func (h brokerHooks) Orphaned(key string, owner wire.Owner, until time.Time) {
	h.b.orphaned(key, owner, until)
}

func (b *Broker) lateGrant(key string, token uint64) {
	_ = b.rel.enqueue(relJob{key: key, token: token, at: time.Now()}) // a drop is reported by enqueue
}

func (b *Broker) orphaned(key string, owner wire.Owner, until time.Time) {
	b.rel.enqueueOwner(key, owner, until)
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
	b.mu.Unlock()
	if b.t.IsClosed() {
		b.t.Wake() // Close's drain may be waiting for it
	}
}

func (b *Broker) isClosed() bool { return b.t.IsClosed() }

// getConn returns a live connection to the leader, waiting for one while ctx
// allows. draining lets background releases run while Close drains them.
func (b *Broker) getConn(ctx context.Context, draining bool) (*transport.Conn, error) {
	return b.t.Leader(ctx, draining)
}

// connectError turns a getConn failure into the error an operation returns;
// nothing was sent.
func connectError(op, key string, hasKey bool, err error) error {
	return transport.ConnectError(op, key, hasKey, err)
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
	if !b.t.BeginClose() {
		b.t.Wait() // for the first Close's teardown
		return nil
	}
	b.drain()
	b.rel.shutdown()
	b.t.Teardown()
	transport.Unregister(b)
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
		// The channel first: a change after it is read wakes this wait.
		changed := b.t.Changed()
		busy, idle := b.rel.busy()
		b.mu.Lock()
		acquiring := b.acquires > 0
		b.mu.Unlock()
		var settled <-chan struct{}
		open := false
		if c := b.t.Current(); c != nil {
			open, settled = c.AbandonedAcquires()
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
