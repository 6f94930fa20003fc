// Package coordlink joins the coordination SDK to the Ticketing client's
// transport: the connection layer of package ticketing (dial order,
// staggered dials, leader following and its backoff, the hello and its
// diagnosis, liveness from pings, TLS, token, dialer, logger) carries
// coordination frames (K/T) as well as ticket frames, and this package is
// the narrow surface through which package coordination uses it. Package
// ticketing implements it and sets Open and Connect when it is initialised;
// nothing here is public API.
package coordlink

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Conn is one established connection to the leader.
type Conn interface {
	// Call sends the K request op with body and waits for its final answer
	// (a T frame, or a C frame when the server's in-flight limit refused
	// it: then err is a *ticketing.CapacityError). note, if set, gets the
	// request's Queued notifications and, with watch, the one Changed that
	// a successful describe's watch sends later; it runs on the
	// connection's reader and must not block. sent is the time read just
	// before the request was queued for writing (zero when it was not).
	// err is ErrNotSent when nothing was sent, ErrLost when the connection
	// ended (or stop was closed) before the answer, or ctx's error; a
	// caller that leaves has its late answer dropped.
	Call(ctx context.Context, stop <-chan struct{}, op uint8, body *wire.Coord, note func(wire.Frame), watch bool) (ans wire.Frame, sent time.Time, err error)
	// Done is closed when the connection has ended.
	Done() <-chan struct{}
	// Failure says why the connection ended (nil while it is open).
	Failure() error
	// EndedByServer reports whether the server ended the connection with
	// an error frame (E), blaming something the client sent.
	EndedByServer() bool
	// Sessions reports whether the server carries any number of
	// coordination sessions on this connection (wire.ReadySessions).
	Sessions() bool
	// Close ends a dedicated connection; on the shared one it does nothing.
	Close()
}

// Transport is a Ticketing client's connection layer.
type Transport interface {
	// Shared returns the client's connection to the leader, waiting for
	// one while ctx allows. Its errors are the client's own (ErrClosed,
	// ErrUnavailable with what the last attempt ran into, a refusal that
	// every server gave, such as a wrong port or a refused token).
	Shared(ctx context.Context) (Conn, error)
	// Dedicated dials a connection of its own, as the client dials its
	// shared one, until ctx ends; notifications with id 0 on it go to
	// onEvent. The connection ends when the client is closed.
	Dedicated(ctx context.Context, onEvent func(wire.Frame)) (Conn, error)
	// Subscribe registers fn for the notifications with id 0 on the shared
	// connection (whichever it is at the time); the result unregisters it.
	Subscribe(fn func(c Conn, f wire.Frame)) (cancel func())
	// Logger is the client's logger (one that discards when none was set).
	Logger() *slog.Logger
	// Close closes the client (for a client the SDK created itself).
	Close() error
}

// Errors of Conn.Call.
var (
	ErrNotSent = errors.New("the connection ended before the request was sent")
	ErrLost    = errors.New("the connection ended before the answer")
)

// Options configure a client that the SDK creates itself (its deprecated
// constructor over addresses).
type Options struct {
	Token       string
	TLS         *tls.Config // nil: plain TCP
	Dialer      func(ctx context.Context, network, addr string) (net.Conn, error)
	DialTimeout time.Duration // 0: the client's default
	Logger      *slog.Logger
}

// Open returns the transport of a *ticketing.Broker (false for anything
// else). Set by package ticketing.
var Open func(broker any) (Transport, bool)

// Connect creates a private Ticketing client for addrs with o. Set by
// package ticketing.
var Connect func(addrs string, o Options) (Transport, error)
