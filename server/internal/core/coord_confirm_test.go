package core

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// oneSession is a quota of one coordination session per principal.
type oneSession struct{}

func (oneSession) QuotaOf(string) Quota                    { return Quota{CoordinationSessions: 1} }
func (oneSession) Rejected(string, string)                 {}
func (oneSession) PublishWaiters(string, int)              {}
func (oneSession) PublishSessions(principal string, n int) {}

// A leader deposed while its core has not noticed yet (Raft moved on, the
// core's view did not) still answers some refusals at once, before any
// commit: the rights taken away (UNAUTHORIZED), a session the connection
// does not carry (BAD_SESSION), the principal's session quota
// (LIMIT_EXCEEDED), a second session on a plain connection and a sub-op
// that is no request (BAD_REQUEST). None of them may move the session's
// deadline on the client (wire.CoordConfirmsSession, docs/protocol.md "A
// coordination session's deadline"): a deposed leader's answer proves
// nothing about the session. Answers that do move it wait for a commit,
// which a deposed leader never gets.
func TestCoordRefusalsWithoutCommitNeverConfirmTheSession(t *testing.T) {
	h := newCoreHarness(t, testLimits())
	h.c.quota = oneSession{}
	a, b := h.conn(), h.conn()
	h.coord(a, 1, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	h.settleAll()
	h.coordStatus(a, 1)
	h.coord(a, 2, wire.CoordAttach, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
	h.settleAll()
	if st := h.coordStatus(a, 2); st != wire.CoordSuccess {
		t.Fatalf("attach: status %d", st)
	}

	// Deposed: another server leads; this core learns it only later.
	h.log.mu.Lock()
	h.log.lead = Leadership{Term: h.term + 1}
	h.log.mu.Unlock()
	stalled, _ := h.gate(fakeStep{o: Refused})
	h.log.then(stalled)

	immediate := []struct {
		what string
		send func(id uint32)
		cn   *fakeConn
		want uint16
	}{
		{"rights taken away by a reload", func(id uint32) {
			a.deny = true
			h.coord(a, id, wire.CoordUpdateSemaphore, wire.Coord{Name: []byte("s"), Data: []byte("x")})
			a.deny = false
		}, a, wire.CoordUnauthorized},
		{"a request in no session of its connection", func(id uint32) {
			h.coord(b, id, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
		}, b, wire.CoordBadSession},
		{"the principal's session quota", func(id uint32) {
			h.coord(b, id, wire.CoordAttach, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
		}, b, wire.CoordLimitExceeded},
		{"a second session on a plain connection", func(id uint32) {
			h.coord(a, id, wire.CoordAttach, wire.Coord{Path: []byte("/n"), SeqNo: 1, TimeoutMs: 5000})
		}, a, wire.CoordBadRequest},
		{"a sub-op that is no request", func(id uint32) {
			h.coord(a, id, wire.CoordChanged, wire.Coord{})
		}, a, wire.CoordBadRequest},
	}
	id := uint32(10)
	for _, r := range immediate {
		id++
		r.send(id)
		st := h.coordStatus(r.cn, id)
		if st != r.want {
			t.Fatalf("%s: status %s, want %s at once", r.what, wire.CoordStatusName(st), wire.CoordStatusName(r.want))
		}
		if wire.CoordConfirmsSession(st) {
			t.Errorf("%s: answered %s before any commit, and that status moves the session's deadline", r.what, wire.CoordStatusName(st))
		}
	}

	// A keep-alive (a read) and a write wait for their entry's commit,
	// which a deposed leader never gets: nothing is answered meanwhile.
	h.coord(a, 20, wire.CoordDescribeNode, wire.Coord{Path: []byte("/n")})
	h.coord(a, 21, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	h.expect(a)
}

// The statuses that move a session's deadline are those the server sends
// only after a commit; the others never do.
func TestCoordConfirmingStatuses(t *testing.T) {
	for st := uint16(0); st < 12; st++ {
		want := st == wire.CoordSuccess || st == wire.CoordNotFound || st == wire.CoordAlreadyExists ||
			st == wire.CoordPreconditionFailed || st == wire.CoordAborted
		if got := wire.CoordConfirmsSession(st); got != want {
			t.Errorf("%s confirms the session: %v, want %v", wire.CoordStatusName(st), got, want)
		}
	}
}
