package transport

import (
	"fmt"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// coordNotice handles a coordination answer (T) that is not the final
// answer of a request: a notification with id 0 (to the owner's hook), a
// watch's Changed, or an acquire's Queued (to the request's note). done
// reports that f was handled; a non-nil failure ends the connection. A
// final answer (done false) goes through the pending table like every
// other answer.
func (c *Conn) coordNotice(f *wire.Frame) (done bool, fl *Ended) {
	private := func() wire.Frame {
		g := *f
		g.Key = nil
		g.Text = append([]byte(nil), f.Text...)
		return g
	}
	switch {
	case f.ID == 0:
		if c.hooks != nil {
			c.hooks.coordEvent(c, private())
		}
		return true, nil
	case f.Op == wire.CoordChanged:
		c.mu.Lock()
		fn := c.watches[f.ID]
		delete(c.watches, f.ID) // one-shot
		c.mu.Unlock()
		// A Changed without a watch answers a describe whose caller left:
		// nothing waits for it.
		if fn != nil {
			fn(private())
		}
		return true, nil
	case f.Op == wire.CoordQueued:
		c.mu.Lock()
		cl := c.pending[f.ID]
		if cl == nil || cl.typ != wire.TypeCoord {
			c.mu.Unlock()
			return true, &Ended{kind: failProtocol, addr: c.addr, Cause: fmt.Errorf("a coordination Queued for request id %d, which is not a coordination request in flight", f.ID)}
		}
		c.freeLargeLocked(cl) // the server has read all of it
		note := cl.note
		if cl.abandoned {
			note = nil
		}
		c.mu.Unlock()
		if note != nil {
			note(private())
		}
		return true, nil
	}
	return false, nil
}
