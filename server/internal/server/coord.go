package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// The reader's side of coordination nodes (docs/coordination.md): a K frame
// is decoded and checked once here, on the connection's reader goroutine,
// and goes to the leader's core (package core) only when it is well formed,
// within its limits and allowed to the connection's principal. What the
// request does, and every answer after that, is the core's.

// coordFieldError names the first field of a request that is out of range,
// or is empty; the request is then answered BAD_REQUEST without a commit.
// The state machine checks the same rules again (and the ones that depend
// on the state, such as a count above the limit).
func coordFieldError(op uint8, b *wire.Coord) string {
	switch {
	case wire.CoordRequestHas(op, "path"):
		if !coordsm.ValidPath(string(b.Path)) {
			return fmt.Sprintf("path %q: want '/' and non-empty components separated by single '/', at most %d bytes (got %d)", clip(b.Path), wire.MaxCoordPath, len(b.Path))
		}
	case wire.CoordRequestHas(op, "name"):
		if len(b.Name) == 0 || len(b.Name) > wire.MaxCoordName {
			return fmt.Sprintf("name: %d bytes, want 1 to %d", len(b.Name), wire.MaxCoordName)
		}
	}
	switch {
	case len(b.Data) > wire.MaxCoordData:
		return fmt.Sprintf("data: %d bytes, at most %d", len(b.Data), wire.MaxCoordData)
	case op == wire.CoordAttach && (b.TimeoutMs == 0 || b.TimeoutMs > coordsm.MaxSessionTimeout):
		return fmt.Sprintf("timeout_ms: %d, want 1 to %d", b.TimeoutMs, coordsm.MaxSessionTimeout)
	case op == wire.CoordAttach && len(b.Desc) > wire.MaxCoordDesc:
		return fmt.Sprintf("description: %d bytes, at most %d", len(b.Desc), wire.MaxCoordDesc)
	case op == wire.CoordAttach && len(b.Key) > wire.MaxCoordKey:
		return fmt.Sprintf("protection key: %d bytes, at most %d", len(b.Key), wire.MaxCoordKey)
	case op == wire.CoordCreateSemaphore && b.Limit == 0:
		return "limit: 0, want at least 1"
	case op == wire.CoordAcquire && b.Count == 0:
		return "count: 0, want 1 to the limit (or 2^64-1 for exclusive)"
	case (op == wire.CoordCreateNode || op == wire.CoordAlterNode) && b.ReadMode > coordsm.ReadStrict:
		return fmt.Sprintf("read_consistency_mode: %d, want 1 (RELAXED) or 2 (STRICT), or 0 for the default", b.ReadMode)
	case (op == wire.CoordCreateNode || op == wire.CoordAlterNode) && b.AttachMode > coordsm.AttachRelaxed:
		return fmt.Sprintf("attach_consistency_mode: %d, want 1 (STRICT) or 2 (RELAXED), or 0 for the default", b.AttachMode)
	}
	return ""
}

// clip shortens a field quoted in an error.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

// coordFrame handles a K frame on the connection's reader goroutine: the body
// is decoded once here (a malformed one ends the connection like any
// malformed frame) and its fields checked (one out of range is answered
// BAD_REQUEST, naming it), then the request goes to the core.
func (c *conn) coordFrame(f *wire.Frame) bool {
	s := c.srv
	if c.admin && !s.isServing() {
		c.fatalErr(wire.CodeNotAllowed, "an admin session on a follower serves status only")
		return false
	}
	// The body's fields point into the frame's text, which the reader
	// reuses: decode a copy, which the request then owns.
	text := bytes.Clone(f.Text)
	var body wire.Coord
	if err := wire.DecodeCoord(&wire.Frame{Type: f.Type, ID: f.ID, Op: f.Op, Text: text}, &body); err != nil {
		we := err.(*wire.Error)
		c.fatalErr(we.Code, we.Msg)
		return false
	}
	// A session request that names its session (wire.CoordForSession) is
	// the plain sub-op for everything but which session it acts for; its
	// answers carry the plain sub-op.
	op, forSession := f.Op&^wire.CoordForSession, f.Op&wire.CoordForSession != 0
	givesBack := op == wire.CoordRelease || op == wire.CoordStop
	if !givesBack && c.overRate(f.ID) {
		return true
	}
	if dup, full := c.begin(f.ID, op == wire.CoordAcquire, givesBack); dup {
		c.fatalErr(wire.CodeDuplicateID, "request id already in flight")
		return false
	} else if full != 0 {
		c.send(&wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: full})
		return true
	}
	if reason, ok := c.authorizeCoord(body.Path); !ok {
		c.refuseCoord(f.ID, op, string(body.Path), reason)
		return true
	}
	if msg := coordFieldError(op, &body); msg != "" {
		core.AnswerCoord(c, f.ID, op, wire.CoordBadRequest, &wire.Coord{Message: []byte(msg)})
		return true
	}
	s.core.Submit(core.Request{Kind: wire.TypeCoord, Conn: c, ID: f.ID, Admin: c.admin, Op: op, ForSession: forSession, Coord: &body,
		At: time.Now(), Principal: c.principal})
	return true
}

// refuseOversized answers a K request too long to read (the reader skipped
// it) BAD_REQUEST, naming the limit; the connection and its session go on.
func (c *conn) refuseOversized(e *wire.OversizedRequestError) {
	op := e.Op &^ wire.CoordForSession
	givesBack := op == wire.CoordRelease || op == wire.CoordStop
	if dup, full := c.begin(e.ID, op == wire.CoordAcquire, givesBack); dup {
		c.fatalErr(wire.CodeDuplicateID, "request id already in flight")
		return
	} else if full != 0 {
		c.send(&wire.Frame{Type: wire.TypeCapacity, ID: e.ID, Reason: full})
		return
	}
	core.AnswerCoord(c, e.ID, op, wire.CoordBadRequest, &wire.Coord{Message: []byte("data: " + e.Error())})
}

// authorizeCoord checks a coordination request's node path against the
// connection's principal: a monitor (or a removed principal) may not use
// coordination nodes; a client only nodes whose path, without its leading
// '/', lies under one of its key prefixes. Requests without a path act
// inside a session, which was authorized by the path it attached to (and
// the core checks that path again, through AllowCoord).
func (c *conn) authorizeCoord(path []byte) (uint8, bool) {
	p := c.lookup()
	switch {
	case p == nil || p.role == RoleMonitor:
		return wire.ForbiddenRole, false
	case len(path) > 0 && !p.keyAllowed(bytes.TrimPrefix(path, []byte("/"))):
		return wire.ForbiddenKey, false
	}
	return 0, true
}

// refuseCoord answers a coordination request UNAUTHORIZED and records the
// refusal like a ticket request's (audit log and metric).
func (c *conn) refuseCoord(id uint32, op uint8, path string, reason uint8) {
	s := c.srv
	s.metrics.authzRefusals.WithLabelValues("coordination", forbiddenName(reason)).Inc()
	if s.logLimit.allow(logKey{what: "coordination", who: c.principal, reason: forbiddenName(reason)}) {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "audit", slog.String("principal", c.principal),
			slog.String("op", "coordination"), slog.String("outcome", "denied"), slog.String("reason", forbiddenName(reason)),
			slog.String("path", auditText(path)), slog.String("remote", c.nc.RemoteAddr().String()))
	}
	core.AnswerCoord(c, id, op, wire.CoordUnauthorized, &wire.Coord{Message: []byte("this principal may not use this coordination node (" + forbiddenName(reason) + "): see the [auth] section of its configuration")})
}
