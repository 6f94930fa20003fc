package nemesis

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// LinkMode is what a Proxy does to the bytes it forwards.
type LinkMode struct {
	// Delay holds every chunk of bytes for Delay plus a uniform random
	// jitter in [0, Jitter) before forwarding it (per direction, in order):
	// a slow link.
	Delay, Jitter time.Duration
	// Stall forwards nothing while set; connections stay open (a silent
	// peer: packets lost until the link comes back).
	Stall bool
	// Refuse closes new connections at once (with Cut: the link is down).
	Refuse bool
}

// Proxy is a fault-injecting TCP proxy: every connection accepted on ln is
// forwarded to target through dial. Its mode can be changed at any time;
// Cut closes every open connection.
type Proxy struct {
	Name   string
	ln     net.Listener
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	mode    LinkMode
	changed chan struct{} // closed and replaced on every mode change
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy starts forwarding connections from ln to target.
func NewProxy(name string, ln net.Listener, target string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Proxy {
	p := &Proxy{Name: name, ln: ln, target: target, dial: dial, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode; it applies to open connections too.
func (p *Proxy) Set(m LinkMode) {
	p.mu.Lock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Mode is the current mode.
func (p *Proxy) Mode() LinkMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Cut closes every open connection (both sides see a reset or EOF).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	// Wake the pipes waiting in a stall or delay: they see their
	// connection gone.
	close(p.changed)
	p.changed = make(chan struct{})
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.Set(LinkMode{})
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.Mode().Refuse || !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	b, err := p.dial(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		return
	}
	if !p.track(b) {
		b.Close()
		return
	}
	defer p.untrack(b)
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(b, c); done <- struct{}{} }()
	go func() { p.pipe(c, b); done <- struct{}{} }()
	<-done
	// One direction ended: end the other too (a TCP proxy that half-closes
	// would keep a dead peer's connection open).
	c.Close()
	b.Close()
	<-done
}

// pipe copies src to dst chunk by chunk, applying the mode before each write.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(dst) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: serve ends both sides
		}
	}
}

// hold waits as the mode says before a chunk is forwarded. It reports false
// when the connection was closed meanwhile.
func (p *Proxy) hold(dst net.Conn) bool {
	for {
		p.mu.Lock()
		m, changed, closed := p.mode, p.changed, p.closed
		_, open := p.conns[dst]
		p.mu.Unlock()
		if closed || !open {
			return false
		}
		if m.Stall {
			<-changed // wait for the link to come back (or a Cut/Close)
			continue
		}
		if m.Delay > 0 || m.Jitter > 0 {
			d := m.Delay
			if m.Jitter > 0 {
				d += rand.N(m.Jitter)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-changed:
				t.Stop()
				continue // re-read the mode: a stall or heal applies at once
			}
		}
		return true
	}
}
