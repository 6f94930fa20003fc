package server_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// raftProxy stands between the Raft peers and one server's Raft port (the
// peers know the server by the proxy's address), so that a test can cut a
// server off from its peers while it keeps running and serving its clients.
// A network partition cannot be made real on demand; the servers and their
// Raft traffic are real.
//
// Connections into the server are all cut when it is isolated. Connections
// that the isolated server opens to its peers go through the peers'
// proxies; each one is recognised by the server's Raft address in its first
// RPC (hashicorp/raft puts the sender's address in every request header).
type raftProxy struct {
	ln     net.Listener
	target string

	mu         sync.Mutex
	isolated   string              // Raft address of the isolated server, "" when none
	isolatedID string              // its node id, as its Raft handshake states it
	self       string              // this proxy's address (the server's Raft address to its peers)
	conns      map[net.Conn]string // client side -> the first bytes seen
}

func newRaftProxy(t *testing.T, target string) *raftProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &raftProxy{ln: ln, target: target, self: ln.Addr().String(), conns: map[net.Conn]string{}}
	t.Cleanup(func() { ln.Close(); p.closeMatching(func(string) bool { return true }) })
	go p.accept()
	return p
}

func (p *raftProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *raftProxy) blocked(first string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blockedLocked(first)
}

func (p *raftProxy) blockedLocked(first string) bool {
	if p.isolated == "" {
		return false
	}
	// A stream from the isolated server starts with its Raft handshake,
	// which states its node id (length byte, then the id); older streams
	// name its address in the first RPC.
	hello := append([]byte{byte(len(p.isolatedID))}, p.isolatedID...)
	return p.isolated == p.self || bytes.Contains([]byte(first), []byte(p.isolated)) || bytes.Contains([]byte(first), hello)
}

func (p *raftProxy) serve(c net.Conn) {
	buf := make([]byte, 64<<10)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	c.SetReadDeadline(time.Time{})
	first := string(buf[:n])
	if err != nil || p.blocked(first) {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c] = first
	p.mu.Unlock()
	up.Write(buf[:n])
	go func() { io.Copy(c, up); c.Close(); up.Close() }()
	io.Copy(up, c)
	up.Close()
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// closeMatching closes the carried connections whose first bytes match;
// match runs with p.mu held.
func (p *raftProxy) closeMatching(match func(first string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, first := range p.conns {
		if match(first) {
			c.Close()
		}
	}
}

// isolate cuts the server whose Raft address (as its peers know it) is addr
// off from every peer: this proxy refuses or forwards accordingly, and
// drops the connections it already carries for it.
func (p *raftProxy) isolate(addr, id string) {
	p.mu.Lock()
	p.isolated, p.isolatedID = addr, id
	p.mu.Unlock()
	p.closeMatching(p.blockedLocked)
}

// TestCoordServerLeaderIsolated: a leader cut off from its followers (still
// running, its client still connected) stops serving, so it cannot act on
// sessions; the new leader expires no session within timeout + grace period,
// and the client restores its session there with its hold.
func TestCoordServerLeaderIsolated(t *testing.T) {
	proxies := map[string]*raftProxy{} // real Raft address -> its proxy
	var mu sync.Mutex
	cl := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		mu.Lock()
		defer mu.Unlock()
		for i, p := range cfg.Bootstrap {
			px := proxies[p.RaftAddr]
			if px == nil {
				px = newRaftProxy(t, p.RaftAddr)
				proxies[p.RaftAddr] = px
			}
			cfg.Bootstrap[i].RaftAddr = px.self
		}
		cfg.AdvertiseRaftAddr = proxies[cfg.RaftAddr].self
	}))
	leader := cl.LeaderIndex(t)
	a := coordHello(t, cl.Addr(leader))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n"), GraceMs: 120000})
	st, at := a.attach("/n", 0, 1, "k", 500)
	if st != wire.CoordSuccess {
		t.Fatal(wire.CoordStatusName(st))
	}
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	held := a.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1})

	isolated := proxies[cl.Config(leader).RaftAddr].self
	for _, p := range proxies {
		p.isolate(isolated, cl.Config(leader).NodeID)
	}
	// A release sent to the isolated leader cannot act: it is never
	// answered SUCCESS (the hold is checked at the new leader below).
	a.send(wire.CoordRelease, wire.Coord{Name: []byte("s")})
	// The isolated leader stops serving (it cannot commit, so it cannot act
	// on sessions either) and ends its client's connection: with M, or with
	// E 12 (outcome unknown) for the release in flight.
	testcluster.WaitFor(t, 30*time.Second, "the isolated leader stops serving", func() bool { return !cl.Server(leader).IsServing() })
	if f, err := a.r.RecvErr(30 * time.Second); err == nil && f.Type != wire.TypeNotLeader && !(f.Type == wire.TypeError && f.Code == uint16(wire.CodeInternal)) {
		t.Fatalf("the isolated leader's client got %s (op %d, status %d), want M or a closed connection", f.Type, f.Op, f.Code)
	}
	// New clients are sent away too.
	h := testcluster.DialRaw(t, cl.Addr(leader))
	h.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	if f := h.Recv(); f.Type != wire.TypeNotLeader {
		t.Fatalf("hello to the isolated server: %s, want M", f.Type)
	}
	next := -1
	testcluster.WaitFor(t, 30*time.Second, "another server leads", func() bool {
		for i := 0; i < cl.Len(); i++ {
			if i != leader && cl.Server(i).IsServing() {
				next = i
				return true
			}
		}
		return false
	})
	info, last, ok := server.CoordSession(cl.Server(next), at.Session)
	if !ok || info.ExpiresAt < last+120000-int64(time.Minute/time.Millisecond) {
		t.Fatalf("session at the new leader: %+v (last batch time %d), want it kept until takeover + timeout + grace", info, last)
	}
	a2 := coordHello(t, cl.Addr(next))
	if st, _ := a2.attach("/n", at.Session, 2, "k", 500); st != wire.CoordSuccess {
		t.Fatalf("restore at the new leader: %s", wire.CoordStatusName(st))
	}
	d := a2.describe("s", wire.CoordFlagOwners)
	if len(d.Owners) != 1 || d.Owners[0].Session != at.Session || d.Owners[0].OrderID != held.OrderID {
		t.Fatalf("hold after the isolation: %+v", d)
	}
	if cl.Server(leader).IsServing() {
		t.Fatal("the isolated server serves again while isolated")
	}
}
