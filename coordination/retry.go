package coordination

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// do sends a request of this session. A safe request is sent again after a
// restore when its connection was lost; an unsafe one reports
// ErrIndeterminate. A request whose connection the server ended twice with
// an error (E) before it said anything about the request is not sent a
// third time: it may be what ends the connections. An answer that follows
// a commit confirms the session (moves its deadline); a refusal the server
// may make without one (wire.CoordConfirmsSession) does not.
func (a *attachment) do(ctx context.Context, what string, op uint8, body *wire.Coord, safe bool, note func(wire.Frame)) (wire.Coord, error) {
	return a.doEach(ctx, what, op, body, safe, note, nil)
}

// doEach is do with before, if set, called before every send (an acquire
// sets the time left of its queue timeout).
func (a *attachment) doEach(ctx context.Context, what string, op uint8, body *wire.Coord, safe bool, note func(wire.Frame), before func()) (wire.Coord, error) {
	if err := checkSizes(op, body); err != nil {
		err.(*StatusError).Op = what
		return wire.Coord{}, err
	}
	losses := 0
	for {
		l, err := a.current(ctx)
		if err != nil {
			return wire.Coord{}, err
		}
		if before != nil {
			before()
		}
		var heard atomic.Bool // a notification for this request arrived
		wrapped := note
		if note != nil {
			wrapped = func(f wire.Frame) { heard.Store(true); note(f) }
		} else if op == wire.CoordAcquire || op == wire.CoordDescribeSemaphore {
			wrapped = func(wire.Frame) { heard.Store(true) }
		}
		st, ans, sent, err := l.callSent(ctx, op, body, wrapped)
		if errors.Is(err, errLinkLost) {
			if !sent.IsZero() && !heard.Load() && l.endedByServer() {
				losses++
			}
			// Wait until the session has let go of this connection, so
			// that a request sent again goes on the next one.
			select {
			case <-l.detached:
			case <-a.ctx.Done():
			case <-ctx.Done():
				return wire.Coord{}, ctx.Err()
			}
			if safe && losses < 2 {
				continue
			}
			if safe {
				return wire.Coord{}, fmt.Errorf("%w: %s: the server ended the connection twice with an error while the request was in flight, before it answered: not sent again", ErrIndeterminate, what)
			}
			return wire.Coord{}, fmt.Errorf("%w: %s: the connection was lost before the answer", ErrIndeterminate, what)
		}
		if err != nil {
			return wire.Coord{}, err
		}
		if wire.CoordConfirmsSession(st) {
			a.confirm(l, sent)
		}
		return ans, statusError(what, st, ans.Message)
	}
}
