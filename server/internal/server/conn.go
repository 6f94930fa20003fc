package server

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
)

// writeTimeout bounds one write to a client. A client that does not read for
// this long while answers wait is disconnected (with the buffer limit, this
// keeps a slow reader from holding server memory or goroutines).
const writeTimeout = 10 * time.Second

// conn is one client connection: a reader goroutine that decodes requests and
// hands them to the core, and, while answers wait, a writer goroutine that
// flushes every queued answer with one write. The writer ends when nothing
// is left to write, so that an idle connection keeps one goroutine, not two.
type conn struct {
	srv   *Server
	nc    net.Conn
	raw   syscall.RawConn // nc's socket when it is plain TCP, for pings (sendPing)
	admin bool
	// principal is the name of who authenticated in the hello; its rights
	// are looked up per request, so a reload applies to open connections.
	principal string
	// cred names the credential of the hello (credToken, credCert, ...);
	// written once under mu, then read by reloads (Server.endRevoked).
	cred string
	// use is its principal's usage (quota.go), set at the hello.
	use *principalUsage

	mu       sync.Mutex
	out      []byte // answers waiting for the writer
	spare    []byte
	inflight map[uint32]bool // request ids without a final answer -> is an acquire
	// Acquires and other requests (L, U, D, J) have separate in-flight
	// limits, so acquires waiting in queues never starve releases and
	// describes of the same connection (protocol.md, capacity reason 4).
	acquires, others int
	closing          bool          // no more answers; writer flushes, then closes
	writing          bool          // a writer goroutine runs (flush)
	done             chan struct{} // closed when the writer has closed the socket

	ready  atomic.Bool   // hello answered with Y: pings start then
	cutOff atomic.Bool   // a slow consumer: read nothing more from it
	rx     atomic.Uint64 // reads that brought bytes; the pinger watches it move
	ping   pingState     // the pinger's (pinger.go)
	// idlePings: the client follows the idle ping interval (its hello
	// asked, Y announced one); set before ready.
	idlePings bool
	// coord is set by the first K frame: a connection that carries
	// coordination never counts as idle (its sessions' keep-alives rely
	// on the ping interval).
	coord atomic.Bool
	// busy is acquires+others, for the pinger's look without the lock.
	busy atomic.Int32
}

// idle reports whether the connection may be pinged at the idle interval:
// it follows one, no request awaits its final answer and it never carried
// a coordination frame.
func (c *conn) idle() bool {
	return c.idlePings && c.busy.Load() == 0 && !c.coord.Load()
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, inflight: make(map[uint32]bool), done: make(chan struct{})}
	if tc, ok := nc.(*net.TCPConn); ok {
		c.raw, _ = tc.SyscallConn()
	}
	return c
}

// sendPing sends P. On a plain TCP connection with nothing queued and no
// writer running (an idle one, always) the pinger writes it itself, with
// one non-blocking write: no writer goroutine started, no write deadline
// set (and fired ten seconds later). What the socket does not take at
// once is queued for a writer, which then applies the deadline.
func (c *conn) sendPing(nonce uint64) {
	f := wire.Frame{Type: wire.TypePing, Nonce: nonce}
	if c.raw == nil {
		c.send(&f)
		return
	}
	c.mu.Lock()
	if c.closing || c.writing || len(c.out) > 0 {
		c.mu.Unlock()
		c.send(&f)
		return
	}
	var b [wire.HeaderLen + 8]byte
	frame := wire.Append(b[:0], &f)
	n := 0
	_ = c.raw.Write(func(fd uintptr) bool {
		if k, err := syscall.Write(int(fd), frame); err == nil {
			n = k
		}
		return true // never wait for the socket here: a writer does
	})
	start := n < len(frame)
	if start {
		c.out = append(c.out, frame[n:]...)
		c.writing = true
	}
	c.mu.Unlock()
	if start {
		go c.flush()
	}
}

// send queues one frame. It reports false when the connection is closing.
// A client whose unread answers exceed the buffer limit is cut off.
func (c *conn) send(f *wire.Frame) bool {
	c.mu.Lock()
	ok := c.queueLocked(f)
	c.mu.Unlock()
	if ok {
		c.notify()
	}
	return ok
}

// queueLocked appends f to the answers waiting for the writer; c.mu is held.
func (c *conn) queueLocked(f *wire.Frame) bool {
	if c.closing {
		return false
	}
	c.out = wire.Append(c.out, f)
	if len(c.out) > c.srv.cfg.WriteBufferLimit {
		// Cut the client off now: stop reading its requests and end the
		// write that is blocked on it (the E is best effort).
		c.srv.metrics.slowConsumers.Inc()
		c.out = wire.Append(c.out, &wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeSlowConsumer),
			Text: []byte("the client does not read its answers; connection closed")})
		c.closing = true
		c.cutOff.Store(true)
		c.nc.SetDeadline(time.Now())
	}
	return true
}

// finish sends a request's final answer and frees its id, under one lock.
// It reports false when the connection is closing and the answer cannot be
// delivered.
func (c *conn) finish(id uint32, f *wire.Frame) bool {
	c.mu.Lock()
	if acq, ok := c.inflight[id]; ok {
		delete(c.inflight, id)
		if acq {
			c.acquires--
		} else {
			c.others--
		}
		c.busy.Add(-1)
		if c.use != nil {
			c.use.inFlight.Add(-1)
		}
	}
	ok := c.queueLocked(f)
	c.mu.Unlock()
	if ok {
		c.notify()
	}
	return ok
}

// begin registers a request id. It fails on a duplicate id (fatal) or when
// the in-flight limit of the request's class (acquires, or everything else)
// is reached on this connection, or, unless the request gives something
// back (givesBack), the principal's in-flight quota over all its
// connections (full: the capacity reason to answer).
func (c *conn) begin(id uint32, acquire, givesBack bool) (dup bool, full uint8) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.inflight[id]; ok {
		return true, 0
	}
	n := &c.others
	if acquire {
		n = &c.acquires
	}
	if *n >= c.srv.cfg.Limits.MaxInFlightPerConn {
		c.srv.metrics.capacityRejects.WithLabelValues("in_flight").Inc()
		return false, wire.CapacityInFlight
	}
	if !c.beginQuota(givesBack) {
		return false, wire.CapacityPrincipalInFlight
	}
	*n++
	c.busy.Add(1)
	c.inflight[id] = acquire
	return false, 0
}

// fatal sends a last frame (M or E) and closes the connection after it.
func (c *conn) fatal(f *wire.Frame) {
	c.mu.Lock()
	if !c.closing {
		c.out = wire.Append(c.out, f)
		c.closing = true
	}
	c.mu.Unlock()
	c.notify()
}

func (c *conn) fatalErr(code wire.Code, msg string) {
	c.fatal(&wire.Frame{Type: wire.TypeError, Code: uint16(code), Text: []byte(msg)})
}

// pending is the number of answer bytes not yet written.
func (c *conn) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out)
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *conn) notify() {
	c.mu.Lock()
	start := !c.writing && (len(c.out) > 0 || c.closing)
	if start {
		c.writing = true
	}
	c.mu.Unlock()
	if start {
		go c.flush()
	}
}

// flush writes the queued answers until none are left, then ends; once the
// connection is closing and everything is written (or a write failed) it
// closes the socket and done. notify starts it, and at most one runs.
func (c *conn) flush() {
	for {
		c.mu.Lock()
		buf, closing := c.out, c.closing
		if len(buf) == 0 {
			c.writing = closing // a closed connection never starts another
			c.mu.Unlock()
			if closing {
				if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
					_ = tc.CloseWrite() // let the client read the last frame before the reset
				}
				c.nc.Close()
				close(c.done)
			}
			return
		}
		c.out = c.spare[:0]
		c.mu.Unlock()
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			c.mu.Lock()
			c.closing = true
			c.mu.Unlock()
			c.nc.Close()
			close(c.done)
			return
		}
		c.mu.Lock()
		if cap(buf) <= 256<<10 {
			c.spare = buf[:0]
		} else {
			c.spare = nil // c.out may already use the old spare: never share an array
		}
		c.mu.Unlock()
	}
}

// serve runs the reader side until the connection ends.
func (c *conn) serve() {
	s := c.srv
	defer func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.notify()
		<-c.done
		s.removeConn(c)
		// Requests left without a final answer no longer count against
		// the principal (the core drops their waiters without answering).
		c.mu.Lock()
		left := len(c.inflight)
		clear(c.inflight)
		c.mu.Unlock()
		if c.use != nil {
			c.use.inFlight.Add(-int64(left))
			c.use.conns.Add(-1)
		}
		// Admin sessions too: on the leader they may have waiters.
		s.core.ConnClosed(c)
	}()

	// Liveness is bytes, not frames: a client sending a large request on a
	// slow link is alive while its bytes arrive, though its pong waits
	// behind that request.
	r := wire.NewReader(rxCounter{c})
	var f wire.Frame
	c.nc.SetReadDeadline(time.Now().Add(s.cfg.HelloTimeout))
	if err := r.Next(&f); err != nil {
		c.readFailed(err, true)
		return
	}
	if !c.hello(&f) {
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	r.AllowCoordFrames() // K frames carry up to 1 MiB of data; only after the hello
	for {
		if err := r.Next(&f); err != nil {
			var big *wire.OversizedRequestError
			if errors.As(err, &big) && !c.cutOff.Load() {
				// Skipped whole: the connection is in step, so only this
				// request fails (coord.go).
				c.refuseOversized(big)
				continue
			}
			c.readFailed(err, false)
			return
		}
		if c.cutOff.Load() || !c.handle(&f) {
			return
		}
	}
}

// rxCounter reads the connection's socket and counts every read that
// brought bytes: the sign of life the pinger looks for.
type rxCounter struct{ c *conn }

func (r rxCounter) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	if n > 0 {
		r.c.rx.Add(1)
	}
	return n, err
}

func (c *conn) readFailed(err error, inHello bool) {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		c.srv.metrics.malformed.Inc()
		c.fatalErr(we.Code, we.Msg)
	case inHello && errors.Is(err, os.ErrDeadlineExceeded):
		c.fatalErr(wire.CodeHelloTimeout, "no hello within "+c.srv.cfg.HelloTimeout.String())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		c.srv.log.Debug("client connection read failed", "remote", c.nc.RemoteAddr().String(), "err", err)
	}
}

// hello authenticates the connection and decides whether this server serves it.
func (c *conn) hello(f *wire.Frame) bool {
	s := c.srv
	if f.Type != wire.TypeHello {
		c.fatalErr(wire.CodeHelloRequired, "the first frame must be a hello (H), got "+f.Type.String())
		return false
	}
	if f.Version != wire.Version {
		c.fatalErr(wire.CodeUnsupportedVersion, "this server speaks protocol version 1 only")
		return false
	}
	if err := wire.Validate(f); err != nil {
		c.fatalErr(wire.CodeInvalidArgument, err.(*wire.Error).Msg)
		return false
	}
	p, cred, why := s.auth.Load().authenticate(f.Text, c.nc)
	if p != nil {
		c.mu.Lock()
		c.principal, c.cred = p.name, cred
		c.mu.Unlock()
		// A reload between authenticate and the line above ended nothing
		// here: check the credential against the settings now in force.
		if s.auth.Load().creds[cred] != p.name {
			p, why = nil, errRevoked
		}
	}
	if p == nil {
		s.metrics.authFailures.Inc()
		if s.logLimit.allow(logKey{what: "hello", who: remoteHost(c.nc.RemoteAddr()), reason: "unauthenticated"}) {
			s.log.Warn("audit", "op", "hello", "outcome", "unauthenticated", "remote", c.nc.RemoteAddr().String())
		}
		c.fatalErr(wire.CodeUnauthenticated, why)
		return false
	}
	if !c.admitConn(p) {
		// Like the server's connection limit: B with id 0, then closed.
		c.fatal(&wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityPrincipalConnections})
		return false
	}
	c.admin = f.Flags&wire.HelloAdmin != 0
	if !c.admin {
		if !s.waitServing(s.cfg.HelloTimeout) {
			c.fatal(s.notLeaderFrame())
			return false
		}
	}
	// Any number of coordination sessions on this connection, each request
	// naming its own (docs/protocol.md, "Coordination frames").
	flags := wire.ReadySessions
	if s.isServing() {
		flags |= wire.ReadyLeader
	}
	ready := &wire.Frame{Type: wire.TypeReady, Version: wire.Version, Flags: flags,
		Interval: uint32(s.cfg.PingInterval / time.Millisecond), Count: uint32(s.cfg.Limits.MaxInFlightPerConn),
		Text: []byte(s.cfg.NodeID)}
	if idle := s.cfg.idlePings(); idle > 0 && f.Flags&wire.HelloIdlePings != 0 {
		// Only to a client that asked: an older one refuses the longer Y,
		// and gives a connection up after 3 ping intervals of silence.
		ready.Flags |= wire.ReadyIdlePings
		ready.IdleInterval = uint32(idle / time.Millisecond)
		c.idlePings = true
	}
	if f.Flags&wire.HelloClusterID != 0 {
		// Only to a client that asked: an older one refuses the longer Y.
		// Clients pin the first cluster they meet and refuse any other.
		ready.Flags |= wire.ReadyClusterID
		ready.ClusterID = wire.ClusterID(s.node.Cluster())
	}
	c.send(ready)
	c.ready.Store(true)
	return true
}

// handle acts on one request; it returns false when the connection must end.
func (c *conn) handle(f *wire.Frame) bool {
	s := c.srv
	switch f.Type {
	case wire.TypePing:
		c.send(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		return true
	case wire.TypePong:
		return true
	case wire.TypeHello:
		c.fatalErr(wire.CodeHelloRequired, "a second hello on one connection")
		return false
	case wire.TypeAdmin:
		if c.overRate(f.ID) {
			return true
		}
		if dup, full := c.begin(f.ID, false, false); dup {
			c.fatalErr(wire.CodeDuplicateID, "request id already in flight")
			return false
		} else if full != 0 {
			c.send(&wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: full})
			return true
		}
		id, body := f.ID, append([]byte(nil), f.Text...)
		go s.adminAs(c, id, body)
		return true
	case wire.TypeAcquire, wire.TypeRelease, wire.TypeReleaseOwner, wire.TypeDescribe, wire.TypeCancel:
	case wire.TypeCoord:
		c.coord.Store(true)
		return c.coordFrame(f) // coord.go
	default:
		c.fatalErr(wire.CodeNotAllowed, "frame "+f.Type.String()+" is not a request")
		return false
	}
	if c.admin && !s.isServing() {
		c.fatalErr(wire.CodeNotAllowed, "an admin session on a follower serves status only")
		return false
	}
	if err := wire.Validate(f); err != nil {
		c.fatalErr(wire.CodeInvalidArgument, err.(*wire.Error).Msg)
		return false
	}
	if f.Type == wire.TypeCancel {
		s.core.Submit(core.Request{Kind: wire.TypeCancel, Conn: c, ID: f.ID, Admin: c.admin, Owner: f.Owner})
		return true
	}
	// Releases are never refused for a principal's rate or in-flight
	// quota: giving back is what a principal at its limits should do.
	release := f.Type == wire.TypeRelease || f.Type == wire.TypeReleaseOwner
	if !release && c.overRate(f.ID) {
		return true
	}
	if dup, full := c.begin(f.ID, f.Type == wire.TypeAcquire, release); dup {
		c.fatalErr(wire.CodeDuplicateID, "request id already in flight")
		return false
	} else if full != 0 {
		c.send(&wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: full})
		return true
	}
	p, ok := c.authorize(f)
	if !ok {
		return true
	}
	s.core.Submit(core.Request{Kind: f.Type, Conn: c, ID: f.ID, Admin: c.admin, Owner: f.Owner, Wait: f.Wait, Lease: f.Lease,
		Token: f.Token, Key: string(f.Key), At: time.Now(), Principal: p.principalFor(f.Type)})
	return true
}
