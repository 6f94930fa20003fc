package faketicketd

import (
	"fmt"
	"strconv"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Coordination in scenarios: K requests are read and matched by sub-op
// name and session, T answers and notifications are written from a
// step's fields (testdata/conformance/README.md, "Coordination").

// coordOps names the sub-ops as the scenarios spell them.
var coordOps = map[string]uint8{
	"create_node": wire.CoordCreateNode, "alter_node": wire.CoordAlterNode, "drop_node": wire.CoordDropNode,
	"describe_node": wire.CoordDescribeNode, "attach": wire.CoordAttach, "stop": wire.CoordStop,
	"create_semaphore": wire.CoordCreateSemaphore, "update_semaphore": wire.CoordUpdateSemaphore,
	"delete_semaphore": wire.CoordDeleteSemaphore, "acquire": wire.CoordAcquire, "release": wire.CoordRelease,
	"describe_semaphore": wire.CoordDescribeSemaphore, "list_sessions": wire.CoordListSessions,
	"queued": wire.CoordQueued, "changed": wire.CoordChanged, "lost": wire.CoordLost, "session_ended": wire.CoordSessionEnded,
}

// coordOpName is the scenarios' name of a plain sub-op.
func coordOpName(op uint8) string {
	for name, o := range coordOps {
		if o == op {
			return name
		}
	}
	return fmt.Sprintf("sub-op %d", op)
}

// coordRequest returns the plain sub-op of a K frame and the session it
// acts for: an attach's session field, the leading session of a request
// sent with CoordForSession, or 0.
func coordRequest(f wire.Frame) (op uint8, session uint64, ok bool) {
	if f.Type != wire.TypeCoord {
		return 0, 0, false
	}
	var b wire.Coord
	if wire.DecodeCoord(&f, &b) == nil { // the session field of an attach, or the one a shared-form request names
		session = b.Session
	}
	return f.Op &^ wire.CoordForSession, session, true
}

// checkCoordForm records a K request in the form its connection does not
// allow: CoordForSession where the hello did not announce ReadySessions,
// or a plain session request where it did (the two forms do not mix).
func (s *ScenarioServer) checkCoordForm(server, conn int, f wire.Frame, sessions bool) {
	op := f.Op &^ wire.CoordForSession
	session := op >= wire.CoordAttach && op <= wire.CoordDescribeSemaphore
	switch {
	case f.Op&wire.CoordForSession != 0 && !sessions:
		s.violate("server %d connection %d: K %s names its session, but the server did not announce several sessions per connection", server, conn, coordOpName(op))
	case f.Op&wire.CoordForSession == 0 && sessions && session:
		s.violate("server %d connection %d: K %s does not name its session on a connection of several sessions", server, conn, coordOpName(op))
	}
}

// coordAnswer is the T answering request f with status: a zero body for
// SUCCESS, a message otherwise.
func coordAnswer(f wire.Frame, status uint16) *wire.Frame {
	body := wire.Coord{}
	if status != wire.CoordSuccess {
		body.Message = []byte("refused by the script")
	}
	if op := f.Op &^ wire.CoordForSession; op == wire.CoordAttach && status == wire.CoordSuccess {
		var req wire.Coord
		if wire.DecodeCoord(&f, &req) == nil {
			body.Session, body.SeqNo = max(req.Session, 1), req.SeqNo
		}
	}
	return wire.CoordFrame(true, f.ID, f.Op&^wire.CoordForSession, status, &body)
}

// coordFrame is the T a Send step writes: an answer to request (its id
// and, unless Op names one, its sub-op), or a notification (lost and
// session_ended: id 0).
func (st Step) coordFrame(request wire.Frame) *wire.Frame {
	op := request.Op &^ wire.CoordForSession
	if st.Op != "" {
		op = coordOps[st.Op]
	}
	id := request.ID + st.IDDelta
	if op == wire.CoordLost || op == wire.CoordSessionEnded {
		id = 0
	}
	session, _ := strconv.ParseUint(st.Session, 10, 64)
	order, _ := strconv.ParseUint(st.Token, 10, 64)
	body := wire.Coord{Session: session, SeqNo: st.SeqNo, OrderID: order, Count: uint64(st.Count),
		Reason: st.Reason, Name: []byte(st.Key), Limit: st.Limit, Data: []byte(st.Data)}
	if st.Acquired {
		body.Flags = wire.CoordFlagAcquired
	}
	if st.Status != wire.CoordSuccess {
		body.Message = []byte(st.Text)
		if st.Text == "" {
			body.Message = []byte("refused by the script")
		}
	}
	return wire.CoordFrame(true, id, op, st.Status, &body)
}

// validateCoord checks a step's coordination fields.
func (st Step) validateCoord() error {
	if st.Op != "" {
		if _, ok := coordOps[st.Op]; !ok {
			return fmt.Errorf("unknown coordination op %q", st.Op)
		}
		if st.Read != "" && st.Read != wire.TypeCoord.String() || st.Send != "" && st.Send != wire.TypeCoordReply.String() {
			return fmt.Errorf("op %q belongs to a K read or a T send", st.Op)
		}
	}
	if st.Send == wire.TypeCoordReply.String() && st.Status > wire.CoordLimitExceeded {
		return fmt.Errorf("status %d is not a coordination status", st.Status)
	}
	return nil
}

// coordAcquireTimeout is the queue timeout of a K acquire.
func coordAcquireTimeout(f wire.Frame) (uint64, bool) {
	if f.Op&^wire.CoordForSession != wire.CoordAcquire {
		return 0, false
	}
	var b wire.Coord
	if wire.DecodeCoord(&f, &b) != nil {
		return 0, false
	}
	return b.TimeoutMs, true
}

// coordRequestData is the data a K request carries (its semaphore's or
// owner's data).
func coordRequestData(f wire.Frame) (string, bool) {
	var b wire.Coord
	if f.Type != wire.TypeCoord || wire.DecodeCoord(&f, &b) != nil {
		return "", false
	}
	return string(b.Data), true
}

// coordRequestName is the semaphore a K request names.
func coordRequestName(f wire.Frame) string {
	var b wire.Coord
	if f.Type != wire.TypeCoord || wire.DecodeCoord(&f, &b) != nil {
		return ""
	}
	return string(b.Name)
}
