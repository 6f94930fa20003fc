package core

import (
	"slices"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// coordReads are the requests the core answers itself from the applied
// state (coordRequest): every other request sub-op must ask for a coordsm
// command.
var coordReads = []uint8{wire.CoordDescribeNode, wire.CoordListSessions, wire.CoordDescribeSemaphore}

// TestEveryCoordRequestIsServed: every request sub-op the wire defines is a
// read the core answers or asks for a coordsm command (which says how the
// request becomes its op), and its answer carries its sub-op; an operation
// added to the wire but not to a command's file (or the reads) fails here.
func TestEveryCoordRequestIsServed(t *testing.T) {
	for _, r := range wire.CoordRequests() {
		_, cmd := coordsm.ForRequest(r.Op)
		if read := slices.Contains(coordReads, r.Op); cmd == read {
			t.Errorf("request %s (%d): asks for a coordsm command %v, read by the core %v: want exactly one (declare `request: wire.Coord%s` in the command's file)", r.Name, r.Op, cmd, read, r.Name)
		}
	}

	h := newCoreHarness(t, testLimits())
	a, b := h.conn(), h.conn()
	h.coord(a, 1, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	h.coord(a, 2, wire.CoordAttach, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
	h.settleAll()
	h.frames(a)
	id := uint32(10)
	ask := func(cn *fakeConn, r wire.CoordOpName) {
		t.Helper()
		id++
		body := wire.Coord{Path: []byte("/x"), Name: []byte("s"), Limit: 1, Count: 1, SeqNo: 1, TimeoutMs: 5000}
		switch r.Op {
		case wire.CoordAttach, wire.CoordDescribeNode, wire.CoordListSessions:
			body.Path = []byte("/n")
		}
		h.coord(cn, id, r.Op, body)
		h.settleAll()
		var last *wire.Frame
		for _, f := range h.frames(cn) {
			if f.Type == wire.TypeCoordReply && f.ID == id {
				last = &f
			}
		}
		if last == nil {
			t.Fatalf("request %s (%d): no answer", r.Name, r.Op)
		}
		var ans wire.Coord
		if err := wire.DecodeCoord(last, &ans); err != nil {
			t.Fatalf("request %s (%d): answer %v: %v", r.Name, r.Op, last, err)
		}
		if last.Op != r.Op || (last.Code == wire.CoordBadRequest && string(ans.Message) == "not a request sub-op") {
			t.Errorf("request %s (%d): answered sub-op %d, status %s %q: the core does not serve it", r.Name, r.Op, last.Op, wire.CoordStatusName(last.Code), ans.Message)
		}
	}
	// In wire order, on a's session, the stop last (it ends the session).
	var stop wire.CoordOpName
	for _, r := range wire.CoordRequests() {
		switch r.Op {
		case wire.CoordStop:
			stop = r
		case wire.CoordAttach:
			ask(b, r)
		default:
			ask(a, r)
		}
	}
	ask(a, stop)
}

// TestCoordCommandsReachable: every coordsm command is asked for by a
// request or proposed by the leader itself (detach, expire, timeout).
func TestCoordCommandsReachable(t *testing.T) {
	ownOps := []coordsm.Kind{coordsm.Detach, coordsm.Expire, coordsm.Timeout}
	for _, k := range coordsm.Kinds() {
		if own := slices.Contains(ownOps, k.Kind); (coordsm.RequestOf(k.Kind) != 0) == own {
			t.Errorf("command %s (%d): request sub-op %d, proposed by the leader %v: want exactly one", k.Name, k.Kind, coordsm.RequestOf(k.Kind), own)
		}
	}
}
