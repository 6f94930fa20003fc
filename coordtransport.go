package ticketing

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ticketing-io/ticketing/internal/coordlink"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// The coordination SDK rides on the broker's connection layer through
// package coordlink (its doc says why it is not public API).
func init() {
	coordlink.Open = func(x any) (coordlink.Transport, bool) {
		b, ok := x.(*Broker)
		if !ok || b == nil {
			return nil, false
		}
		return coordTransport{b}, true
	}
	coordlink.Connect = func(addrs string, o coordlink.Options) (coordlink.Transport, error) {
		opts := []Option{WithToken(o.Token), func(c *config) { c.tlsRaw = o.TLS }}
		if o.Dialer != nil {
			opts = append(opts, WithDialer(o.Dialer))
		}
		if o.DialTimeout != 0 {
			opts = append(opts, WithDialTimeout(o.DialTimeout))
		}
		if o.Logger != nil {
			opts = append(opts, WithLogger(o.Logger))
		}
		b, err := Connect(addrs, opts...)
		if err != nil {
			return nil, err
		}
		return coordTransport{b}, nil
	}
}

// coordTransport is a Broker seen as a coordlink.Transport.
type coordTransport struct{ b *Broker }

func (t coordTransport) Shared(ctx context.Context) (coordlink.Conn, error) {
	c, err := t.b.getConn(ctx, false)
	if err != nil {
		return nil, connectError("connect", "", false, err)
	}
	return c, nil
}

func (t coordTransport) Dedicated(ctx context.Context, onEvent func(wire.Frame)) (coordlink.Conn, error) {
	c, err := t.b.dialDedicated(ctx, onEvent)
	if err != nil {
		return nil, connectError("connect", "", false, err)
	}
	return c, nil
}

func (t coordTransport) Subscribe(fn func(coordlink.Conn, wire.Frame)) func() {
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.coordSubID++
	id := b.coordSubID
	if b.coordSubs == nil {
		b.coordSubs = make(map[uint64]func(coordlink.Conn, wire.Frame))
	}
	b.coordSubs[id] = fn
	return func() {
		b.mu.Lock()
		delete(b.coordSubs, id)
		b.mu.Unlock()
	}
}

func (t coordTransport) Logger() *slog.Logger { return t.b.cfg.logger }

func (t coordTransport) Close() error { return t.b.Close() }

// coordEvent implements connHooks: a notification with id 0 on the shared
// connection goes to every subscribed session (each takes its own).
func (b *Broker) coordEvent(c *conn, f wire.Frame) {
	b.mu.Lock()
	subs := make([]func(coordlink.Conn, wire.Frame), 0, len(b.coordSubs))
	for _, fn := range b.coordSubs {
		subs = append(subs, fn)
	}
	b.mu.Unlock()
	for _, fn := range subs {
		fn(c, f)
	}
}

// dedicatedHooks are the hooks of a dedicated coordination connection: its
// notifications go to its one session; it carries no ticket acquires.
type dedicatedHooks struct {
	*Broker
	onEvent func(wire.Frame)
}

func (h dedicatedHooks) coordEvent(_ *conn, f wire.Frame) {
	if h.onEvent != nil {
		h.onEvent(f)
	}
}

// dialDedicated dials a connection of its own to the leader, in the
// broker's dial order with its stagger, leader following and backoff, until
// ctx ends. A refusal that every listed server gave (a wrong port, TLS on
// one side only, a refused token) is returned at once. The connection is
// ended when the broker is torn down.
func (b *Broker) dialDedicated(ctx context.Context, onEvent func(wire.Frame)) (*conn, error) {
	hooks := dedicatedHooks{Broker: b, onEvent: onEvent}
	failures, follows := 0, 0
	failed := logLimiter{every: time.Second}
	for {
		b.mu.Lock()
		if b.closed || b.torn {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		b.mu.Unlock()
		c, _ := b.dialRoundWith(ctx, b.dialOrder(""), &follows, &failed, hooks)
		if c != nil {
			b.mu.Lock()
			if b.torn {
				b.mu.Unlock()
				c.fail(&connFailure{kind: failClosed, addr: c.addr})
				return nil, ErrClosed
			}
			b.dedicated[c] = struct{}{}
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				<-c.done
				b.mu.Lock()
				delete(b.dedicated, c)
				b.mu.Unlock()
			}()
			return c, nil
		}
		b.mu.Lock()
		refused, last := b.refusedByAll(), b.lastErr
		b.mu.Unlock()
		if refused != nil {
			return nil, refused
		}
		if ctx.Err() != nil {
			return nil, &waitError{ctx: ctx.Err(), last: last}
		}
		failures++
		follows = 0
		t := time.NewTimer(b.backoff(failures))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, &waitError{ctx: ctx.Err(), last: last}
		case <-b.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// Call implements coordlink.Conn.
func (c *conn) Call(ctx context.Context, stop <-chan struct{}, op uint8, body *wire.Coord, note func(wire.Frame), watch bool) (wire.Frame, time.Time, error) {
	cl := newCall(wire.TypeCoord, "")
	cl.op, cl.note, cl.watch = op, note, watch
	cl.large = len(body.Data) > largeRequest
	// From the first coordination request on, answers may be longer than
	// a ticket frame (a semaphore's data, up to 1 MiB).
	c.r.AllowCoordReplies()
	if err := c.start(ctx, cl, wire.CoordFrame(false, 0, op, 0, body)); err != nil {
		if errors.Is(err, errConnGone) || errors.Is(err, errClosing) {
			return wire.Frame{}, time.Time{}, coordlink.ErrNotSent
		}
		return wire.Frame{}, time.Time{}, err
	}
	var a answer
	select {
	case a = <-cl.res:
	case <-ctx.Done():
		if got := c.abandon(cl); got == nil {
			return wire.Frame{}, cl.sent, ctx.Err()
		} else {
			a = *got
		}
	case <-stop:
		if got := c.abandon(cl); got == nil {
			return wire.Frame{}, cl.sent, coordlink.ErrLost
		} else {
			a = *got
		}
	}
	if a.fail != nil {
		return wire.Frame{}, cl.sent, coordlink.ErrLost
	}
	if a.f.Type == wire.TypeCapacity {
		return wire.Frame{}, cl.sent, &CapacityError{Addr: c.addr, Reason: CapacityReason(a.f.Reason)}
	}
	return a.f, cl.sent, nil
}

// Done implements coordlink.Conn.
func (c *conn) Done() <-chan struct{} { return c.done }

// Failure implements coordlink.Conn.
func (c *conn) Failure() error {
	f := c.failureCause()
	if f == nil {
		return nil
	}
	if f.explained() || f.cause == nil {
		return errors.New(f.what())
	}
	return errors.New(f.what() + ": " + detailOf(f.cause))
}

// EndedByServer implements coordlink.Conn.
func (c *conn) EndedByServer() bool {
	f := c.failureCause()
	return f != nil && f.kind == failServerError
}

// Sessions implements coordlink.Conn.
func (c *conn) Sessions() bool { return c.sessions }

// Close implements coordlink.Conn: it ends a dedicated connection. The
// broker's shared connection is never ended by the SDK.
func (c *conn) Close() {
	if _, ok := c.hooks.(dedicatedHooks); ok {
		c.fail(&connFailure{kind: failClosed, addr: c.addr})
	}
}
