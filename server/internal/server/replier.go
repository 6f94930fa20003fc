package server

import (
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
)

// A connection is where the leader's core sends its answers (core.Replier).
// The core calls these from its goroutine; each takes the connection's lock
// only as long as queueing a frame does.
var _ core.Replier = (*conn)(nil)

// Send queues a frame that is not a final answer.
func (c *conn) Send(f *wire.Frame) bool { return c.send(f) }

// Finish queues request id's final answer and frees the id.
func (c *conn) Finish(id uint32, f *wire.Frame) bool { return c.finish(id, f) }

// End sends a last frame and closes the connection after it.
func (c *conn) End(f *wire.Frame) { c.fatal(f) }

// Forbid answers request id F and records the refusal.
func (c *conn) Forbid(id uint32, op, key string, reason uint8) { c.refuse(id, op, key, reason) }

// Remote is the client's address.
func (c *conn) Remote() string { return c.nc.RemoteAddr().String() }

// AllowCoord checks the principal's current rights on the node path (a
// reload may have taken it away since the attach).
func (c *conn) AllowCoord(id uint32, op uint8, path string) bool {
	if reason, ok := c.authorizeCoord([]byte(path)); !ok {
		c.refuseCoord(id, op, path, reason)
		return false
	}
	return true
}
