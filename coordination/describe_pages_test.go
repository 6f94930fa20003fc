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

// pageServer is a scripted coordination server on loopback (the client
// module has no real server): it accepts a session and answers each
// describe-semaphore request with page(n, request), n counting from 0.
type pageServer struct {
	t    *testing.T
	ln   net.Listener
	page func(n int, req wire.Coord) wire.Coord

	mu   sync.Mutex
	reqs []wire.Coord // the describe requests, in order
}

func startPageServer(t *testing.T, page func(n int, req wire.Coord) wire.Coord) *pageServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := &pageServer{t: t, ln: ln, page: page}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			go ps.serve(nc)
		}
	}()
	return ps
}

func (ps *pageServer) serve(nc net.Conn) {
	r := wire.NewReader(nc)
	var f wire.Frame
	if r.Next(&f) != nil || f.Type != wire.TypeHello {
		return
	}
	nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeReady, Version: wire.Version, Flags: wire.ReadyLeader, Interval: 5000, Count: 64, Text: []byte("fake")}))
	r.AllowCoordFrames()
	for r.Next(&f) == nil {
		if f.Type != wire.TypeCoord {
			continue
		}
		var req wire.Coord
		if err := wire.DecodeCoord(&f, &req); err != nil {
			ps.t.Errorf("the client sent a malformed K: %v", err)
			return
		}
		var ans wire.Coord
		switch f.Op {
		case wire.CoordAttach:
			ans = wire.Coord{Session: 1, SeqNo: req.SeqNo}
		case wire.CoordDescribeSemaphore:
			ps.mu.Lock()
			n := len(ps.reqs)
			req.Name = append([]byte(nil), req.Name...)
			ps.reqs = append(ps.reqs, req)
			ps.mu.Unlock()
			ans = ps.page(n, req)
		}
		nc.Write(wire.Append(nil, wire.CoordFrame(true, f.ID, f.Op, wire.CoordSuccess, &ans)))
	}
}

func (ps *pageServer) requests() []wire.Coord {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]wire.Coord(nil), ps.reqs...)
}

func pageSession(t *testing.T, ps *pageServer) (*coordination.Session, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c := newClient(t, ps.ln.Addr().String())
	s, err := c.Session(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

// TestDescribeSemaphoreRestartsOnVersionChange: when a later page has
// another version than the first (the semaphore changed between the reads),
// DescribeSemaphore starts again from the first page, with the watch, and
// returns the pages of one version only; later pages leave the data out
// and continue after the last order id.
func TestDescribeSemaphoreRestartsOnVersionChange(t *testing.T) {
	owner := wire.CoordHolder{OrderID: 5, Session: 1, Count: 1, Data: []byte("a")}
	ps := startPageServer(t, func(n int, req wire.Coord) wire.Coord {
		switch n {
		case 0, 2: // first pages: version 1, then 2
			return wire.Coord{Limit: 2, Count: 1, Data: []byte("d"), Flags: wire.CoordFlagMoreHolders, Owners: []wire.CoordHolder{owner}, Version: uint64(1 + n/2)}
		case 1: // the semaphore changed: version 2, and someone else queued
			return wire.Coord{Limit: 2, Count: 1, Queue: []wire.CoordHolder{{OrderID: 7, Session: 3, Count: 2}}, Version: 2}
		default:
			return wire.Coord{Limit: 2, Count: 1, Queue: []wire.CoordHolder{{OrderID: 9, Session: 4, Count: 2, Data: []byte("w")}}, Version: 2}
		}
	})
	s, ctx := pageSession(t, ps)
	d, ch, err := s.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true, Waiters: true, WatchOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	if ch == nil || string(d.Data) != "d" || len(d.Owners) != 1 || d.Owners[0].OrderID != 5 || len(d.Waiters) != 1 || d.Waiters[0].OrderID != 9 {
		t.Fatalf("described %+v", d)
	}
	all := wire.CoordFlagOwners | wire.CoordFlagWaiters
	want := []wire.Coord{
		{Flags: all | wire.CoordFlagWatchOwners}, {Flags: all | wire.CoordFlagNoData, After: 5},
		{Flags: all | wire.CoordFlagWatchOwners}, {Flags: all | wire.CoordFlagNoData, After: 5},
	}
	reqs := ps.requests()
	if len(reqs) != len(want) {
		t.Fatalf("%d describe requests, want %d: %+v", len(reqs), len(want), reqs)
	}
	for i, r := range reqs {
		if string(r.Name) != "s" || r.Flags != want[i].Flags || r.After != want[i].After {
			t.Fatalf("request %d: flags %#x after %d, want flags %#x after %d", i, r.Flags, r.After, want[i].Flags, want[i].After)
		}
	}
}

// TestDescribeSemaphoreEmptyPage: a server whose page after the first lists
// nobody yet says more follow would make the client loop; it is refused.
func TestDescribeSemaphoreEmptyPage(t *testing.T) {
	ps := startPageServer(t, func(n int, req wire.Coord) wire.Coord {
		return wire.Coord{Limit: 1, Flags: wire.CoordFlagMoreHolders, Version: 1}
	})
	s, ctx := pageSession(t, ps)
	if _, _, err := s.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true}); !errors.Is(err, coordination.ErrUnavailable) {
		t.Fatalf("describe: %v, want ErrUnavailable", err)
	}
	if n := len(ps.requests()); n != 2 {
		t.Fatalf("%d describe requests, want 2", n)
	}
}
