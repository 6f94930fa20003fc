package core

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// coord hands the core one coordination request, decoded as the reader
// hands it over.
func (h *coreHarness) coord(cn *fakeConn, id uint32, op uint8, body wire.Coord) {
	h.do(Request{Kind: wire.TypeCoord, Conn: cn, ID: id, Op: op, Coord: &body, Principal: "p"})
}

// coordStatus takes cn's answers, checks that there is one for id, and
// returns its status.
func (h *coreHarness) coordStatus(cn *fakeConn, id uint32) uint16 {
	h.t.Helper()
	return h.expect(cn, fr(wire.TypeCoordReply, id))[0].Code
}

// A session belongs to the connection that attached it: requests in a
// session on another connection are refused, and the connection's close
// detaches it through Raft.
func TestCoordSessionBoundToItsConnection(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	h.coord(a, 1, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	h.settleAll()
	if st := h.coordStatus(a, 1); st != wire.CoordSuccess {
		t.Fatalf("create node: status %d", st)
	}
	h.coord(a, 2, wire.CoordAttach, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
	h.settleAll()
	if st := h.coordStatus(a, 2); st != wire.CoordSuccess {
		t.Fatalf("attach: status %d", st)
	}
	h.coord(b, 3, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	if st := h.coordStatus(b, 3); st != wire.CoordBadSession {
		t.Fatalf("a request in no session: status %d, want BAD_SESSION at once", st)
	}
	h.coord(a, 4, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	h.settleAll()
	if st := h.coordStatus(a, 4); st != wire.CoordSuccess {
		t.Fatalf("create semaphore in the session: status %d", st)
	}
	a.deny = true // a reload took the node away from the principal
	h.coord(a, 5, wire.CoordUpdateSemaphore, wire.Coord{Name: []byte("s"), Data: []byte("x")})
	if st := h.coordStatus(a, 5); st != wire.CoordUnauthorized {
		t.Fatalf("update after the rights were taken: status %d, want UNAUTHORIZED", st)
	}
	before := len(h.proposals())
	h.close(a)
	ps := h.proposals()
	if len(ps) != before+1 || len(ps[before]) != 1 || ps[before][0].Kind != fsm.OpKind(coordsm.Detach) {
		t.Fatalf("after the close: proposals %v, want one detach", ps[before:])
	}
	h.settleAll()
}

// coordFor hands the core a session request that names its session
// (wire.CoordForSession), as the reader hands it over.
func (h *coreHarness) coordFor(cn *fakeConn, id uint32, op uint8, session uint64, body wire.Coord) {
	body.Session = session
	h.do(Request{Kind: wire.TypeCoord, Conn: cn, ID: id, Op: op, ForSession: true, Coord: &body, Principal: "p"})
}

// Sessions named in their requests: one connection attaches two, each
// request acts for the one it names, a session the connection did not
// attach and a request in the other form are refused, and the close
// detaches both, in session-id order.
func TestCoordSessionsNamedOnOneConnection(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	h.coord(a, 1, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	h.settleAll()
	h.coordStatus(a, 1)
	var ids []uint64
	for id := uint32(2); id <= 3; id++ {
		h.coordFor(a, id, wire.CoordAttach, 0, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
		h.settleAll()
		ans := h.expect(a, fr(wire.TypeCoordReply, id))[0]
		var c wire.Coord
		if err := wire.DecodeCoord(&ans, &c); err != nil || ans.Code != wire.CoordSuccess || ans.Op != wire.CoordAttach {
			t.Fatalf("attach %d: status %d op %d %v", id, ans.Code, ans.Op, err)
		}
		ids = append(ids, c.Session)
	}
	if ids[0] == ids[1] {
		t.Fatalf("two attaches, one session %d", ids[0])
	}
	h.coordFor(a, 4, wire.CoordCreateSemaphore, ids[1], wire.Coord{Name: []byte("s"), Limit: 1})
	h.settleAll()
	if st := h.coordStatus(a, 4); st != wire.CoordSuccess {
		t.Fatalf("create semaphore in session %d: status %d", ids[1], st)
	}
	h.coordFor(a, 5, wire.CoordCreateSemaphore, ids[1]+100, wire.Coord{Name: []byte("t"), Limit: 1})
	if st := h.coordStatus(a, 5); st != wire.CoordBadSession {
		t.Fatalf("a session the connection did not attach: status %d, want BAD_SESSION at once", st)
	}
	h.coord(a, 6, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("t"), Limit: 1})
	if st := h.coordStatus(a, 6); st != wire.CoordBadSession {
		t.Fatalf("a plain request on a connection of named sessions: status %d, want BAD_SESSION", st)
	}
	h.coordFor(b, 7, wire.CoordCreateSemaphore, ids[0], wire.Coord{Name: []byte("t"), Limit: 1})
	if st := h.coordStatus(b, 7); st != wire.CoordBadSession {
		t.Fatalf("another connection naming session %d: status %d, want BAD_SESSION", ids[0], st)
	}
	before := len(h.proposals())
	h.close(a)
	ps := h.proposals()
	if len(ps) != before+1 || len(ps[before]) != 2 {
		t.Fatalf("after the close: proposals %v, want one batch of two detaches", ps[before:])
	}
	for i, op := range ps[before] {
		if op.Kind != fsm.OpKind(coordsm.Detach) || op.Coord.Session != ids[i] {
			t.Fatalf("detach %d: %v, want session %d", i, op, ids[i])
		}
	}
	h.settleAll()
}
