package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// ListSessions answers a node's sessions by id, a page at a time: a page
// that is full says so (flag More) and the next one starts after its last id.
func TestCoordListSessionsPages(t *testing.T) {
	cl := testcluster.Start(t, 1)
	admin := coordHello(t, cl.Addr(0))
	admin.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	admin.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/other")})
	coordHello(t, cl.Addr(0)).start("/other") // not listed for /n
	var ids []uint64
	for i := 0; i < 3; i++ {
		ids = append(ids, coordHello(t, cl.Addr(0)).start("/n"))
	}
	all := admin.must(wire.CoordSuccess, wire.CoordListSessions, wire.Coord{Path: []byte("/n")})
	if all.Flags != 0 || len(all.SessionList) != 3 {
		t.Fatalf("one page: %+v", all)
	}
	for i, s := range all.SessionList {
		if s.Session != ids[i] || s.Flags != wire.CoordFlagAttached || s.TimeoutMs != 30000 || s.SeqNo != 1 {
			t.Fatalf("session %d: %+v, want id %d attached", i, s, ids[i])
		}
	}
	defer server.SetListSessionsBudget(server.SetListSessionsBudget(1)) // one session per page
	var after uint64
	var paged []uint64
	for {
		p := admin.must(wire.CoordSuccess, wire.CoordListSessions, wire.Coord{Path: []byte("/n"), After: after})
		if len(p.SessionList) != 1 {
			t.Fatalf("page after %d: %+v", after, p)
		}
		after = p.SessionList[0].Session
		paged = append(paged, after)
		if p.Flags&wire.CoordFlagMore == 0 {
			break
		}
	}
	if len(paged) != 3 || paged[0] != ids[0] || paged[2] != ids[2] {
		t.Fatalf("pages gave %v, want %v", paged, ids)
	}
	admin.must(wire.CoordNotFound, wire.CoordListSessions, wire.Coord{Path: []byte("/missing")})
}
