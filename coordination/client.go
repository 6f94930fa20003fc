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
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Option configures a Client.
type Option func(*config)

type config struct {
	addrs       []string
	token       string
	tls         *tls.Config
	dialTimeout time.Duration
	dialer      func(ctx context.Context, network, addr string) (net.Conn, error)
	logger      *slog.Logger
	served      *atomic.Bool // a server has answered a hello of this client
}

// log is the configured logger, or one that discards.
func (c *config) log() *slog.Logger {
	if c.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.logger
}

// WithToken sets the client token sent in the hello.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTLSConfig connects with TLS using cfg (nil: plain TCP, the default).
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithTLS is WithTLSConfig.
//
// Deprecated: use WithTLSConfig. The name WithTLS belongs to the Ticketing
// client's option, which takes a ticketing.TLSMode, not a *tls.Config.
func WithTLS(cfg *tls.Config) Option { return WithTLSConfig(cfg) }

// WithDialer makes the client open its TCP connections with dial instead of
// a net.Dialer, as the Ticketing client's option of the same name: dial
// gets network "tcp" and the server's address, and must obey ctx. TLS and
// the hello run over the connection it returns.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.dialer = dial }
}

// WithLogger sets the logger for a session's background events (its
// connection lost and restored at Info, its deadline passing at Warn, an
// expiry at Warn). Without it nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithDialTimeout bounds one connection attempt and its hello (default 5 s).
func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// Client manages coordination nodes and opens sessions on a Ticketing
// cluster. It is safe for concurrent use.
type Client struct {
	cfg config

	mu     sync.Mutex
	ctl    *link // for node requests, dialled on first use
	closed bool
}

// New returns a client for the comma-separated server addresses
// ("host:port,host:port"). It connects on first use.
func New(addrs string, opts ...Option) (*Client, error) {
	cfg := config{dialTimeout: 5 * time.Second, served: new(atomic.Bool)}
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.addrs = append(cfg.addrs, a)
		}
	}
	if len(cfg.addrs) == 0 {
		return nil, fmt.Errorf("%w: no server address in %q: give host:port[,host:port...]", ErrBadRequest, addrs)
	}
	for _, o := range opts {
		o(&cfg)
	}
	return &Client{cfg: cfg}, nil
}

// Close closes the client's connection. Sessions are closed separately.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.ctl != nil {
		c.ctl.close()
	}
	return nil
}

func (c *Client) control(ctx context.Context) (*link, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.ctl != nil {
		select {
		case <-c.ctl.done:
		default:
			return c.ctl, nil
		}
	}
	l, err := dialLeader(ctx, &c.cfg, nil)
	if err != nil {
		return nil, err
	}
	c.ctl = l
	return l, nil
}

// nodeCall runs a node request. safe requests (describe) are sent again on
// a new connection when the connection is lost; the others then report
// ErrIndeterminate.
func (c *Client) nodeCall(ctx context.Context, name string, op uint8, body *wire.Coord, safe bool) (wire.Coord, error) {
	losses := 0
	for {
		l, err := c.control(ctx)
		if err != nil {
			return wire.Coord{}, err
		}
		st, ans, err := l.call(ctx, op, body, nil)
		if errors.Is(err, errLinkLost) {
			if l.endedByServer() {
				losses++
			}
			if safe && losses < 2 {
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
