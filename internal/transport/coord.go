package transport

import (
	"context"
	"errors"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// The coordination SDK's use of the client: the shared connection and
// connections of a session's own, notifications with id 0, and K requests.

// Shared returns the client's connection to the leader, waiting for one
// while ctx allows. Its errors are the client's own, as an operation
// "connect" returns them (ErrClosed, ErrUnavailable with what the last
// attempt ran into, a refusal that every server gave, such as a wrong port
// or a refused token).
func (t *Client) Shared(ctx context.Context) (*Conn, error) {
	c, err := t.Leader(ctx, false)
	if err != nil {
		return nil, ConnectError("connect", "", false, err)
	}
	return c, nil
}

// Dedicated dials a connection of its own, as the client dials its shared
// one, until ctx ends; notifications with id 0 on it go to onEvent. The
// connection ends when the client is torn down.
func (t *Client) Dedicated(ctx context.Context, onEvent func(wire.Frame)) (*Conn, error) {
	c, err := t.dialDedicated(ctx, onEvent)
	if err != nil {
		return nil, ConnectError("connect", "", false, err)
	}
	return c, nil
}

// Subscribe registers fn for the notifications with id 0 on the shared
// connection (whichever it is at the time); the result unregisters it.
func (t *Client) Subscribe(fn func(c *Conn, f wire.Frame)) (cancel func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.coordSubID++
	id := t.coordSubID
	if t.coordSubs == nil {
		t.coordSubs = make(map[uint64]func(*Conn, wire.Frame))
	}
	t.coordSubs[id] = fn
	return func() {
		t.mu.Lock()
		delete(t.coordSubs, id)
		t.mu.Unlock()
	}
}

// coordEvent implements connHooks: a notification with id 0 on the shared
// connection goes to every subscribed session (each takes its own).
func (t *Client) coordEvent(c *Conn, f wire.Frame) {
	t.mu.Lock()
	subs := make([]func(*Conn, wire.Frame), 0, len(t.coordSubs))
	for _, fn := range t.coordSubs {
		subs = append(subs, fn)
	}
	t.mu.Unlock()
	for _, fn := range subs {
		fn(c, f)
	}
}

// dedicatedHooks are the hooks of a dedicated coordination connection: its
// notifications go to its one session; it carries no ticket acquires.
type dedicatedHooks struct {
	*Client
	onEvent func(wire.Frame)
}

func (h dedicatedHooks) coordEvent(_ *Conn, f wire.Frame) {
	if h.onEvent != nil {
		h.onEvent(f)
	}
}

// dialDedicated dials a connection of its own to the leader in the one
// dial loop (establish: the dial order with its stagger, leader following
// and backoff), until ctx ends. A refusal that every listed server gave (a
// wrong port, TLS on one side only, a refused token) is returned at once.
// The connection is ended when the client is torn down.
func (t *Client) dialDedicated(ctx context.Context, onEvent func(wire.Frame)) (*Conn, error) {
	// Ended by the client's closing, by a refusal every listed server
	// gave, or by ctx.
	stop := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed || t.torn {
			return ErrClosed
		}
		if err := t.refusedByAll(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return &WaitError{ctx: ctx.Err(), last: t.lastErr}
		}
		return nil
	}
	c, _, err := t.establish(ctx, "", newDialing(), dedicatedHooks{Client: t, onEvent: onEvent}, stop)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.torn {
		t.mu.Unlock()
		c.End()
		return nil, ErrClosed
	}
	t.dedicated[c] = struct{}{}
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		<-c.done
		t.mu.Lock()
		delete(t.dedicated, c)
		t.mu.Unlock()
	}()
	return c, nil
}

// Errors of Conn.Call.
var (
	ErrNotSent = errors.New("the connection ended before the request was sent")
	ErrLost    = errors.New("the connection ended before the answer")
)

// Call sends the K request op with body and waits for its final answer (a T
// frame, or a C frame when the server's in-flight limit refused it: then err
// is a *CapacityError). note, if set, gets the request's Queued
// notifications and, with watch, the one Changed that a successful
// describe's watch sends later; it runs on the connection's reader and must
// not block. sent is the time read just before the request was queued for
// writing (zero when it was not). err is ErrNotSent when nothing was sent,
// ErrLost when the connection ended (or stop was closed) before the answer,
// or ctx's error; a caller that leaves has its late answer dropped.
func (c *Conn) Call(ctx context.Context, stop <-chan struct{}, op uint8, body *wire.Coord, note func(wire.Frame), watch bool) (wire.Frame, time.Time, error) {
	cl := NewRequest(wire.TypeCoord, "")
	cl.op, cl.note, cl.watch = op, note, watch
	cl.large = len(body.Data) > largeRequest
	// From the first coordination request on, answers may be longer than
	// a ticket frame (a semaphore's data, up to 1 MiB).
	c.r.AllowCoordReplies()
	if err := c.Start(ctx, cl, wire.CoordFrame(false, 0, op, 0, body)); err != nil {
		if errors.Is(err, ErrConnGone) || errors.Is(err, ErrClosing) {
			return wire.Frame{}, time.Time{}, ErrNotSent
		}
		return wire.Frame{}, time.Time{}, err
	}
	var a Answer
	select {
	case a = <-cl.Res:
	case <-ctx.Done():
		if got := c.Abandon(cl); got == nil {
			return wire.Frame{}, cl.Sent, ctx.Err()
		} else {
			a = *got
		}
	case <-stop:
		if got := c.Abandon(cl); got == nil {
			return wire.Frame{}, cl.Sent, ErrLost
		} else {
			a = *got
		}
	}
	if a.Fail != nil {
		return wire.Frame{}, cl.Sent, ErrLost
	}
	if a.F.Type == wire.TypeCapacity {
		return wire.Frame{}, cl.Sent, &CapacityError{Addr: c.addr, Reason: CapacityReason(a.F.Reason)}
	}
	return a.F, cl.Sent, nil
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Failure says why the connection ended (nil while it is open).
func (c *Conn) Failure() error {
	f := c.failureCause()
	if f == nil {
		return nil
	}
	if f.Explained() || f.Cause == nil {
		return errors.New(f.What())
	}
	return errors.New(f.What() + ": " + DetailOf(f.Cause))
}

// EndedByServer reports whether the server ended the connection with an
// error frame (E), blaming something the client sent.
func (c *Conn) EndedByServer() bool {
	f := c.failureCause()
	return f != nil && f.kind == failServerError
}

// Sessions reports whether the server carries any number of coordination
// sessions on this connection (wire.ReadySessions).
func (c *Conn) Sessions() bool { return c.sessions }

// Close ends a dedicated connection; on the shared one it does nothing:
// the SDK never ends the connection its broker shares.
func (c *Conn) Close() {
	if _, ok := c.hooks.(dedicatedHooks); ok {
		c.End()
	}
}
