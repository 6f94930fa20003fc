package core

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
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
	if len(ps) != before+1 || len(ps[before]) != 1 || ps[before][0].Kind != fsm.OpCoordDetach {
		t.Fatalf("after the close: proposals %v, want one detach", ps[before:])
	}
	h.settleAll()
}
