package coordination

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Option configures a Client.
type Option func(*config)

type config struct {
	// Connection options: only for Dial, which creates the Ticketing
	// client itself; New takes the broker's.
	token       string
	tls         *tls.Config
	dialTimeout time.Duration
	dialer      func(ctx context.Context, network, addr string) (net.Conn, error)
	connOpts    []string // the connection options given, by name

	logger *slog.Logger
}

// WithToken sets the client token sent in the hello (Dial only: with New,
// give ticketing.WithToken to ticketing.Connect).
func WithToken(token string) Option {
	return func(c *config) { c.token = token; c.connOpts = append(c.connOpts, "WithToken") }
}

// WithTLSConfig connects with TLS using cfg (nil: plain TCP, the default).
// Dial only: with New, give ticketing.WithTLS to ticketing.Connect.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg; c.connOpts = append(c.connOpts, "WithTLSConfig") }
}

// WithTLS is WithTLSConfig.
//
// Deprecated: use New over a ticketing.Broker connected with
// ticketing.WithTLS. The name WithTLS belongs to the Ticketing client's
// option, which takes a ticketing.TLSMode, not a *tls.Config.
func WithTLS(cfg *tls.Config) Option { return WithTLSConfig(cfg) }

// WithDialer makes the client open its TCP connections with dial instead of
// a net.Dialer (Dial only: with New, give ticketing.WithDialer to
// ticketing.Connect).
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.dialer = dial; c.connOpts = append(c.connOpts, "WithDialer") }
}

// WithLogger sets the logger for a session's background events (its
// connection lost and restored at Info, its deadline passing at Warn, an
// expiry at Warn). Without it a client made by New logs to the broker's
// logger (ticketing.WithLogger), one made by Dial logs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithDialTimeout bounds one connection attempt and its hello (Dial only:
// with New, give ticketing.WithDialTimeout to ticketing.Connect).
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) { c.dialTimeout = d; c.connOpts = append(c.connOpts, "WithDialTimeout") }
}

// Client manages coordination nodes and opens sessions on a Ticketing
// cluster, over the connection layer of a ticketing.Broker: its dial order,
// leader following, backoff, liveness, TLS, token, dialer and logger. It is
// safe for concurrent use.
type Client struct {
	t    connLayer
	log  *slog.Logger
	life *clientLife
}

// clientLife is whether a client is closed and how many of its sessions
// live, so that Dial's own broker is closed only after the last one.
type clientLife struct {
	t   connLayer
	own bool // made by Dial: the broker is the client's own

	mu       sync.Mutex
	closed   bool
	sessions int // sessions started and not ended (Dial: the broker outlives them)
}

// New returns a coordination client that uses b's connection to the
// leader, as etcd's concurrency.NewSession builds on a clientv3.Client:
// node requests go on b's connection, and so do the sessions when the
// servers carry several sessions on one connection (older servers: each
// session gets a connection of its own, dialled as b dials). The dial
// order, leader following, liveness rules, TLS, token, dialer and logger
// are b's (ticketing.Connect's options); the connection options of this
// package (WithToken, WithTLSConfig, WithDialer, WithDialTimeout) are
// refused here. Closing the client does not close b; closing b ends the
// client's sessions (ErrClosed), and New over a closed b is ErrClosed.
func New(b *ticketing.Broker, opts ...Option) (*Client, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if b == nil {
		return nil, fmt.Errorf("%w: New needs a *ticketing.Broker (from ticketing.Connect), got nil", ErrBadRequest)
	}
	t, ok := openConnLayer(b)
	if !ok {
		return nil, fmt.Errorf("%w: New needs an open *ticketing.Broker from ticketing.Connect: this one is closed, or was not made by Connect", ErrClosed)
	}
	if len(cfg.connOpts) > 0 {
		return nil, fmt.Errorf("%w: %s configure the connection, which is the broker's: give the ticketing options (WithToken, WithTLS, WithDialer, WithDialTimeout) to ticketing.Connect instead", ErrBadRequest, strings.Join(cfg.connOpts, ", "))
	}
	lg := cfg.logger
	if lg == nil {
		lg = t.logger()
	}
	return &Client{t: t, log: lg, life: &clientLife{t: t}}, nil
}

// Dial returns a client for the comma-separated server addresses
// ("host:port,host:port") over a Ticketing client of its own. It connects
// in the background.
//
// Deprecated: connect a ticketing.Broker (ticketing.Connect) and use New:
// one connection layer and one set of options for tickets and coordination.
func Dial(addrs string, opts ...Option) (*Client, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if strings.Trim(addrs, " ,") == "" {
		return nil, fmt.Errorf("%w: no server address in %q: give host:port[,host:port...]", ErrBadRequest, addrs)
	}
	lg := cfg.logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	t, err := dialConnLayer(addrs, cfg.token, cfg.tls, cfg.dialer, cfg.dialTimeout, lg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return &Client{t: t, log: lg, life: &clientLife{t: t, own: true}}, nil
}

// Close closes the client: node requests and new sessions fail with
// ErrClosed. Sessions are closed separately: a client made by New leaves
// the broker open; one made by Dial closes its own Ticketing client once
// its sessions have ended too.
func (c *Client) Close() error { return c.life.close() }

func (cl *clientLife) close() error {
	cl.mu.Lock()
	cl.closed = true
	last := cl.own && cl.sessions == 0
	cl.mu.Unlock()
	if last {
		return cl.t.close()
	}
	return nil
}

func (cl *clientLife) isClosed() bool {
	cl.mu.Lock()
	closed := cl.closed
	cl.mu.Unlock()
	return closed
}

// sessionStarted and sessionEnded count the client's live sessions.
func (cl *clientLife) sessionStarted() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return ErrClosed
	}
	cl.sessions++
	return nil
}

func (cl *clientLife) sessionEnded() {
	cl.mu.Lock()
	cl.sessions--
	last := cl.own && cl.closed && cl.sessions == 0
	cl.mu.Unlock()
	if last {
		_ = cl.t.close()
	}
}

// nodeCall runs a node request on the broker's connection. safe requests
// (describe) are sent again on a new connection when the connection is
// lost; the others then report ErrIndeterminate.
func (c *Client) nodeCall(ctx context.Context, name string, op uint8, body *wire.Coord, safe bool) (wire.Coord, error) {
	if err := checkSizes(op, body); err != nil {
		return wire.Coord{}, err
	}
	losses := 0
	for {
		if c.life.isClosed() {
			return wire.Coord{}, fmt.Errorf("%w: %s %s: the client is closed", ErrClosed, name, body.Path)
		}
		conn, err := c.t.shared(ctx)
		if err != nil {
			return wire.Coord{}, fmt.Errorf("coordination: %s %s: %w", name, body.Path, err)
		}
		st, ans, err := conn.call(ctx, op, body)
		if errors.Is(err, errLinkLost) || errors.Is(err, errMalformedAnswer) {
			if conn.endedByServer() {
				losses++
			}
			if safe && losses < 2 {
				select {
				case <-conn.done(): // the broker's next connection, then
				case <-ctx.Done():
					return wire.Coord{}, ctx.Err()
				}
				continue
			}
			return wire.Coord{}, fmt.Errorf("%w: %s %s: the connection was lost before the answer", ErrIndeterminate, name, body.Path)
		}
		if err != nil {
			return wire.Coord{}, err
		}
		return ans, statusError(name+" "+string(body.Path), st, ans.Message)
	}
}

// NodeConfig is a coordination node's configuration (docs/coordination.md).
// Zero fields take the default in CreateNode and stay unchanged in AlterNode.
type NodeConfig struct {
	SelfCheckPeriod    time.Duration
	SessionGracePeriod time.Duration
	ReadStrict         bool // read_consistency_mode STRICT (default RELAXED)
	ReadRelaxed        bool // read_consistency_mode RELAXED given explicitly: an alter back from STRICT
	AttachRelaxed      bool // attach_consistency_mode RELAXED (default STRICT)
	AttachStrict       bool // attach_consistency_mode STRICT given explicitly: an alter back from RELAXED
	MaxSessions        uint32
	MaxSemaphores      uint32
	MaxWaiters         uint32
}

// check refuses what the wire cannot say as given: both modes of a pair, or
// a period that is not a whole number of milliseconds from 1 ms to
// 2^32-1 ms (it would be sent as another value, or as 0, the default).
func (n NodeConfig) check(op string) error {
	bad := func(format string, args ...any) error {
		return &StatusError{Op: op, Status: wire.CoordBadRequest, Message: fmt.Sprintf(format, args...) + " (nothing was sent)"}
	}
	if n.ReadStrict && n.ReadRelaxed {
		return bad("ReadStrict and ReadRelaxed: set one read mode at most")
	}
	if n.AttachStrict && n.AttachRelaxed {
		return bad("AttachStrict and AttachRelaxed: set one attach mode at most")
	}
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"SelfCheckPeriod", n.SelfCheckPeriod}, {"SessionGracePeriod", n.SessionGracePeriod}} {
		if p.d != 0 && (p.d < time.Millisecond || p.d%time.Millisecond != 0 || p.d/time.Millisecond > math.MaxUint32) {
			return bad("%s: %v, want whole milliseconds from 1ms to %v, or 0 for the default (unchanged in an alter)", p.name, p.d, time.Duration(math.MaxUint32)*time.Millisecond)
		}
	}
	return nil
}

func (n NodeConfig) wire(path string) *wire.Coord {
	b := &wire.Coord{Path: []byte(path), SelfCheckMs: uint32(n.SelfCheckPeriod / time.Millisecond),
		GraceMs: uint32(n.SessionGracePeriod / time.Millisecond), MaxSessions: n.MaxSessions,
		MaxSemaphores: n.MaxSemaphores, MaxWaiters: n.MaxWaiters}
	switch {
	case n.ReadStrict:
		b.ReadMode = 2
	case n.ReadRelaxed:
		b.ReadMode = 1
	}
	switch {
	case n.AttachRelaxed:
		b.AttachMode = 2
	case n.AttachStrict:
		b.AttachMode = 1
	}
	return b
}

// CreateNode creates the coordination node at path ("/a/b").
func (c *Client) CreateNode(ctx context.Context, path string, cfg NodeConfig) error {
	if err := cfg.check("create node " + path); err != nil {
		return err
	}
	_, err := c.nodeCall(ctx, "create node", wire.CoordCreateNode, cfg.wire(path), false)
	return err
}

// AlterNode changes the non-zero fields of cfg in the node's configuration.
func (c *Client) AlterNode(ctx context.Context, path string, cfg NodeConfig) error {
	if err := cfg.check("alter node " + path); err != nil {
		return err
	}
	_, err := c.nodeCall(ctx, "alter node", wire.CoordAlterNode, cfg.wire(path), false)
	return err
}

// DropNode drops the node; its sessions end (they see EXPIRED).
func (c *Client) DropNode(ctx context.Context, path string) error {
	_, err := c.nodeCall(ctx, "drop node", wire.CoordDropNode, &wire.Coord{Path: []byte(path)}, false)
	return err
}

// NodeDescription is a node's configuration and sizes.
type NodeDescription struct {
	Config                        NodeConfig
	Sessions, Semaphores, Waiters int
}

// DescribeNode returns the node's configuration and sizes.
func (c *Client) DescribeNode(ctx context.Context, path string) (NodeDescription, error) {
	b, err := c.nodeCall(ctx, "describe node", wire.CoordDescribeNode, &wire.Coord{Path: []byte(path)}, true)
	if err != nil {
		return NodeDescription{}, err
	}
	return NodeDescription{Config: NodeConfig{SelfCheckPeriod: time.Duration(b.SelfCheckMs) * time.Millisecond,
		SessionGracePeriod: time.Duration(b.GraceMs) * time.Millisecond, ReadStrict: b.ReadMode == 2,
		ReadRelaxed: b.ReadMode == 1, AttachRelaxed: b.AttachMode == 2, AttachStrict: b.AttachMode == 1, MaxSessions: b.MaxSessions, MaxSemaphores: b.MaxSemaphores, MaxWaiters: b.MaxWaiters},
		Sessions: int(b.Sessions), Semaphores: int(b.Semaphores), Waiters: int(b.Waiters)}, nil
}

// SessionInfo is one session of a node, as ListSessions reports it.
type SessionInfo struct {
	ID          uint64
	SeqNo       uint64 // the highest attach sequence number it has seen
	Timeout     time.Duration
	Attached    bool // a connection is attached to it now (else it is restorable until it expires)
	Description string
}

// ListSessions returns the node's sessions by id. It asks page by page
// (each answer is at most about 1 MiB); sessions that start or end while it
// pages may or may not be included.
func (c *Client) ListSessions(ctx context.Context, path string) ([]SessionInfo, error) {
	var out []SessionInfo
	var after uint64
	for {
		b, err := c.nodeCall(ctx, "list sessions", wire.CoordListSessions, &wire.Coord{Path: []byte(path), After: after}, true)
		if err != nil {
			return nil, err
		}
		for _, s := range b.SessionList {
			out = append(out, SessionInfo{ID: s.Session, SeqNo: s.SeqNo, Timeout: time.Duration(s.TimeoutMs) * time.Millisecond,
				Attached: s.Flags&wire.CoordFlagAttached != 0, Description: string(s.Desc)})
			after = s.Session
		}
		if b.Flags&wire.CoordFlagMore == 0 || len(b.SessionList) == 0 {
			return out, nil
		}
	}
}
