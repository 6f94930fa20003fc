package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// RELAXED read and attach modes are accepted, stored and reported, and
// served with STRICT guarantees (docs/coordination.md): a read sees every
// write committed before it, and a pipelined read on one connection sees
// the writes sent before it, which a read answered at once from the
// applied state (YDB's RELAXED) would not.
// answer is wait for id, also when its answer was already read (and kept in
// other) while an earlier wait ran.
func (c *coordClient) answer(id uint32, op uint8) (uint16, wire.Coord) {
	c.t.Helper()
	for i, f := range c.other {
		if f.ID == id && f.Op == op {
			c.other = append(c.other[:i], c.other[i+1:]...)
			var b wire.Coord
			if err := wire.DecodeCoord(&f, &b); err != nil {
				c.t.Fatal(err)
			}
			return f.Code, b
		}
	}
	return c.wait(id, op)
}

func TestCoordRelaxedModesServeStrict(t *testing.T) {
	cl := testcluster.Start(t, 3)
	a := coordHello(t, cl.Addr(cl.LeaderIndex(t)))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/r"), ReadMode: 1, AttachMode: 2})
	if n := a.must(wire.CoordSuccess, wire.CoordDescribeNode, wire.Coord{Path: []byte("/r")}); n.ReadMode != 1 || n.AttachMode != 2 {
		t.Fatalf("modes reported %d/%d, want RELAXED (1) / RELAXED (2)", n.ReadMode, n.AttachMode)
	}
	a.start("/r")
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("cfg"), Limit: 1, Data: []byte("v0")})
	for i, v := range []string{"v1", "v2", "v3"} {
		// Update, describe semaphore, alter node and describe node, in one write.
		up, desc, alter, nd := a.r.ID(), a.r.ID(), a.r.ID(), a.r.ID()
		var b []byte
		b = wire.Append(b, wire.CoordFrame(false, up, wire.CoordUpdateSemaphore, 0, &wire.Coord{Name: []byte("cfg"), Data: []byte(v)}))
		b = wire.Append(b, wire.CoordFrame(false, desc, wire.CoordDescribeSemaphore, 0, &wire.Coord{Name: []byte("cfg")}))
		b = wire.Append(b, wire.CoordFrame(false, alter, wire.CoordAlterNode, 0, &wire.Coord{Path: []byte("/r"), MaxWaiters: uint32(100 + i)}))
		b = wire.Append(b, wire.CoordFrame(false, nd, wire.CoordDescribeNode, 0, &wire.Coord{Path: []byte("/r")}))
		a.r.SendBytes(b)
		if st, _ := a.answer(up, wire.CoordUpdateSemaphore); st != wire.CoordSuccess {
			t.Fatal(wire.CoordStatusName(st))
		}
		if st, d := a.answer(desc, wire.CoordDescribeSemaphore); st != wire.CoordSuccess || string(d.Data) != v {
			t.Fatalf("pipelined describe after update %q read %q (%s)", v, d.Data, wire.CoordStatusName(st))
		}
		a.answer(alter, wire.CoordAlterNode)
		if st, n := a.answer(nd, wire.CoordDescribeNode); st != wire.CoordSuccess || n.MaxWaiters != uint32(100+i) || n.ReadMode != 1 {
			t.Fatalf("pipelined describe node after alter read %+v (%s)", n, wire.CoordStatusName(st))
		}
	}
	// Another connection reads what this one's answers confirmed.
	b := coordHello(t, cl.Addr(cl.LeaderIndex(t)))
	b.start("/r")
	if d := b.describe("cfg", 0); string(d.Data) != "v3" {
		t.Fatalf("another connection read %q", d.Data)
	}
}
