package server_test

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestCoordServerSessionsOnOneConnection: the server announces
// ReadySessions; one connection attaches two sessions with CoordForSession
// and each request acts for the session it names; a session the connection
// did not attach, or a request in the other form, is BAD_SESSION; when the
// connection ends both sessions are detached (and restorable elsewhere).
func TestCoordServerSessionsOnOneConnection(t *testing.T) {
	cl := testcluster.Start(t, 1)
	raw := testcluster.DialRaw(t, cl.Addr(0))
	raw.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	if y := raw.Recv(); y.Type != wire.TypeReady || y.Flags&wire.ReadySessions == 0 {
		t.Fatalf("hello answer %s flags %#x, want Y with ReadySessions", y.Type, y.Flags)
	}
	raw.AllowCoordFrames()
	a := &coordClient{t: t, r: raw}
	other := coordHello(t, cl.Addr(0))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	attach := func(session, seq uint64) uint64 {
		t.Helper()
		id := a.send(wire.CoordAttach|wire.CoordForSession, wire.Coord{Path: []byte("/n"), Session: session, SeqNo: seq, Key: []byte("k"), TimeoutMs: 30000})
		st, b := a.wait(id, wire.CoordAttach)
		if st != wire.CoordSuccess {
			t.Fatalf("attach for session: %s (%s)", wire.CoordStatusName(st), b.Message)
		}
		return b.Session
	}
	forSession := func(want uint16, session uint64, op uint8, body wire.Coord) wire.Coord {
		t.Helper()
		body.Session = session
		st, b := a.wait(a.send(op|wire.CoordForSession, body), op)
		if st != want {
			t.Fatalf("op %d for session %d: %s (%s), want %s", op, session, wire.CoordStatusName(st), b.Message, wire.CoordStatusName(want))
		}
		return b
	}
	s1, s2 := attach(0, 1), attach(0, 1)
	if s1 == s2 {
		t.Fatalf("two attaches gave one session %d", s1)
	}
	forSession(wire.CoordSuccess, s1, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("m"), Limit: 1})
	if g := forSession(wire.CoordSuccess, s1, wire.CoordAcquire, wire.Coord{Name: []byte("m"), Count: 1}); g.Flags&wire.CoordFlagAcquired == 0 {
		t.Fatalf("session %d's acquire: %+v", s1, g)
	}
	if g := forSession(wire.CoordSuccess, s2, wire.CoordAcquire, wire.Coord{Name: []byte("m"), Count: 1}); g.Flags&wire.CoordFlagAcquired != 0 {
		t.Fatalf("session %d got the unit session %d holds: %+v", s2, s1, g)
	}
	d := forSession(wire.CoordSuccess, s2, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("m"), Flags: wire.CoordFlagOwners})
	if len(d.Owners) != 1 || d.Owners[0].Session != s1 {
		t.Fatalf("owners %+v, want session %d", d.Owners, s1)
	}
	s3 := other.start("/n") // a session of another connection: not this one's to use
	forSession(wire.CoordBadSession, s3, wire.CoordRelease, wire.Coord{Name: []byte("m")})
	a.must(wire.CoordBadSession, wire.CoordRelease, wire.Coord{Name: []byte("m")}) // the plain form on a shared connection
	if st, b := other.wait(other.send(wire.CoordAcquire|wire.CoordForSession, wire.Coord{Session: s3, Name: []byte("m"), Count: 1}), wire.CoordAcquire); st != wire.CoordBadSession {
		t.Fatalf("the named form on a plain connection: %s (%s), want BAD_SESSION", wire.CoordStatusName(st), b.Message)
	}

	raw.Conn.Close()
	waitDetached := func() map[uint64]bool {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			l := other.must(wire.CoordSuccess, wire.CoordListSessions, wire.Coord{Path: []byte("/n")})
			attached := map[uint64]bool{}
			for _, s := range l.SessionList {
				attached[s.Session] = s.Flags&wire.CoordFlagAttached != 0
			}
			if !attached[s1] && !attached[s2] {
				return attached
			}
			if time.Now().After(deadline) {
				t.Fatalf("sessions after their connection ended: %v, want %d and %d detached", attached, s1, s2)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got := waitDetached(); !got[s3] {
		t.Fatalf("session %d of the other connection detached too: %v", s3, got)
	}
	// Restored together on a new connection, holds kept.
	raw2 := testcluster.Hello(t, cl.Addr(0), "")
	raw2.AllowCoordFrames()
	a = &coordClient{t: t, r: raw2}
	attach(s1, 2)
	attach(s2, 2)
	d = forSession(wire.CoordSuccess, s2, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("m"), Flags: wire.CoordFlagOwners})
	if len(d.Owners) != 1 || d.Owners[0].Session != s1 {
		t.Fatalf("owners after the restore %+v, want session %d", d.Owners, s1)
	}
	forSession(wire.CoordSuccess, s1, wire.CoordStop, wire.Coord{})
	if g := forSession(wire.CoordSuccess, s2, wire.CoordAcquire, wire.Coord{Name: []byte("m"), Count: 1}); g.Flags&wire.CoordFlagAcquired == 0 {
		t.Fatalf("session %d after session %d stopped: %+v", s2, s1, g)
	}
}
