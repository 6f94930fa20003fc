// Package cutproxy is a TCP proxy for tests that cuts a database connection
// at a chosen moment of a chosen statement: before the statement reaches the
// server, after the server has run it but before its reply reaches the
// client, or just after the reply. It stands in for a network failure,
// which cannot be made real on demand; the drivers and servers on both
// sides are real.
//
// The statement is recognised by its text in the client's bytes (case
// insensitive), which works for PostgreSQL's and MySQL's text protocols:
// arm it with a word that no other statement of the test contains, such as
// "commit".
//
// It can also hold connections (HoldAfter): accept them and forward
// nothing, as a Raft peer sees a server whose network lost the route.
package cutproxy

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Phase is when a cut happens relative to the matched statement.
type Phase int

const (
	// Before: the statement is not forwarded; both sides are closed.
	Before Phase = iota + 1
	// During: the statement is forwarded, the server's first reply bytes
	// after it (proof that the server ran it) are dropped, and both sides
	// are closed.
	During
	// After: the statement and the server's first reply bytes after it are
	// forwarded, then both sides are closed.
	After
)

func (p Phase) String() string {
	switch p {
	case Before:
		return "before"
	case During:
		return "during"
	case After:
		return "after"
	}
	return "Phase(?)"
}

// Proxy forwards connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	match []byte // lower case; nil when not armed
	phase Phase
	fired chan struct{}
	conns map[*link]struct{}
	wg    sync.WaitGroup

	holding bool       // HoldAfter: connections past passes are held
	passes  int        // connections still forwarded before holding starts
	held    []net.Conn // accepted and never forwarded
}

// Start listens on a free loopback port and forwards every connection to
// target until tb ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("cutproxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port, to put in the client's DSN.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAt arms the proxy: the next client bytes, on any connection, that
// contain match (case-insensitive) are cut at phase. The returned channel
// is closed when the cut has happened.
func (p *Proxy) CutAt(phase Phase, match string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = bytes.ToLower([]byte(match))
	p.phase = phase
	p.fired = make(chan struct{})
	return p.fired
}

// HoldAfter forwards the next n new connections, then holds every later
// one: accepted, never forwarded nor read, as a network that lost the
// route looks to a peer that is already connected. Connections already
// forwarded are left alone. Release ends the hold.
func (p *Proxy) HoldAfter(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding, p.passes = true, n
}

// Release closes the held connections and forwards new ones again.
func (p *Proxy) Release() {
	p.mu.Lock()
	held := p.held
	p.holding, p.held = false, nil
	p.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
}

// Held is how many connections are held now.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Close stops accepting and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Release()
	p.mu.Lock()
	for l := range p.conns {
		l.cut()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

type link struct {
	client, server net.Conn
	once           sync.Once

	mu    sync.Mutex
	reply Phase // During or After: what to do with the next server bytes
	fired chan struct{}
}

func (l *link) cut() {
	l.once.Do(func() {
		l.client.Close()
		l.server.Close()
	})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		hold := p.holding && p.passes == 0
		if p.holding && p.passes > 0 {
			p.passes--
		}
		if hold {
			p.held = append(p.held, c)
		}
		p.mu.Unlock()
		if hold {
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.up(l)
		go p.down(l)
	}
}

func (p *Proxy) forget(l *link) {
	l.cut()
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// up pumps client bytes to the server, watching for the armed statement.
func (p *Proxy) up(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the previous read, for a match split across reads
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			hit := p.match != nil && bytes.Contains(bytes.ToLower(append(tail, chunk...)), p.match)
			var phase Phase
			var fired chan struct{}
			if hit {
				phase, fired = p.phase, p.fired
				p.match = nil
			}
			if keep := len(p.match) - 1; keep > 0 && len(chunk) > 0 {
				tail = append(tail[:0], chunk[max(0, len(chunk)-keep):]...)
			}
			p.mu.Unlock()
			if hit && phase == Before {
				l.cut()
				close(fired)
				return
			}
			if hit {
				l.mu.Lock()
				l.reply, l.fired = phase, fired
				l.mu.Unlock()
			}
			if _, werr := l.server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down pumps server bytes to the client, cutting after a matched statement.
func (p *Proxy) down(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	buf := make([]byte, 64<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			l.mu.Lock()
			reply, fired := l.reply, l.fired
			l.reply = 0
			l.mu.Unlock()
			switch reply {
			case During:
				l.cut()
				close(fired)
				return
			case After:
				_, _ = l.client.Write(buf[:n])
				l.cut()
				close(fired)
				return
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, a reset or a cut: the link is over
		}
	}
}
