// Package transport is the Ticketing client's connection layer, beneath
// its two fronts: package ticketing (tickets, admin sessions) and package
// coordination (nodes, sessions, semaphores). It dials the listed servers
// in order with a stagger, runs TLS and the hello (and explains a hello
// that goes unanswered), follows the leader with backoff, keeps each
// connection alive by its pings, and multiplexes requests over it: the
// request table, the in-flight pools, the coalescing writer. Nothing here
// is public API; the fronts re-export the errors defined here.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// failKind says why a connection ended.
type failKind int

const (
	failDrop        failKind = iota // EOF, reset, write error
	failSilent                      // nothing received for 3 ping intervals (3 idle intervals while idle)
	failNotLeader                   // M
	failServerError                 // E
	failProtocol                    // malformed, oversized, unknown or unexpected frame
	failClosed                      // the broker or admin session was closed
)

// Ended is why a connection ended; every request pending on it gets it.
type Ended struct {
	kind  failKind
	addr  string
	hint  string // M: the leader's address, if the server knew it
	Cause error
	quiet time.Duration // failSilent: how long the server was silent
}

// What says in words what happened to the connection.
func (f *Ended) What() string {
	switch f.kind {
	case failSilent:
		return fmt.Sprintf("the server %s sent nothing for %v (3 ping intervals, or idle intervals while nothing was in flight) and the connection was given up", f.addr, f.quiet)
	case failNotLeader:
		if f.hint != "" {
			return fmt.Sprintf("the server %s stopped being the leader (new leader %s) and ended the session", f.addr, f.hint)
		}
		return fmt.Sprintf("the server %s stopped being the leader and ended the session", f.addr)
	case failServerError:
		var se *ServerError
		if errors.As(f.Cause, &se) {
			return fmt.Sprintf("the server %s ended the session with error %q (code %d: %s)", f.addr, se.Code.String(), uint16(se.Code), se.Message)
		}
		return fmt.Sprintf("the server %s ended the session with an error", f.addr)
	case failProtocol:
		return fmt.Sprintf("the server %s sent an invalid frame and the connection was closed", f.addr)
	case failClosed:
		return "the broker was closed"
	}
	return fmt.Sprintf("the connection to %s was lost", f.addr)
}

func (f *Ended) Closed() bool { return f.kind == failClosed }

// ShuttingDown reports whether the server ended the session because it is
// stopping (E 11): a draining leader answers every request it proposed
// before, so an acquire still pending was not granted, or (from a server
// that does not drain) was granted to its owner, which an acquire sent
// again with the same owner gets back (docs/protocol.md, How a connection
// ends).
func (f *Ended) ShuttingDown() bool {
	var se *ServerError
	return f.kind == failServerError && errors.As(f.Cause, &se) && se.Code == ErrorCode(wire.CodeShuttingDown)
}

// Explained reports whether What() already says everything the cause says.
func (f *Ended) Explained() bool {
	return f.kind == failServerError || f.kind == failNotLeader || f.kind == failClosed
}

// ErrConnGone is Start's answer when the connection ended before anything
// was queued: nothing was sent, and the caller may try the next connection.
var ErrConnGone = errors.New("connection gone")

// Answer is what a pending request gets: a final answer frame, or why the
// connection ended.
type Answer struct {
	F    wire.Frame // Key is nil, Text is a private copy
	Fail *Ended
}

// Request is one request waiting for its final answer.
type Request struct {
	typ       wire.Type
	ID        uint32
	Owner     wire.Owner
	Key       string
	Sent      time.Time     // just before its bytes were handed to the writer
	Span      time.Duration // acquire: wait + lease, the longest a grant of it can matter
	Res       chan Answer
	abandoned bool // the caller left; a late G is released (acquire)
	queued    bool // a Q was seen
	// large: a request above largeRequest that holds the connection's
	// large slot until its first answer (under the conn's mu).
	large bool

	// A coordination request (K): its sub-op (which in-flight pool it
	// counts against), and the function that gets its notifications: Queued
	// before the answer, and, when watch is set, the one Changed after a
	// successful answer.
	op    uint8
	note  func(wire.Frame)
	watch bool

	// A streaming admin request (snapshot.save) gets its V status 3 pieces
	// on chunks, in order, before its final answer on res; gone is closed
	// when its caller stops reading them. Both are nil for other requests.
	Chunks chan []byte
	Gone   chan struct{}
}

// NewRequest returns a request of type t (for key, if it has one).
func NewRequest(t wire.Type, key string) *Request {
	return &Request{typ: t, Key: key, Res: make(chan Answer, 1)}
}

// connHooks connect a conn to its owner.
type connHooks interface {
	// lateGrant is called (on the reader goroutine) for a G that answers an
	// acquire whose caller left: the owner must release that exact token.
	lateGrant(key string, token uint64)
	// closingCh is closed when the owner starts closing: acquires waiting
	// for an in-flight slot give up (nothing sent).
	closingCh() <-chan struct{}
	// orphaned is called (once, when the connection ends) for every acquire
	// that was sent on it and got no final answer: a grant it may have
	// received can only be ended by its owner (U) from now on.
	orphaned(key string, owner wire.Owner, until time.Time)
	// coordEvent is called (on the reader goroutine) for a coordination
	// notification that answers no request (T with id 0: a hold lost, a
	// session ended). f.Text is a private copy.
	coordEvent(c *Conn, f wire.Frame)
}

// ErrClosing is start's answer to an acquire that was waiting for an
// in-flight slot when the broker began closing; nothing was sent.
var ErrClosing = errors.New("the broker is closing")

// Conn is one established session: a reader goroutine, a writer goroutine
// that coalesces every queued frame into one write, and the pending table.
type Conn struct {
	nc       net.Conn
	addr     string
	r        *wire.Reader
	interval time.Duration // ping interval from Y
	// idleInterval is the server's idle ping interval (Y with
	// ReadyIdlePings), 0 without: while the connection is idle (nothing
	// pending, never a coordination request) the server pings it this
	// often, and the silence bound is 3 of these.
	idleInterval time.Duration
	nodeID       string
	leader       bool
	maxIn        uint32 // max in-flight per class from Y, 0 = no limit
	sessions     bool   // Y announced coordination sessions multiplexed on one connection
	ownPing      bool   // the server sends no pings (interval 0): we ping it
	grace        time.Duration
	hooks        connHooks
	// In-flight slots, nil = no limit. Acquires and the other requests
	// (release, release-by-owner, describe, admin) have separate pools of
	// maxIn each, as the server counts them (docs/protocol.md): waiting
	// acquires can never take the slots a release needs.
	semAcq   chan struct{}
	semOther chan struct{}
	// largeSlot lets one request above largeRequest at a time be on its
	// way to the server: small frames (pongs, keep-alives, other
	// requests) then wait behind one large frame at most.
	largeSlot chan struct{}
	born      time.Time

	mu      sync.Mutex
	wbuf    []byte
	pending map[uint32]*Request
	watches map[uint32]func(wire.Frame) // coordination watches set by answered describes, by request id
	nextID  uint32
	failure *Ended
	werr    error         // the write that failed; the reader drains what arrived
	settle  chan struct{} // closed when an abandoned acquire gets its answer
	handing int           // late grants taken off pending, not yet handed to the owner
	drainBy time.Time     // with werr: when the reader stops draining
	coord   bool          // a coordination request was sent: never idle again
	quiet   time.Duration // the silence bound last set on the socket

	wsig chan struct{}
	done chan struct{}

	slotWaiters  atomic.Int32 // tests: callers waiting for an in-flight slot
	onLateAnswer func()       // tests: see config.onLateAnswer
}

// dial connects to addr, runs TLS and the hello, and returns a running conn.
// wg tracks the conn's two goroutines.
func dial(ctx context.Context, addr string, cfg *Config, flags uint8, hooks connHooks, wg *sync.WaitGroup) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// No TCP keep-alive: the protocol's pings are the liveness check, and
	// probes every 15 s would cost both ends more than an idle
	// connection's pings do (docs/benchmarks.md, "Idle connections").
	dialFn := (&net.Dialer{KeepAlive: -1}).DialContext
	if cfg.Dialer != nil {
		dialFn = cfg.Dialer
	}
	nc, err := dialFn(ctx, "tcp", addr)
	if err != nil {
		return nil, &helloError{addr: addr, err: fmt.Errorf("cannot connect to %s: %w", addr, err)}
	}
	var ts *tlsState // nil without TLS
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" && !tc.InsecureSkipVerify {
			host, _, _ := net.SplitHostPort(addr)
			tc.ServerName = host
		}
		ts = watchCertRequest(tc)
		tn := tls.Client(nc, tc)
		if err := tn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, tlsHandshakeError(addr, err, ts)
		}
		nc = tn
	}
	live := &liveConn{Conn: nc}
	nc = live
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	h, r, herr := handshake(ctx, nc, addr, cfg.Token, ts, flags|wire.HelloClusterID|wire.HelloIdlePings)
	stop()
	if herr == nil {
		herr = cfg.Pin.check(addr, &h)
	}
	if herr != nil {
		nc.Close()
		return nil, herr
	}
	nc.SetDeadline(time.Time{})
	c := &Conn{
		nc: nc, addr: addr, r: r, interval: h.interval, idleInterval: h.idle, nodeID: h.nodeID, leader: h.leader, maxIn: h.maxIn, sessions: h.sessions,
		hooks: hooks, born: time.Now(), grace: cfg.AnswerGrace, onLateAnswer: cfg.OnLateAnswer,
		pending:   make(map[uint32]*Request),
		watches:   make(map[uint32]func(wire.Frame)),
		wsig:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		largeSlot: make(chan struct{}, 1),
	}
	c.pingOwn(cfg.ClientPing)
	if h.maxIn > 0 {
		c.semAcq = make(chan struct{}, min(h.maxIn, 1<<24))
		c.semOther = make(chan struct{}, min(h.maxIn, 1<<24))
	}
	live.owner.Store(c) // from now on every read renews the silence deadline
	wg.Add(2)
	go c.readLoop(wg)
	go c.writeLoop(wg)
	return c, nil
}

// Dial connects to addr, runs TLS and the hello with flags, and returns a
// running connection of its own (an admin session): nothing follows the
// leader or dials again. wg tracks the connection's two goroutines.
func Dial(ctx context.Context, addr string, cfg *Config, flags uint8, wg *sync.WaitGroup) (*Conn, error) {
	return dial(ctx, addr, cfg, flags, nil, wg)
}

// Addr is the server's address as dialed.
func (c *Conn) Addr() string { return c.addr }

// NodeID is the node id the server sent in its hello answer.
func (c *Conn) NodeID() string { return c.nodeID }

// End closes the connection: every request still pending on it gets a
// closed failure.
func (c *Conn) End() { c.fail(&Ended{kind: failClosed, addr: c.addr}) }

// Ended says why the connection ended, nil while it is open.
func (c *Conn) Ended() *Ended { return c.failureCause() }

// SetLastID makes id the last request id used, so that the next is id+1
// (for tests of the counter's wrap).
func (c *Conn) SetLastID(id uint32) {
	c.mu.Lock()
	c.nextID = id
	c.mu.Unlock()
}

// SlotWaiters is how many callers wait for an in-flight slot (for tests).
func (c *Conn) SlotWaiters() int32 { return c.slotWaiters.Load() }

// writeTimeout bounds one write.
func (c *Conn) writeTimeout() time.Duration { return max(c.silence(), 10*time.Second) }

func (c *Conn) readLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	var f wire.Frame
	for {
		// Every read from the socket renews the deadline (liveConn).
		if err := c.r.Next(&f); err != nil {
			c.mu.Lock()
			quiet := c.quiet
			c.mu.Unlock()
			c.fail(c.readFailure(err, quiet))
			return
		}
		if fl := c.dispatch(&f); fl != nil {
			c.fail(fl)
			return
		}
	}
}

func (c *Conn) readFailure(err error, quiet time.Duration) *Ended {
	c.mu.Lock()
	werr := c.werr
	c.mu.Unlock()
	var we *wire.Error
	switch {
	case werr != nil && !errors.As(err, &we):
		// The write failed first; the reader only drained what had arrived.
		return &Ended{kind: failDrop, addr: c.addr, Cause: werr}
	case errors.As(err, &we):
		return &Ended{kind: failProtocol, addr: c.addr, Cause: err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &Ended{kind: failSilent, addr: c.addr, quiet: quiet, Cause: err}
	case errors.Is(err, io.EOF):
		return &Ended{kind: failDrop, addr: c.addr, Cause: errors.New("closed by the server")}
	}
	return &Ended{kind: failDrop, addr: c.addr, Cause: err}
}

// dispatch handles one received frame; a non-nil result ends the connection.
func (c *Conn) dispatch(f *wire.Frame) *Ended {
	switch f.Type {
	case wire.TypePing, wire.TypePong:
		c.pinged(f)
		return nil
	case wire.TypeNotLeader:
		return &Ended{kind: failNotLeader, addr: c.addr, hint: string(f.Text),
			Cause: &NotLeaderError{Addr: c.addr, LeaderAddr: string(f.Text)}}
	case wire.TypeError:
		return &Ended{kind: failServerError, addr: c.addr,
			Cause: &ServerError{Addr: c.addr, Code: ErrorCode(f.Code), Message: string(f.Text)}}
	case wire.TypeCoordReply:
		if done, fl := c.coordNotice(f); done || fl != nil {
			return fl
		}
	case wire.TypeGranted, wire.TypeNotAcquired, wire.TypeQueued, wire.TypeCancelled, wire.TypeCapacity,
		wire.TypeReleased, wire.TypeNotHeld, wire.TypeInfo, wire.TypeAdminReply, wire.TypeForbidden:
	default:
		return &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("unexpected %s frame from the server", f.Type)}
	}
	c.mu.Lock()
	cl := c.pending[f.ID]
	if cl == nil || !answers(cl.typ, f.Type) {
		c.mu.Unlock()
		if cl == nil {
			return &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("%s frame for request id %d, which is not in flight", f.Type, f.ID)}
		}
		return &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("%s frame answers request id %d, which is a %s", f.Type, f.ID, cl.typ)}
	}
	if f.Type == wire.TypeAdminReply && f.Code == adminwire.StatusChunk {
		if cl.Chunks == nil {
			c.mu.Unlock()
			return &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("a V frame with status %d (a piece of a stream) for request id %d, which does not stream", f.Code, f.ID)}
		}
		if cl.abandoned {
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		// Blocks while the caller's buffer is full: the server waits for us
		// (TCP flow control) rather than either side buffering the stream.
		select {
		case cl.Chunks <- append([]byte(nil), f.Text...):
		case <-cl.Gone:
		case <-c.done:
		}
		return nil
	}
	if f.Type == wire.TypeQueued {
		if cl.queued {
			c.mu.Unlock()
			return &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("second Q frame for request id %d", f.ID)}
		}
		cl.queued = true
		c.mu.Unlock()
		return nil
	}
	delete(c.pending, f.ID)
	c.freeLargeLocked(cl)
	if sem := c.slots(cl.typ, cl.op); sem != nil {
		<-sem
	}
	if cl.watch && !cl.abandoned && f.Type == wire.TypeCoordReply && f.Code == wire.CoordSuccess && c.watches != nil {
		// Registered before the answer is handed over: the watch's Changed
		// can only follow the answer on the connection.
		c.watches[cl.ID] = cl.note
	}
	if cl.abandoned {
		late := f.Type == wire.TypeGranted && cl.typ == wire.TypeAcquire && c.hooks != nil
		if late {
			// Counted with the pending table's change, under mu: Close's
			// drain sees the grant either pending or being handed over,
			// never neither before its release is running.
			c.handing++
		}
		c.mu.Unlock()
		if c.onLateAnswer != nil {
			c.onLateAnswer()
		}
		if late {
			c.hooks.lateGrant(cl.Key, f.Token)
		}
		// After lateGrant: Broker.Close's drain then sees the release running.
		c.mu.Lock()
		if late {
			c.handing--
		}
		if c.settle != nil {
			close(c.settle)
			c.settle = nil
		}
		c.mu.Unlock()
		return nil
	}
	a := Answer{F: *f}
	a.F.Key = nil
	a.F.Text = append([]byte(nil), f.Text...)
	cl.Res <- a
	c.mu.Unlock()
	return nil
}

// answers reports whether an answer of type a may answer a request of type r.
func answers(r, a wire.Type) bool {
	if a == wire.TypeForbidden {
		return r == wire.TypeAcquire || r == wire.TypeRelease || r == wire.TypeDescribe || r == wire.TypeAdmin || r == wire.TypeReleaseOwner
	}
	switch r {
	case wire.TypeAcquire:
		return a == wire.TypeGranted || a == wire.TypeNotAcquired || a == wire.TypeQueued ||
			a == wire.TypeCancelled || a == wire.TypeCapacity
	case wire.TypeRelease:
		return a == wire.TypeReleased || a == wire.TypeNotHeld || a == wire.TypeCapacity
	case wire.TypeDescribe:
		return a == wire.TypeInfo || a == wire.TypeCapacity
	case wire.TypeReleaseOwner:
		return a == wire.TypeReleased || a == wire.TypeNotHeld || a == wire.TypeCapacity
	case wire.TypeAdmin:
		return a == wire.TypeAdminReply || a == wire.TypeCapacity
	case wire.TypeCoord:
		return a == wire.TypeCoordReply || a == wire.TypeCapacity
	}
	return false
}

func (c *Conn) signal() {
	select {
	case c.wsig <- struct{}{}:
	default:
	}
}

// maxWrite bounds the bytes handed to one Write, each under its own write
// deadline: a large coalesced batch on a slow but healthy link is written in
// pieces rather than failing one deadline meant for a few frames.
const maxWrite = 256 << 10

// writeDrain is how long the reader keeps reading after a write failed, so
// that an M, E or final answer the server sent before closing is not lost.
const writeDrain = time.Second

// writeLoop flushes everything queued since the last write, so under load
// many frames share a syscall. When the server sends no pings it also sends
// ours (liveness.go).
func (c *Conn) writeLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	var spare []byte
	p := c.newPinger()
	defer p.stop()
	for {
		select {
		case <-c.wsig:
		case <-p.tick:
			p.ping()
		case <-c.done:
			return
		}
		// Let the goroutines that are ready to send queue their frames
		// first: one write then carries them all. Under load this saves a
		// write syscall per request; alone, it returns at once.
		runtime.Gosched()
		c.mu.Lock()
		buf := c.wbuf
		c.wbuf = spare[:0]
		c.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		for off := 0; off < len(buf); {
			end := min(off+maxWrite, len(buf))
			c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout()))
			if _, err := c.nc.Write(buf[off:end]); err != nil {
				c.writeFailed(err)
				return
			}
			off = end
		}
		if cap(buf) > 256<<10 {
			buf = nil
		}
		spare = buf[:0]
	}
}

// writeFailed stops new requests from using the connection and lets the
// reader drain, for at most writeDrain, what the server sent before the
// failure; the reader then ends the connection.
func (c *Conn) writeFailed(err error) {
	c.mu.Lock()
	if c.failure == nil && c.werr == nil {
		c.werr = err
		c.drainBy = time.Now().Add(writeDrain)
		c.nc.SetReadDeadline(c.drainBy)
	}
	c.mu.Unlock()
}

// fail ends the connection once; every pending caller gets f.
func (c *Conn) fail(f *Ended) {
	c.mu.Lock()
	if c.failure != nil {
		c.mu.Unlock()
		return
	}
	c.failure = f
	pend := c.pending
	c.pending = nil
	for _, cl := range pend {
		c.freeLargeLocked(cl)
	}
	c.watches = nil
	c.wbuf = nil
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
	for _, cl := range pend {
		// Before the caller hears of it: an ErrIndeterminate returned to
		// the caller then always has its release-by-owner under way.
		// An acquire the server's shutdown interrupted is sent again by its
		// caller (Acquire), which releases by owner itself if it cannot.
		if cl.typ == wire.TypeAcquire && !f.Closed() && (!f.ShuttingDown() || cl.abandoned) && c.hooks != nil {
			c.hooks.orphaned(cl.Key, cl.Owner, cl.Sent.Add(cl.Span))
		}
		if !cl.abandoned {
			cl.Res <- Answer{Fail: f}
		}
	}
}

// dead reports whether the connection ended or can no longer send.
func (c *Conn) dead() bool {
	select {
	case <-c.done:
		return true
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.werr != nil
}

// slots is the in-flight pool a request of type t (and coordination sub-op
// op) counts against (nil: no limit, or not counted). A coordination
// acquire counts as an acquire, every other K request as the others do, as
// the server counts them.
func (c *Conn) slots(t wire.Type, op uint8) chan struct{} {
	switch t {
	case wire.TypeAcquire:
		return c.semAcq
	case wire.TypeRelease, wire.TypeReleaseOwner, wire.TypeDescribe, wire.TypeAdmin:
		return c.semOther
	case wire.TypeCoord:
		if op == wire.CoordAcquire {
			return c.semAcq
		}
		return c.semOther
	}
	return nil
}

func (c *Conn) failureCause() *Ended {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

// Start registers cl and queues f for the writer. It returns ErrConnGone if
// the connection ended before anything was queued (nothing was sent) and
// ctx's error if ctx ended while waiting for an in-flight slot. Once start
// returns nil the request may have been sent.
func (c *Conn) Start(ctx context.Context, cl *Request, f *wire.Frame) error {
	sem := c.slots(cl.typ, cl.op)
	if sem != nil {
		var closing <-chan struct{}
		if cl.typ == wire.TypeAcquire && c.hooks != nil {
			closing = c.hooks.closingCh()
		}
		select {
		case sem <- struct{}{}:
		default:
			c.slotWaiters.Add(1)
			select {
			case sem <- struct{}{}:
				c.slotWaiters.Add(-1)
			case <-closing:
				c.slotWaiters.Add(-1)
				return ErrClosing
			case <-ctx.Done():
				c.slotWaiters.Add(-1)
				return ctx.Err()
			case <-c.done:
				c.slotWaiters.Add(-1)
				return ErrConnGone
			}
		}
	}
	large := cl.large
	if large {
		if err := c.takeLarge(ctx); err != nil {
			if sem != nil && !errors.Is(err, ErrConnGone) {
				<-sem
			}
			return err
		}
	}
	c.mu.Lock()
	if c.failure != nil || c.werr != nil {
		failed := c.failure != nil
		c.mu.Unlock()
		if !failed {
			if sem != nil {
				<-sem
			}
			if large {
				<-c.largeSlot
			}
		}
		return ErrConnGone
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		if sem != nil {
			<-sem
		}
		if large {
			<-c.largeSlot
		}
		return err
	}
	for {
		c.nextID++
		if c.nextID == 0 {
			continue
		}
		_, busy := c.pending[c.nextID]
		_, watched := c.watches[c.nextID]
		if !busy && !watched {
			break
		}
	}
	cl.ID = c.nextID
	f.ID = cl.ID
	wasIdle := c.silenceLocked() > c.silence()
	c.pending[cl.ID] = cl
	if f.Type == wire.TypeCoord {
		c.coord = true
	}
	if wasIdle && c.werr == nil {
		// Busy now: the server pings every interval from the moment it
		// reads this request, so silence is measured on that scale again.
		c.quiet = c.silence()
		c.nc.SetReadDeadline(time.Now().Add(c.quiet))
	}
	cl.Sent = time.Now()
	c.wbuf = wire.Append(c.wbuf, f)
	c.mu.Unlock()
	c.signal()
	return nil
}

// largeRequest is the size above which a request takes the connection's
// large slot: on a slow link a 1 MiB frame takes seconds, and frames queued
// behind several of them would wait for all.
const largeRequest = 64 << 10

// takeLarge waits for the connection's large slot. ErrConnGone: the
// connection ended meanwhile.
func (c *Conn) takeLarge(ctx context.Context) error {
	select {
	case c.largeSlot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrConnGone
	}
}

// freeLargeLocked gives the large slot back once cl's request has been
// answered (Q or final: the server has read all of it) or its connection
// ended. c.mu is held.
func (c *Conn) freeLargeLocked(cl *Request) {
	if cl.large {
		cl.large = false
		<-c.largeSlot
	}
}

// AbandonedAcquires reports whether acquires whose callers left still wait
// for their final answer (or a late grant of one is still being handed to
// the owner), and a channel closed when one of them is settled.
func (c *Conn) AbandonedAcquires() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	open := c.handing > 0
	for _, cl := range c.pending {
		if open {
			break
		}
		open = cl.abandoned && cl.typ == wire.TypeAcquire
	}
	if !open {
		return false, nil
	}
	if c.settle == nil {
		c.settle = make(chan struct{})
	}
	return true, c.settle
}

// Abandon is called when cl's caller stops waiting. If cl is still pending
// it is marked abandoned (a late G will be released by the owner) and, for
// an acquire, a C frame is queued; abandon then returns nil. If the answer
// already arrived (or the connection failed), abandon returns it.
func (c *Conn) Abandon(cl *Request) *Answer {
	c.mu.Lock()
	if c.failure == nil && c.pending[cl.ID] == cl {
		cl.abandoned = true
		if cl.typ == wire.TypeAcquire {
			c.wbuf = wire.Append(c.wbuf, &wire.Frame{Type: wire.TypeCancel, ID: cl.ID, Owner: cl.Owner})
		}
		c.mu.Unlock()
		c.signal()
		return nil
	}
	c.mu.Unlock()
	a := <-cl.Res
	return &a
}
