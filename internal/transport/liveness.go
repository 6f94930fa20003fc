package transport

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Liveness: the server pings at the interval its hello answer announced and
// the client answers each ping; 3 intervals without a byte from the server
// end the connection. A server that announces interval 0 sends no pings:
// the client then pings it at its own interval (Config.ClientPing) and the
// same silence bound applies. Everything that decides when a ping is sent
// or a connection is given up for silence is in this file.

// pingOwn makes the client ping the server itself when the hello answer
// announced no ping interval: without pings of its own, a frozen server
// would hold every call and the connection forever.
func (c *Conn) pingOwn(interval time.Duration) {
	if c.interval <= 0 {
		c.interval = interval
		c.ownPing = true
		c.idleInterval = 0
	}
}

// silence is how long the server may stay silent before a busy connection
// is considered dead: 3 ping intervals.
func (c *Conn) silence() time.Duration { return 3 * c.interval }

// silenceLocked is the silence bound that applies now: 3 idle intervals
// while the connection is idle (nothing pending, never a coordination
// request) and the server pings it at its idle interval, else silence.
// c.mu is held.
func (c *Conn) silenceLocked() time.Duration {
	if c.idleInterval > 0 && len(c.pending) == 0 && !c.coord {
		return 3 * c.idleInterval
	}
	return c.silence()
}

// AnswerGrace is how long a request waits for its final answer on this
// live connection (an acquire: past its wait) before giving up on it: 3
// ping intervals, at least the configured answer grace.
func (c *Conn) AnswerGrace() time.Duration { return max(c.silence(), c.grace) }

// pinged handles a ping (answered with a pong) or a pong from the server.
// Receiving either needs nothing more: every byte read renews the silence
// deadline (liveConn).
func (c *Conn) pinged(f *wire.Frame) {
	if f.Type != wire.TypePing {
		return
	}
	c.mu.Lock()
	if c.failure == nil {
		c.wbuf = wire.Append(c.wbuf, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
	}
	c.mu.Unlock()
	c.signal()
}

// pinger sends the client's own pings from the writer, when the server
// sends none; its tick is nil otherwise.
type pinger struct {
	c      *Conn
	ticker *time.Ticker
	tick   <-chan time.Time
	nonce  uint64
}

func (c *Conn) newPinger() *pinger {
	p := &pinger{c: c}
	if c.ownPing {
		p.ticker = time.NewTicker(c.interval)
		p.tick = p.ticker.C
	}
	return p
}

// ping queues the next ping for the writer.
func (p *pinger) ping() {
	p.nonce++
	c := p.c
	c.mu.Lock()
	if c.failure == nil {
		c.wbuf = wire.Append(c.wbuf, &wire.Frame{Type: wire.TypePing, Nonce: p.nonce})
	}
	c.mu.Unlock()
}

func (p *pinger) stop() {
	if p.ticker != nil {
		p.ticker.Stop()
	}
}

// liveConn is a connection whose every read, once its owner is set, first
// moves the read deadline to the silence bound from now: liveness is bytes,
// not frames. A server sending a large answer on a slow link is alive while
// its bytes arrive, though its pings wait behind that answer.
type liveConn struct {
	net.Conn
	owner atomic.Pointer[Conn]
}

func (l *liveConn) Read(p []byte) (int, error) {
	if c := l.owner.Load(); c != nil {
		c.renewReadDeadline()
	}
	return l.Conn.Read(p)
}

// renewReadDeadline gives the server the silence bound from now to send its
// next byte; after a failed write, only what is left of the drain. Under mu,
// so that a failed write's shorter drain deadline is never overwritten by a
// later one.
func (c *Conn) renewReadDeadline() {
	c.mu.Lock()
	c.quiet = c.silenceLocked()
	dl := time.Now().Add(c.quiet)
	if c.werr != nil {
		dl = c.drainBy
	}
	c.nc.SetReadDeadline(dl)
	c.mu.Unlock()
}
