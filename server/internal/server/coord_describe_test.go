package server_test

import (
	"bytes"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// A describe-semaphore answer is a page of at most 1 MiB of data and
// holders: a semaphore with 1 MiB of data and two owners with 1 MiB each is
// described in four pages, each within a frame's bound, all with the same
// version; the next page starts after the last order id and leaves the data
// out. A change between pages gives a new version.
func TestCoordDescribeSemaphorePages(t *testing.T) {
	cl := testcluster.Start(t, 1)
	a := coordHello(t, cl.Addr(0))
	a.r.AllowCoordFrames()
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	a.start("/n")
	big := func(b byte) []byte { return bytes.Repeat([]byte{b}, wire.MaxCoordData) }
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 2, Data: big('S')})
	var orders []uint64
	var owners []*coordClient
	for i := 0; i < 2; i++ {
		o := coordHello(t, cl.Addr(0))
		owners = append(owners, o)
		o.start("/n")
		ans := o.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1, Data: big(byte('a' + i))})
		orders = append(orders, ans.OrderID)
	}
	w := coordHello(t, cl.Addr(0))
	w.start("/n")
	wid := w.send(wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1, TimeoutMs: wire.CoordWaitForever, Data: []byte("w")})
	wq := w.notification(wire.CoordQueued, wid)

	all := wire.CoordFlagOwners | wire.CoordFlagWaiters
	p1id := a.send(wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: all | wire.CoordFlagWatchOwners})
	st, p1 := a.wait(p1id, wire.CoordDescribeSemaphore)
	if st != wire.CoordSuccess || !bytes.Equal(p1.Data, big('S')) || len(p1.Owners)+len(p1.Queue) != 0 || p1.Flags != wire.CoordFlagMoreHolders || p1.Version == 0 ||
		p1.Limit != 2 || p1.Count != 2 {
		t.Fatalf("page 1: %d bytes of data, %d owners, %d waiters, flags %#x, version %d", len(p1.Data), len(p1.Owners), len(p1.Queue), p1.Flags, p1.Version)
	}
	// Another client keeps working between the pages, on another
	// semaphore: this one's version stays.
	other := coordHello(t, cl.Addr(0))
	other.start("/n")
	var after uint64
	var got []wire.CoordHolder
	for page := 2; ; page++ {
		if a := other.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("other"), Count: 1, Flags: wire.CoordFlagEphemeral}); a.Flags != wire.CoordFlagAcquired {
			t.Fatalf("the other client's acquire before page %d: %+v", page, a)
		}
		other.must(wire.CoordSuccess, wire.CoordRelease, wire.Coord{Name: []byte("other")})
		p := a.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: all | wire.CoordFlagNoData, After: after})
		if len(p.Data) != 0 || len(p.Owners)+len(p.Queue) != 1 || p.Version != p1.Version || p.Count != 2 {
			t.Fatalf("page %d after %d: %d bytes of data, %d owners, %d waiters, version %d (page 1: %d)",
				page, after, len(p.Data), len(p.Owners), len(p.Queue), p.Version, p1.Version)
		}
		got = append(append(got, p.Owners...), p.Queue...)
		after = got[len(got)-1].OrderID
		if p.Flags&wire.CoordFlagMoreHolders == 0 {
			if len(p.Queue) != 1 {
				t.Fatalf("the last page has no waiter: %+v", p)
			}
			break
		}
	}
	if len(got) != 3 || got[0].OrderID != orders[0] || got[1].OrderID != orders[1] || got[2].OrderID != wq.OrderID ||
		!bytes.Equal(got[0].Data, big('a')) || !bytes.Equal(got[1].Data, big('b')) || string(got[2].Data) != "w" {
		t.Fatalf("pages gave order ids %d %d %d, want %v and %d", got[0].OrderID, got[1].OrderID, got[2].OrderID, orders, wq.OrderID)
	}
	// Owners only: the waiter is not listed, and the owners' page says no more.
	p := a.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: wire.CoordFlagOwners | wire.CoordFlagNoData, After: orders[0]})
	if len(p.Owners) != 1 || len(p.Queue) != 0 || p.Flags != 0 {
		t.Fatalf("owners after the first: %d owners, %d waiters, flags %#x", len(p.Owners), len(p.Queue), p.Flags)
	}
	// After everyone: an empty last page.
	if p := a.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: all | wire.CoordFlagNoData, After: wq.OrderID}); len(p.Owners)+len(p.Queue) != 0 || p.Flags != 0 {
		t.Fatalf("after the last order id: %+v", p)
	}
	// An undefined flag bit is a malformed frame: that connection ends with
	// a clear error, the others go on.
	bad := coordHello(t, cl.Addr(0))
	bad.start("/n")
	bad.send(wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: 32})
	if f := bad.r.Recv(); f.Type != wire.TypeError || f.Code != uint16(wire.CodeMalformedFrame) || !bytes.Contains(f.Text, []byte("undefined flag bits")) {
		t.Fatalf("undefined flag bit 32: got %s %d %q", f.Type, f.Code, f.Text)
	}
	// No lists: one page, the data.
	if p := a.describe("s", 0); !bytes.Equal(p.Data, big('S')) || p.Flags != 0 || p.Version != p1.Version {
		t.Fatalf("without lists: %d bytes, flags %#x, version %d", len(p.Data), p.Flags, p.Version)
	}
	// A waiter leaving changes the version (and fires no owner watch) ...
	w.must(wire.CoordSuccess, wire.CoordRelease, wire.Coord{Name: []byte("s")})
	p = a.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: all | wire.CoordFlagNoData, After: orders[1]})
	if len(p.Queue) != 0 || p.Version == p1.Version {
		t.Fatalf("after the waiter left: %d waiters, version %d (was %d)", len(p.Queue), p.Version, p1.Version)
	}
	// ... an update too; neither fires the owners watch that page 1 set,
	// an owner leaving does.
	v := p.Version
	w.must(wire.CoordSuccess, wire.CoordUpdateSemaphore, wire.Coord{Name: []byte("s"), Data: []byte("small")})
	if p := a.describe("s", 0); string(p.Data) != "small" || p.Version == v {
		t.Fatalf("after an update: data %q, version %d (was %d)", p.Data, p.Version, v)
	}
	owners[0].must(wire.CoordSuccess, wire.CoordRelease, wire.Coord{Name: []byte("s")})
	if ch := a.notification(wire.CoordChanged, p1id); ch.Flags != wire.CoordFlagChangedOwners {
		t.Fatalf("the owners watch fired with flags %#x", ch.Flags)
	}
}

// TestCoordDescribePagesAcrossLeaderChange: the version is replicated state,
// so a client whose leader died between pages continues at the new leader
// and compares the versions as if nothing happened (a takeover changes no
// semaphore).
func TestCoordDescribePagesAcrossLeaderChange(t *testing.T) {
	defer server.SetDescribeBudget(server.SetDescribeBudget(1)) // one holder per page
	cl := testcluster.Start(t, 3)
	leader := cl.LeaderIndex(t)
	a := coordHello(t, cl.Addr(leader))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n"), GraceMs: 120000})
	st, at := a.attach("/n", 0, 1, "k", 60000)
	if st != wire.CoordSuccess {
		t.Fatal(wire.CoordStatusName(st))
	}
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 2, Data: []byte("cfg")})
	var orders []uint64
	for i := 0; i < 2; i++ {
		o := coordHello(t, cl.Addr(leader))
		if st, _ := o.attach("/n", 0, 1, "k", 60000); st != wire.CoordSuccess {
			t.Fatal(wire.CoordStatusName(st))
		}
		orders = append(orders, o.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1}).OrderID)
	}
	p1 := a.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: wire.CoordFlagOwners})
	if string(p1.Data) != "cfg" || len(p1.Owners) != 0 || p1.Flags != wire.CoordFlagMoreHolders {
		t.Fatalf("page 1: %+v", p1)
	}
	cl.Kill(leader)
	next := cl.LeaderIndex(t)
	a2 := coordHello(t, cl.Addr(next))
	if st, _ := a2.attach("/n", at.Session, 2, "k", 60000); st != wire.CoordSuccess {
		t.Fatalf("restore at the new leader: %s", wire.CoordStatusName(st))
	}
	var after uint64
	for i, want := range orders {
		p := a2.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s"), Flags: wire.CoordFlagOwners | wire.CoordFlagNoData, After: after})
		more := i < len(orders)-1
		if len(p.Owners) != 1 || p.Owners[0].OrderID != want || p.Version != p1.Version || (p.Flags == wire.CoordFlagMoreHolders) != more {
			t.Fatalf("page %d at the new leader: %+v, want owner %d, version %d", i+2, p, want, p1.Version)
		}
		after = want
	}
}
