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

	"github.com/ticketing-io/ticketing/internal/wire"
)

// errLinkLost: the connection ended before the answer; the caller decides
// whether the request is safe to send again.
var errLinkLost = errors.New("coordination: connection lost")

// link is one connection to the leader speaking K and T frames.
type link struct {
	nc net.Conn

	wmu sync.Mutex // one writer at a time

	mu      sync.Mutex
	next    uint32
	calls   map[uint32]chan wire.Frame  // final answers, by request id
	notes   map[uint32]func(wire.Frame) // Queued and Changed, by request id
	onEvent func(wire.Frame)            // notifications with id 0
	err     error
	done    chan struct{}
}

// dialLeader connects to the leader: it tries the addresses in turn and
// follows M (not the leader) to the address it names, until ctx ends.
func dialLeader(ctx context.Context, cfg *config, onEvent func(wire.Frame)) (*link, error) {
	var last error
	delay := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		for i := 0; i < len(cfg.addrs); i++ {
			addr := cfg.addrs[i]
			for hops := 0; hops < 3 && addr != ""; hops++ {
				l, leader, err := dialOne(ctx, cfg, addr, onEvent)
				if err == nil {
					return l, nil
				}
				last = err
				if errors.Is(err, ErrUnauthenticated) {
					return nil, err // retrying cannot help
				}
				addr = leader
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v (last error: %v)", ErrUnavailable, ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// dialOne says hello to addr; on M it returns the leader's address.
func dialOne(ctx context.Context, cfg *config, addr string, onEvent func(wire.Frame)) (*link, string, error) {
	d := net.Dialer{Timeout: cfg.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
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
	nc.SetDeadline(time.Now().Add(cfg.dialTimeout))
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(cfg.token)})); err != nil {
		nc.Close()
		return nil, "", err
	}
	r := wire.NewReader(nc)
	var f wire.Frame
	if err := r.Next(&f); err != nil {
		nc.Close()
		return nil, "", err
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
	l := &link{nc: nc, calls: make(map[uint32]chan wire.Frame), notes: make(map[uint32]func(wire.Frame)),
		onEvent: onEvent, done: make(chan struct{})}
	go l.readLoop(r, time.Duration(f.Interval)*time.Millisecond)
	return l, "", nil
}

func (l *link) readLoop(r *wire.Reader, interval time.Duration) {
	silence := 3 * max(interval, time.Second)
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
			l.fail(fmt.Errorf("the server ended the connection: E %d: %s", f.Code, f.Text))
			return
		}
	}
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

func (l *link) write(f *wire.Frame) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
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
	ch := make(chan wire.Frame, 1)
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return 0, wire.Coord{}, errLinkLost
	}
	l.next++
	id := l.next
	l.calls[id] = ch
	if note != nil {
		l.notes[id] = note
	}
	l.mu.Unlock()
	if err := l.write(wire.CoordFrame(false, id, op, 0, body)); err != nil {
		l.fail(err)
		return 0, wire.Coord{}, errLinkLost
	}
	select {
	case f := <-ch:
		var c wire.Coord
		if err := wire.DecodeCoord(&f, &c); err != nil {
			l.fail(err)
			return 0, wire.Coord{}, errLinkLost
		}
		return f.Code, c, nil
	case <-l.done:
		return 0, wire.Coord{}, errLinkLost
	case <-ctx.Done():
		l.mu.Lock()
		delete(l.calls, id)
		delete(l.notes, id)
		l.mu.Unlock()
		return 0, wire.Coord{}, ctx.Err()
	}
}
