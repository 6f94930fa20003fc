package coordination_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// sharedServer is a scripted server that announces ReadySessions and
// records what the client sends: every session request must name its
// session (CoordForSession).
type sharedServer struct {
	ln     net.Listener
	legacy bool // announce no ReadySessions: a server older than shared sessions

	// refuseAfter: hellos after this many are refused as unauthenticated
	// (0: none is). Set under mu.
	refuseAfter int
	hellos      int

	mu       sync.Mutex
	conns    []net.Conn
	nextSess uint64
	order    uint64
	attaches []wire.Coord          // in order, with the session they attached
	requests map[uint64][]uint8    // session -> the sub-ops it sent (plain)
	plain    []uint8               // session sub-ops sent without CoordForSession
	bound    map[net.Conn][]uint64 // the sessions each connection attached
}

func startSharedServer(t *testing.T, legacy bool) *sharedServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sharedServer{ln: ln, legacy: legacy, requests: map[uint64][]uint8{}, bound: map[net.Conn][]uint64{}}
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			go s.serve(nc)
		}
	}()
	return s
}

func (s *sharedServer) serve(nc net.Conn) {
	defer nc.Close()
	r := wire.NewReader(nc)
	var f wire.Frame
	if r.Next(&f) != nil || f.Type != wire.TypeHello {
		return
	}
	var wmu sync.Mutex
	send := func(fr *wire.Frame) {
		wmu.Lock()
		defer wmu.Unlock()
		nc.Write(wire.Append(nil, fr))
	}
	flags := wire.ReadyLeader | wire.ReadySessions
	if s.legacy {
		flags = wire.ReadyLeader
	}
	s.mu.Lock()
	s.hellos++
	refuse := s.refuseAfter > 0 && s.hellos > s.refuseAfter
	s.mu.Unlock()
	if refuse {
		send(&wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeUnauthenticated), Text: []byte("token refused")})
		return
	}
	send(&wire.Frame{Type: wire.TypeReady, Version: wire.Version, Flags: flags, Interval: 5000, Count: 64, Text: []byte("fake")})
	r.AllowCoordFrames()
	for r.Next(&f) == nil {
		if f.Type == wire.TypePing {
			send(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
			continue
		}
		if f.Type != wire.TypeCoord {
			continue
		}
		var req wire.Coord
		if wire.DecodeCoord(&f, &req) != nil {
			return
		}
		op := f.Op &^ wire.CoordForSession
		s.mu.Lock()
		if s.legacy && f.Op != op {
			s.mu.Unlock()
			// An older server knows no such sub-op.
			send(&wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeUnknownFrame), Text: []byte("unknown coordination sub-op")})
			return
		}
		if s.legacy && op > wire.CoordAttach && op <= wire.CoordDescribeSemaphore {
			// One session per connection: the one it attached.
			req.Session = s.bound[nc][0]
		}
		if f.Op&wire.CoordForSession == 0 && op >= wire.CoordAttach && op <= wire.CoordDescribeSemaphore {
			s.plain = append(s.plain, op)
		}
		var ans *wire.Frame
		switch op {
		case wire.CoordAttach:
			id := req.Session
			if id == 0 {
				s.nextSess++
				id = s.nextSess
			}
			req.Session = id
			s.attaches = append(s.attaches, req)
			s.bound[nc] = append(s.bound[nc], id)
			ans = wire.CoordFrame(true, f.ID, op, wire.CoordSuccess, &wire.Coord{Session: id, SeqNo: req.SeqNo})
		case wire.CoordAcquire:
			s.requests[req.Session] = append(s.requests[req.Session], op)
			s.order++
			ans = wire.CoordFrame(true, f.ID, op, wire.CoordSuccess, &wire.Coord{Flags: wire.CoordFlagAcquired, OrderID: s.order, Count: 1})
		case wire.CoordDescribeNode:
			ans = wire.CoordFrame(true, f.ID, op, wire.CoordSuccess, &wire.Coord{GraceMs: 1000})
		default:
			s.requests[req.Session] = append(s.requests[req.Session], op)
			ans = wire.CoordFrame(true, f.ID, op, wire.CoordSuccess, &wire.Coord{})
		}
		s.mu.Unlock()
		send(ans)
	}
}

// cut closes every connection the server has accepted.
func (s *sharedServer) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// notify sends f on every open connection.
func (s *sharedServer) notify(f *wire.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Write(wire.Append(nil, f))
	}
}

func (s *sharedServer) snapshot() (conns int, attaches []wire.Coord, requests map[uint64][]uint8, plain []uint8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := map[uint64][]uint8{}
	for k, v := range s.requests {
		req[k] = append([]uint8(nil), v...)
	}
	return len(s.conns), append([]wire.Coord(nil), s.attaches...), req, append([]uint8(nil), s.plain...)
}

// waitFor polls cond until it holds or the test's context ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSessionsShareTheBrokersConnection: against a server that announces
// ReadySessions, sessions ride the broker's one connection, each request
// naming its session; when the connection ends, every session detaches
// and restores itself on the broker's next connection; a SessionEnded for
// one session ends that one only; Close stops its own session.
func TestSessionsShareTheBrokersConnection(t *testing.T) {
	srv := startSharedServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv.ln.Addr().String())
	var states [2]chan coordination.State
	var sessions [2]*coordination.Session
	for i := range sessions {
		states[i] = make(chan coordination.State, 16)
		s, err := c.Session(ctx, "/n", coordination.WithTimeout(10*time.Second), coordination.WithStateCallback(func(st coordination.State) { states[i] <- st }))
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
		if st := <-states[i]; st != coordination.Attached {
			t.Fatalf("session %d: first state %v", i, st)
		}
	}
	for _, s := range sessions {
		if _, err := s.AcquireSemaphore(ctx, "sem"); err != nil {
			t.Fatal(err)
		}
	}
	conns, attaches, reqs, plain := srv.snapshot()
	if conns != 1 || len(attaches) != 2 || len(plain) != 0 {
		t.Fatalf("%d connections, %d attaches, plain session requests %v; want 1, 2, none", conns, len(attaches), plain)
	}
	for _, s := range sessions {
		if got := reqs[s.ID()]; len(got) != 1 || got[0] != wire.CoordAcquire {
			t.Fatalf("session %d sent %v, want one acquire naming it", s.ID(), got)
		}
	}

	srv.cut()
	for i := range sessions {
		for _, want := range []coordination.State{coordination.Detached, coordination.Attached} {
			select {
			case st := <-states[i]:
				if st != want {
					t.Fatalf("session %d after the cut: %v, want %v", i, st, want)
				}
			case <-ctx.Done():
				t.Fatalf("session %d after the cut: no %v", i, want)
			}
		}
	}
	waitFor(t, ctx, "one connection again", func() bool { n, _, _, _ := srv.snapshot(); return n == 1 })
	_, attaches, _, _ = srv.snapshot()
	if len(attaches) != 4 || attaches[2].SeqNo != 2 || attaches[3].SeqNo != 2 {
		t.Fatalf("attaches %+v, want two restores with seq_no 2", attaches)
	}

	srv.notify(wire.CoordFrame(true, 0, wire.CoordSessionEnded, 0, &wire.Coord{Session: sessions[0].ID(), Reason: wire.CoordEndExpired}))
	<-sessions[0].Context().Done()
	if err := context.Cause(sessions[0].Context()); !errors.Is(err, coordination.ErrSessionExpired) {
		t.Fatalf("the ended session: %v", err)
	}
	if sessions[1].Context().Err() != nil || sessions[1].State() != coordination.Attached {
		t.Fatalf("the other session ended too: %v", context.Cause(sessions[1].Context()))
	}
	if err := sessions[1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, reqs, plain = srv.snapshot()
	if got := reqs[sessions[1].ID()]; len(got) != 2 || got[1] != wire.CoordStop || len(plain) != 0 {
		t.Fatalf("session %d sent %v (plain %v), want its acquire and its stop", sessions[1].ID(), got, plain)
	}
}

// TestSessionsOnAnOlderServer: a server that does not announce
// ReadySessions gets what it understands: each session on a connection of
// its own, dialled as the broker dials, with plain session requests.
func TestSessionsOnAnOlderServer(t *testing.T) {
	srv := startSharedServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv.ln.Addr().String())
	var sessions []*coordination.Session
	for range 2 {
		s, err := c.Session(ctx, "/n", coordination.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		if _, err := s.AcquireSemaphore(ctx, "sem"); err != nil {
			t.Fatal(err)
		}
	}
	conns, attaches, reqs, plain := srv.snapshot()
	if conns != 3 || len(attaches) != 2 || len(plain) != 4 {
		t.Fatalf("%d connections, %d attaches, plain session requests %v; want 3 (the broker's and one per session), 2, 4", conns, len(attaches), plain)
	}
	for _, s := range sessions {
		if got := reqs[s.ID()]; len(got) != 1 || got[0] != wire.CoordAcquire {
			t.Fatalf("session %d sent %v, want one acquire", s.ID(), got)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOlderServerRefusingASessionsOwnConnection: on a server older than
// shared sessions, a session's own connection is dialled in the broker's
// dial loop; a refusal that every listed server gives (here the token,
// refused once the broker's own connection was up) is returned at once,
// not when the caller's context ends.
func TestOlderServerRefusingASessionsOwnConnection(t *testing.T) {
	srv := startSharedServer(t, true)
	srv.mu.Lock()
	srv.refuseAfter = 1
	srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv.ln.Addr().String())
	_, err := c.Session(ctx, "/n", coordination.WithTimeout(10*time.Second))
	if !errors.Is(err, coordination.ErrUnauthenticated) || ctx.Err() != nil {
		t.Fatalf("a session whose own connection is refused: %v (context: %v), want ErrUnauthenticated at once", err, ctx.Err())
	}
}
