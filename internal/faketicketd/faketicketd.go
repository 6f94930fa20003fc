// Package faketicketd is a scriptable fake Ticketing server for tests. It
// listens on real TCP (127.0.0.1:0, optionally TLS) and runs a Handler per
// accepted connection. A handler reads decoded frames and writes whatever
// the test wants: a normal answer (Locks implements the ordinary semantics),
// nothing, a drop, M, E, or raw malformed, oversized or unknown frames.
//
//	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
//		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
//			return
//		}
//		f, err := c.Read() // the acquire
//		if err != nil {
//			return
//		}
//		c.Close() // drop it: the client must report ErrIndeterminate
//	})
package faketicketd

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Handler serves one connection; the connection is closed when it returns.
type Handler func(c *Conn)

// Server is a fake ticketd.
type Server struct {
	ln      net.Listener
	mu      sync.Mutex
	handler Handler
	conns   map[*Conn]struct{}
	n       int
	closed  bool
	wg      sync.WaitGroup
}

// Option configures a Server.
type Option func(*options)

type options struct {
	tls *tls.Config
}

// WithTLS makes the server speak TLS with the given configuration.
func WithTLS(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// New starts a server on 127.0.0.1:0 running h for every connection.
func New(h Handler, opts ...Option) (*Server, error) {
	var o options
	for _, op := range opts {
		op(&o)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	s := &Server{ln: ln, handler: h, conns: make(map[*Conn]struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Start is New for tests: it fails t on error and closes the server in
// t.Cleanup.
func Start(t testing.TB, h Handler, opts ...Option) *Server {
	t.Helper()
	s, err := New(h, opts...)
	if err != nil {
		t.Fatalf("faketicketd: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Accepted is the number of connections accepted so far.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// SetHandler replaces the handler for connections accepted from now on.
func (s *Server) SetHandler(h Handler) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		c := &Conn{Index: s.n, nc: nc, r: wire.NewReader(nc), srv: s, done: make(chan struct{})}
		s.n++
		s.conns[c] = struct{}{}
		h := s.handler
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			h(c)
		}()
	}
}

// Close stops accepting, closes every connection and waits for the handlers
// to return.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Conn is one accepted connection, seen from the server side.
type Conn struct {
	Index int // accept order on its server, from 0

	nc   net.Conn
	r    *wire.Reader
	srv  *Server
	wmu  sync.Mutex
	once sync.Once
	done chan struct{}
}

// Read reads and decodes the next frame; Key and Text are private copies.
func (c *Conn) Read() (wire.Frame, error) {
	var f wire.Frame
	if err := c.r.Next(&f); err != nil {
		return wire.Frame{}, err
	}
	f.Key = append([]byte(nil), f.Key...)
	f.Text = append([]byte(nil), f.Text...)
	return f, nil
}

// ReadType reads frames until one of type t arrives, answering pings with
// pongs and skipping pongs on the way. Other frames are an error.
func (c *Conn) ReadType(t wire.Type) (wire.Frame, error) {
	for {
		f, err := c.Read()
		if err != nil {
			return f, err
		}
		switch f.Type {
		case t:
			return f, nil
		case wire.TypePing:
			c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		case wire.TypePong:
		default:
			return f, errors.New("faketicketd: expected a " + t.String() + " frame, got " + f.Type.String())
		}
	}
}

// Send writes one frame. It is safe to call from several goroutines.
func (c *Conn) Send(f wire.Frame) error {
	return c.SendRaw(wire.Append(nil, &f))
}

// SendRaw writes bytes as they are (for malformed or oversized frames).
func (c *Conn) SendRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.nc.Write(b)
	return err
}

// SendSlowly writes b a byte at a time, spread evenly over d, nothing else
// in between: a slow link, on which every byte is a sign of life though the
// whole of b takes d.
func (c *Conn) SendSlowly(b []byte, d time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	gap := d / time.Duration(max(len(b)-1, 1))
	for i := range b {
		if i > 0 {
			select {
			case <-time.After(gap): // the slow link's pace
			case <-c.Done():
				return net.ErrClosed
			}
		}
		c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.nc.Write(b[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the connection (a drop, from the client's point of view).
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.nc.Close()
		close(c.done)
	})
	return nil
}

// Reset ends the connection with a TCP reset (RST) instead of an orderly
// close: the client's read fails with "connection reset by peer".
func (c *Conn) Reset() error {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	return c.Close()
}

// Done is closed when the connection is closed by Close.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Ready is the content of the Y frame AcceptHello sends.
type Ready struct {
	Interval    time.Duration // ping interval; 0 means 5 s
	NoPings     bool          // announce interval 0: the server sends no pings
	MaxInFlight uint32        // 0 means 1000
	NodeID      string        // "" means "fake"
	Follower    bool          // clear the leader flag
	// Cluster, when set, is the cluster ID reported to a hello that asks
	// for it (HelloClusterID), as ticketd does; all zero: "none yet".
	// Unset, the server reports none, as a server older than cluster IDs.
	Cluster *wire.ClusterID
	// Sessions announces ReadySessions: the server carries any number of
	// coordination sessions on one connection.
	Sessions bool
	// IdleInterval, when set, is the idle ping interval announced to a
	// hello that asks for one (HelloIdlePings), as ticketd does.
	IdleInterval time.Duration
}

// AcceptHello reads the client's H and answers Y. It returns the hello.
func (c *Conn) AcceptHello(r Ready) (wire.Frame, error) {
	h, err := c.Read()
	if err != nil {
		return h, err
	}
	if h.Type != wire.TypeHello {
		return h, errors.New("faketicketd: first frame is " + h.Type.String() + ", not H")
	}
	return h, c.Send(r.FrameFor(h))
}

// FrameFor is the Y frame for r answering hello h: with the cluster ID
// only when h asked for it.
func (r Ready) FrameFor(h wire.Frame) wire.Frame {
	f := r.Frame()
	if r.Cluster != nil && h.Flags&wire.HelloClusterID != 0 {
		f.Flags |= wire.ReadyClusterID
		f.ClusterID = *r.Cluster
	}
	if r.IdleInterval > 0 && h.Flags&wire.HelloIdlePings != 0 {
		f.Flags |= wire.ReadyIdlePings
		f.IdleInterval = uint32(r.IdleInterval / time.Millisecond)
	}
	return f
}

// Frame is the Y frame for r.
func (r Ready) Frame() wire.Frame {
	if r.Interval == 0 {
		r.Interval = 5 * time.Second
	}
	if r.MaxInFlight == 0 {
		r.MaxInFlight = 1000
	}
	if r.NodeID == "" {
		r.NodeID = "fake"
	}
	if r.NoPings {
		r.Interval = 0
	}
	flags := wire.ReadyLeader
	if r.Follower {
		flags = 0
	}
	if r.Sessions {
		flags |= wire.ReadySessions
	}
	return wire.Frame{Type: wire.TypeReady, Version: wire.Version, Flags: flags,
		Interval: uint32(r.Interval / time.Millisecond), Count: r.MaxInFlight, Text: []byte(r.NodeID)}
}

// Error sends an E frame with code and message and closes the connection.
func (c *Conn) Error(code wire.Code, msg string) {
	c.Send(wire.Frame{Type: wire.TypeError, Code: uint16(code), Text: []byte(msg)})
	c.Close()
}

// NotLeader sends M with the leader's address (may be empty) and closes.
func (c *Conn) NotLeader(leader string) {
	c.Send(wire.Frame{Type: wire.TypeNotLeader, Text: []byte(leader)})
	c.Close()
}

// Raw frames for protocol-violation tests.
var (
	// Malformed is a G frame two bytes short of its layout.
	Malformed = func() []byte {
		b := wire.Append(nil, &wire.Frame{Type: wire.TypeGranted, ID: 1, Token: 1, LeaseMs: 1000})
		b = b[:len(b)-2]
		binary.BigEndian.PutUint32(b, uint32(len(b)-wire.HeaderLen))
		return b
	}()
	// Oversized is the header of a frame one byte longer than MaxFrame.
	Oversized = binary.BigEndian.AppendUint32(nil, wire.MaxFrame+1)
	// Unknown is a frame of the unknown type 'Z'.
	Unknown = []byte{0, 0, 0, 1, 'Z'}
)

// Serve is the normal server: it completes the hello with r and answers
// every request through l until the connection ends.
func Serve(l *Locks, r Ready) Handler {
	return func(c *Conn) {
		if _, err := c.AcceptHello(r); err != nil {
			return
		}
		defer l.Drop(c)
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			l.Handle(c, f)
		}
	}
}
