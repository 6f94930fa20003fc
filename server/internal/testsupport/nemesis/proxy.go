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
	// Rate, when above 0, limits each direction of each connection to
	// that many bytes a second: a slow link.
	Rate int
	// Stall forwards nothing while set; connections stay open (a silent
	// peer: packets lost until the link comes back).
	Stall bool
	// Refuse closes the listening socket, so that new connections are
	// refused by the kernel (RST) as for a port nobody listens on; it
	// is opened again when Refuse is cleared. With Cut: the link is down.
	Refuse bool
}

// Proxy is a fault-injecting TCP proxy: every connection accepted on ln is
// forwarded to target through dial. Its mode can be changed at any time;
// Cut closes every open connection.
type Proxy struct {
	Name   string
	addr   string
	listen func() (net.Listener, error)
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	mode    LinkMode
	ln      net.Listener  // nil while refusing
	changed chan struct{} // closed and replaced on every mode change
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy starts forwarding connections accepted on a listener from listen
// to target through dial. listen is called again to stop refusing.
func NewProxy(name string, listen func() (net.Listener, error), target string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Proxy, error) {
	ln, err := listen()
	if err != nil {
		return nil, err
	}
	p := &Proxy{Name: name, addr: ln.Addr().String(), listen: listen, target: target, dial: dial, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.serveListener(ln)
	return p, nil
}

func (p *Proxy) serveListener(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.addr }

// Set changes the mode; it applies to open connections too. An error is a
// listener that could not be opened again.
func (p *Proxy) Set(m LinkMode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
	switch {
	case p.closed:
	case m.Refuse && p.ln != nil:
		p.ln.Close()
		p.ln = nil
	case !m.Refuse && p.ln == nil:
		ln, err := p.listen()
		if err != nil {
			return err
		}
		p.serveListener(ln)
	}
	return nil
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
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.Cut()
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

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
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
		// The server is down: reset, as its closed port would have.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
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
	var paced time.Time // with a Rate: when the bytes forwarded so far may all have passed
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(dst) {
				return
			}
			for off := 0; off < n; {
				end := n
				if rate := p.Mode().Rate; rate > 0 {
					// Pieces of about 1/50 s: the link's bytes flow
					// evenly rather than in bursts of a whole chunk.
					end = min(n, off+max(rate/50, 1))
					if now := time.Now(); paced.Before(now) {
						paced = now
					}
					paced = paced.Add(time.Duration(end-off) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(paced)) // the link's speed
				}
				if _, werr := dst.Write(buf[off:end]); werr != nil {
					return
				}
				off = end
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
