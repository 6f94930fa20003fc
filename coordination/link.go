package coordination

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/hellodiag"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// errLinkLost: the connection ended before the answer; the caller decides
// whether the request is safe to send again.
var errLinkLost = errors.New("coordination: connection lost")

// link is one connection to the leader speaking K and T frames.
type link struct {
	nc net.Conn

	// wturn is the turn to write, one writer at a time: a channel rather
	// than a mutex so that a call can stop waiting for its turn when its
	// context ends (a frame that cannot be written, on a link that stopped
	// reading, would otherwise hold it up to the write deadline).
	wturn chan struct{}

	mu      sync.Mutex
	next    uint32
	calls   map[uint32]chan wire.Frame  // final answers, by request id
	notes   map[uint32]func(wire.Frame) // Queued and Changed, by request id
	onEvent func(wire.Frame)            // notifications with id 0
	err     error
	done    chan struct{}
	// detached is closed by the session once it has let go of this
	// connection (after done), so that a request waiting to be sent again
	// finds the next connection, not this one.
	detached chan struct{}
}

// dialLeader connects to the leader: it tries the addresses in turn and
// follows M (not the leader) to the address it names, until ctx ends. When
// every address is a peer that is not a Ticketing server (a wrong port) and
// none has ever answered this client, it says so at once.
func dialLeader(ctx context.Context, cfg *config, onEvent func(wire.Frame)) (*link, error) {
	var last error
	delay := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		foreign := 0
		for i := 0; i < len(cfg.addrs); i++ {
			addr := cfg.addrs[i]
			for hops := 0; hops < 3 && addr != ""; hops++ {
				l, leader, err := dialOne(ctx, cfg, addr, onEvent)
				if err == nil {
					cfg.served.Store(true)
					return l, nil
				}
				last = err
				if errors.Is(err, ErrUnauthenticated) {
					return nil, err // retrying cannot help
				}
				var wp *wrongPeerError
				if errors.As(err, &wp) && hops == 0 {
					foreign++
				}
				addr = leader
			}
		}
		// Once a server has answered, a peer closing mid-hello is a server
		// restarting, not a wrong port: keep trying then.
		if foreign == len(cfg.addrs) && !cfg.served.Load() {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v (last error: %v)", ErrUnavailable, ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// helloSilence is how long a silent answer to the hello is waited for
// before the address is probed for another protocol.
const helloSilence = time.Second

// wrongPeerError: the peer at an address does not speak the Ticketing
// protocol as configured (another service, TLS on one side only).
type wrongPeerError struct{ msg string }

func (e *wrongPeerError) Error() string { return e.msg }

// helloFailure explains why no answer to the hello could be read, in the
// Ticketing client's words (package hellodiag).
func helloFailure(ctx context.Context, cfg *config, addr string, err error, first []byte) error {
	tlsOn := cfg.tls != nil
	var we *wire.Error
	switch {
	case hellodiag.LooksLikeHTTP(first):
		return &wrongPeerError{fmt.Sprintf("%s is an HTTP server, not a Ticketing server: it answered the hello with %q; ticketd's metrics port (5227 by default) speaks HTTP; clients use the client port (5225 by default)", addr, first)}
	case errors.As(err, &we) && !tlsOn && hellodiag.LooksLikeTLS(first):
		return &wrongPeerError{fmt.Sprintf("the server %s uses TLS: it answered the plain hello with a TLS record; this client connects without TLS, configure it with WithTLSConfig", addr)}
	case errors.As(err, &we):
		return &wrongPeerError{fmt.Sprintf("the server %s answered the hello with bytes that are not a Ticketing frame (%q: %v); is it a Ticketing server, and does it use TLS?", addr, first, err)}
	case len(first) == 0 && hellodiag.ClosedEarly(err) && !tlsOn:
		if hellodiag.SpeaksTLS(ctx, addr) {
			return &wrongPeerError{fmt.Sprintf("the server %s uses TLS: it closed the connection on the plain hello (%v) and answers a TLS handshake; this client connects without TLS, configure it with WithTLSConfig", addr, err)}
		}
		if name, hint := hellodiag.Foreign(ctx, addr); name != "" {
			return &wrongPeerError{fmt.Sprintf("%s is %s, not a Ticketing server: it did not answer the hello but answers that protocol; %s", addr, name, hint)}
		}
		return &wrongPeerError{fmt.Sprintf(hellodiag.ClosedWithoutAnswer, addr, err)}
	}
	return fmt.Errorf("no answer to the hello from %s: %w", addr, err)
}

// dialOne says hello to addr; on M it returns the leader's address.
func dialOne(ctx context.Context, cfg *config, addr string, onEvent func(wire.Frame)) (*link, string, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	var nc net.Conn
	var err error
	if cfg.dialer != nil {
		nc, err = cfg.dialer(dctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(dctx, "tcp", addr)
	}
	cancel()
	if err != nil {
		return nil, "", err
	}
	if cfg.tls != nil {
		tc := cfg.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = strings.Cut(addr, ":")
		}
		tnc := tls.Client(nc, tc)
		if err := tnc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, "", err
		}
		nc = tnc
	}
	// The hello is bounded by the dial timeout and by ctx: a server that
	// never answers (or a port that is not a Ticketing server) must not keep
	// the caller past its context.
	hd := time.Now().Add(cfg.dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(hd) {
		hd = d
	}
	nc.SetDeadline(hd)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(cfg.token)})); err != nil {
		nc.Close()
		return nil, "", err
	}
	first := &hellodiag.FirstBytes{R: nc}
	r := wire.NewReader(first)
	var f wire.Frame
	// A peer silent for helloSilence is probed, on other connections, for
	// a protocol it does speak (an HTTP server waits for a whole request
	// line), so that a wrong port is named at once, as the Ticketing client
	// does; a Ticketing server answers long before.
	if time.Until(hd) > helloSilence && cfg.tls == nil {
		nc.SetReadDeadline(time.Now().Add(helloSilence))
		err := r.Next(&f)
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() && first.Len() == 0 && ctx.Err() == nil {
			if name, hint := hellodiag.Foreign(ctx, addr); name != "" {
				nc.Close()
				return nil, "", &wrongPeerError{fmt.Sprintf("%s is %s, not a Ticketing server: it did not answer the hello but answers that protocol; %s", addr, name, hint)}
			}
			nc.SetReadDeadline(hd)
			err = r.Next(&f)
		}
		if err != nil {
			nc.Close()
			return nil, "", helloFailure(ctx, cfg, addr, err, first.Bytes())
		}
	} else if err := r.Next(&f); err != nil {
		nc.Close()
		return nil, "", helloFailure(ctx, cfg, addr, err, first.Bytes())
	}
	switch f.Type {
	case wire.TypeReady:
	case wire.TypeNotLeader:
		nc.Close()
		return nil, string(f.Text), fmt.Errorf("%s is not the leader", addr)
	case wire.TypeError:
		nc.Close()
		if f.Code == uint16(wire.CodeUnauthenticated) {
			return nil, "", fmt.Errorf("%w: %s refused the client token: %s (the token is set with WithToken)", ErrUnauthenticated, addr, f.Text)
		}
		return nil, "", fmt.Errorf("%s refused the hello: %s", addr, f.Text)
	default:
		nc.Close()
		return nil, "", fmt.Errorf("%s answered the hello with %s", addr, f.Type)
	}
	nc.SetDeadline(time.Time{})
	r.AllowCoordFrames()
	l := &link{nc: nc, wturn: make(chan struct{}, 1), calls: make(map[uint32]chan wire.Frame), notes: make(map[uint32]func(wire.Frame)),
		onEvent: onEvent, done: make(chan struct{}), detached: make(chan struct{})}
	go l.readLoop(r, time.Duration(f.Interval)*time.Millisecond)
	return l, "", nil
}

func (l *link) readLoop(r *wire.Reader, interval time.Duration) {
	// Three ping intervals of silence (docs/protocol.md, Liveness); the
	// floor keeps a very short interval from cutting a busy link.
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	silence := 3 * max(interval, 100*time.Millisecond)
	for {
		l.nc.SetReadDeadline(time.Now().Add(silence))
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			l.fail(err)
			return
		}
		switch f.Type {
		case wire.TypePing:
			_ = l.write(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		case wire.TypeCoordReply:
			f.Text = append([]byte(nil), f.Text...)
			l.deliver(f)
		case wire.TypeNotLeader:
			l.fail(fmt.Errorf("the server is not the leader any more (leader %q)", f.Text))
			return
		case wire.TypeError:
			l.fail(&serverEndedError{code: f.Code, text: string(f.Text)})
			return
		}
	}
}

// serverEndedError: the server ended the connection with E (a protocol
// error it blames on the client, such as a frame it could not read).
type serverEndedError struct {
	code uint16
	text string
}

func (e *serverEndedError) Error() string {
	return fmt.Sprintf("the server ended the connection: E %d: %s", e.code, e.text)
}

// endedByServer reports whether the server ended l with E: a request in
// flight may be what it refused.
func (l *link) endedByServer() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var se *serverEndedError
	return errors.As(l.err, &se)
}

// lostErr is why the connection ended (nil while open).
func (l *link) lostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *link) deliver(f wire.Frame) {
	l.mu.Lock()
	if f.Op == wire.CoordQueued || f.Op == wire.CoordChanged {
		fn := l.notes[f.ID]
		if f.Op == wire.CoordChanged {
			delete(l.notes, f.ID) // one-shot
		}
		l.mu.Unlock()
		if fn != nil {
			fn(f)
		}
		return
	}
	if f.ID == 0 {
		l.mu.Unlock()
		if l.onEvent != nil {
			l.onEvent(f)
		}
		return
	}
	ch := l.calls[f.ID]
	delete(l.calls, f.ID)
	l.mu.Unlock()
	if ch != nil {
		ch <- f
	}
}

// write writes f when its turn comes.
func (l *link) write(f *wire.Frame) error {
	select {
	case l.wturn <- struct{}{}:
	case <-l.done:
		return errLinkLost
	}
	defer func() { <-l.wturn }()
	return l.writeTurn(f)
}

// writeTurn writes f; the caller has the turn.
func (l *link) writeTurn(f *wire.Frame) error {
	l.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := l.nc.Write(wire.Append(nil, f))
	return err
}

func (l *link) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
		close(l.done)
	}
	l.mu.Unlock()
	l.nc.Close()
}

func (l *link) close() { l.fail(ErrClosed) }

// call sends a K request and waits for its final answer. note, if set,
// receives the request's Queued and Changed notifications. A lost
// connection is errLinkLost.
func (l *link) call(ctx context.Context, op uint8, body *wire.Coord, note func(wire.Frame)) (uint16, wire.Coord, error) {
	st, ans, _, err := l.callSent(ctx, op, body, note)
	return st, ans, err
}

// callSent is call that also returns when the request was sent: the
// monotonic time read before its first byte was written, which precedes
// the server's receipt (the session's deadline counts from it).
func (l *link) callSent(ctx context.Context, op uint8, body *wire.Coord, note func(wire.Frame)) (uint16, wire.Coord, time.Time, error) {
	if err := checkSizes(op, body); err != nil {
		return 0, wire.Coord{}, time.Time{}, err
	}
	ch := make(chan wire.Frame, 1)
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return 0, wire.Coord{}, time.Time{}, errLinkLost
	}
	l.next++
	id := l.next
	l.calls[id] = ch
	if note != nil {
		l.notes[id] = note
	}
	l.mu.Unlock()
	forget := func() {
		l.mu.Lock()
		delete(l.calls, id)
		delete(l.notes, id)
		l.mu.Unlock()
	}
	// The call waits for its turn to write, and for the write, only while
	// ctx lasts. Once it has the turn its frame goes out whole, in the
	// background if ctx ends meanwhile: the stream stays whole, and
	// whatever is written later (a withdrawal of this acquire, say) comes
	// after it.
	select {
	case l.wturn <- struct{}{}:
	case <-l.done:
		forget()
		return 0, wire.Coord{}, time.Time{}, errLinkLost
	case <-ctx.Done():
		forget()
		return 0, wire.Coord{}, time.Time{}, ctx.Err() // nothing was sent
	}
	sent := time.Now()
	written := make(chan error, 1)
	go func() {
		err := l.writeTurn(wire.CoordFrame(false, id, op, 0, body))
		<-l.wturn
		if err != nil {
			l.fail(err)
		}
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			return 0, wire.Coord{}, sent, errLinkLost
		}
	case <-ctx.Done():
		forget()
		return 0, wire.Coord{}, sent, ctx.Err()
	}
	select {
	case f := <-ch:
		var c wire.Coord
		if err := wire.DecodeCoord(&f, &c); err != nil {
			l.fail(err)
			return 0, wire.Coord{}, sent, errLinkLost
		}
		return f.Code, c, sent, nil
	case <-l.done:
		return 0, wire.Coord{}, sent, errLinkLost
	case <-ctx.Done():
		forget()
		return 0, wire.Coord{}, sent, ctx.Err()
	}
}
