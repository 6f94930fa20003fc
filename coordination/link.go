package coordination

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// connLayer is the Ticketing client's connection layer as this package
// uses it. Every call from this package into that layer is in this file.
type connLayer struct{ t *transport.Client }

// openConnLayer uses b's connection layer; false: b is closed, or was not
// made by ticketing.Connect.
func openConnLayer(b *ticketing.Broker) (connLayer, bool) {
	t, ok := transport.Of(b)
	return connLayer{t}, ok
}

// dialConnLayer starts a Ticketing client of the package's own (Dial).
func dialConnLayer(addrs, token string, tlsConfig *tls.Config, dialer func(ctx context.Context, network, addr string) (net.Conn, error),
	dialTimeout time.Duration, lg *slog.Logger) (connLayer, error) {
	list, err := transport.ParseAddrs(addrs)
	if err != nil {
		return connLayer{}, err
	}
	tc := transport.DefaultConfig()
	tc.Token, tc.TLS, tc.Dialer, tc.Logger = token, tlsConfig, dialer, lg
	if dialTimeout != 0 {
		tc.DialTimeout = dialTimeout
	}
	if err := tc.Check(); err != nil {
		return connLayer{}, err
	}
	return connLayer{transport.New(list, &tc, nil)}, nil
}

func (t connLayer) logger() *slog.Logger { return t.t.Logger() }

func (t connLayer) close() error { return t.t.Close() }

// subscribe calls fn with every notification (id 0) on the broker's
// connections, until the returned function is called.
func (t connLayer) subscribe(fn func(wire.Frame)) (unsubscribe func()) {
	return t.t.Subscribe(func(_ *transport.Conn, f wire.Frame) { fn(f) })
}

// connect returns a link for a session: on the broker's connection when
// its server carries several sessions on one connection, else on a
// connection of the session's own, dialled as the broker dials, whose
// notifications go to event.
func (t connLayer) connect(ctx context.Context, event func(wire.Frame)) (*link, error) {
	shared, err := t.t.Shared(ctx)
	if err != nil {
		return nil, err
	}
	if shared.Sessions() {
		return newLink(shared, true), nil
	}
	own, err := t.t.Dedicated(ctx, event)
	if err != nil {
		return nil, err
	}
	return newLink(own, false), nil
}

// shared returns the broker's connection to the leader, for node requests.
func (t connLayer) shared(ctx context.Context) (nodeConn, error) {
	c, err := t.t.Shared(ctx)
	return nodeConn{c}, err
}

// nodeConn is the broker's connection as node requests use it.
type nodeConn struct{ c *transport.Conn }

// call sends one node request and decodes its answer.
func (n nodeConn) call(ctx context.Context, op uint8, body *wire.Coord) (uint16, wire.Coord, error) {
	st, ans, _, err := exchange(ctx, n.c, nil, op, body, nil)
	return st, ans, err
}

// endedByServer: the server ended the connection with E.
func (n nodeConn) endedByServer() bool { return n.c.EndedByServer() }

// done is closed when the connection ends.
func (n nodeConn) done() <-chan struct{} { return n.c.Done() }

// errLinkLost: the connection ended before the answer; the caller decides
// whether the request is safe to send again.
var errLinkLost = errors.New("coordination: connection lost")

// link is a session's use of one connection of the Ticketing client's
// transport: the broker's shared connection (when the server carries many
// sessions on one connection) or a connection of the session's own. It ends
// when its connection ends, or when the session gives it up (its deadline
// passed): a dedicated connection is then closed, the shared one stays for
// the broker's other users and the session attaches on it again.
type link struct {
	c      *transport.Conn
	shared bool   // the broker's connection: session requests name the session
	id     uint64 // shared: the session the requests speak for (set once attached)
	// givenUp: the session's deadline passed while it used this link
	// (set under the session's lock); answers on it confirm nothing more.
	givenUp bool

	mu   sync.Mutex
	err  error
	done chan struct{}
	// detached is closed by the session once it has let go of this link
	// (after done), so that a request waiting to be sent again finds the
	// next one, not this one.
	detached chan struct{}
}

func newLink(c *transport.Conn, shared bool) *link {
	l := &link{c: c, shared: shared, done: make(chan struct{}), detached: make(chan struct{})}
	go func() {
		select {
		case <-c.Done():
			l.fail(c.Failure())
		case <-l.done:
		}
	}()
	return l
}

// fail ends the link once; a dedicated connection is closed with it.
func (l *link) fail(err error) {
	if err == nil {
		err = errLinkLost
	}
	l.mu.Lock()
	first := l.err == nil
	if first {
		l.err = err
		close(l.done)
	}
	l.mu.Unlock()
	if first && !l.shared {
		l.c.Close()
	}
}

func (l *link) close() { l.fail(ErrClosed) }

// endedByServer reports whether the server ended the connection with E: a
// request in flight may be what it refused.
func (l *link) endedByServer() bool { return l.c.EndedByServer() }

// lostErr is why the link ended (nil while open).
func (l *link) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// call sends a K request and waits for its final answer. note, if set,
// receives the request's Queued and Changed notifications. A lost
// connection is errLinkLost.
func (l *link) call(ctx context.Context, op uint8, body *wire.Coord, note func(wire.Frame)) (uint16, wire.Coord, error) {
	st, ans, _, err := l.callSent(ctx, op, body, note)
	return st, ans, err
}

// callSent is call that also returns when the request was sent: the
// monotonic time read before it was queued for writing, which precedes the
// server's receipt (the session's deadline counts from it).
func (l *link) callSent(ctx context.Context, op uint8, body *wire.Coord, note func(wire.Frame)) (uint16, wire.Coord, time.Time, error) {
	if err := checkSizes(op, body); err != nil {
		return 0, wire.Coord{}, time.Time{}, err
	}
	if l.lostErr() != nil {
		return 0, wire.Coord{}, time.Time{}, errLinkLost
	}
	if l.shared && sessionOp(op) {
		// The server carries several sessions on the connection: the
		// request names its own.
		b := *body
		if op != wire.CoordAttach { // an attach names its session in its body already
			b.Session = l.id
		}
		body, op = &b, op|wire.CoordForSession
	}
	st, ans, sent, err := exchange(ctx, l.c, l.done, op, body, note)
	if errors.Is(err, errMalformedAnswer) {
		l.fail(err)
		return 0, wire.Coord{}, sent, errLinkLost
	}
	return st, ans, sent, err
}

// stopBound bounds a background stop of a session on the broker's
// connection.
const stopBound = 10 * time.Second

// stopSession stops session id on the link's connection in the background,
// if the connection is still open (the link itself may have been given
// up): a session given up by its client must not stay attached to a
// connection that lives on.
func (l *link) stopSession(id uint64) {
	select {
	case <-l.c.Done():
		return // the server detached it; it expires on its own
	default:
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		_, _, _, _ = exchange(ctx, l.c, nil, wire.CoordStop|wire.CoordForSession, &wire.Coord{Session: id}, nil)
	}()
}

// sessionOp reports whether op acts for a session (it names its session on
// a shared connection).
func sessionOp(op uint8) bool {
	switch op {
	case wire.CoordAttach, wire.CoordStop, wire.CoordCreateSemaphore, wire.CoordUpdateSemaphore, wire.CoordDeleteSemaphore,
		wire.CoordAcquire, wire.CoordRelease, wire.CoordDescribeSemaphore:
		return true
	}
	return false
}

var errMalformedAnswer = errors.New("coordination: malformed answer")

// exchange sends one K request on c and decodes its answer; stop (nil for
// none) abandons it as a lost connection. A request refused by the server's
// in-flight limit is ErrCapacity (the Ticketing client's sentinel).
func exchange(ctx context.Context, c *transport.Conn, stop <-chan struct{}, op uint8, body *wire.Coord, note func(wire.Frame)) (uint16, wire.Coord, time.Time, error) {
	watch := op&^wire.CoordForSession == wire.CoordDescribeSemaphore && body.Flags&(wire.CoordFlagWatchData|wire.CoordFlagWatchOwners) != 0
	f, sent, err := c.Call(ctx, stop, op, body, note, watch)
	switch {
	case errors.Is(err, transport.ErrNotSent):
		return 0, wire.Coord{}, time.Time{}, errLinkLost
	case errors.Is(err, transport.ErrLost):
		return 0, wire.Coord{}, sent, errLinkLost
	case errors.Is(err, ticketing.ErrCapacity):
		return 0, wire.Coord{}, sent, fmt.Errorf("coordination: %w", err)
	case err != nil:
		return 0, wire.Coord{}, sent, err
	}
	var ans wire.Coord
	if err := wire.DecodeCoord(&f, &ans); err != nil {
		return 0, wire.Coord{}, sent, fmt.Errorf("%w: %v", errMalformedAnswer, err)
	}
	return f.Code, ans, sent, nil
}
