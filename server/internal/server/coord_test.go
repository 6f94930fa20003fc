package server_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// coordClient speaks K/T over a raw connection. Frames that are not the
// answer awaited (notifications, answers to other requests) are kept in
// other, in arrival order.
type coordClient struct {
	t     *testing.T
	r     *testcluster.Raw
	other []wire.Frame
}

func coordHello(t *testing.T, addr string) *coordClient {
	return &coordClient{t: t, r: testcluster.Hello(t, addr, "")}
}

// send sends a K request and returns its id.
func (c *coordClient) send(op uint8, body wire.Coord) uint32 {
	id := c.r.ID()
	c.r.Send(wire.CoordFrame(false, id, op, 0, &body))
	return id
}

// wait reads until the final answer to id (a T with its op) and returns its
// status and body; Queued and other frames go to other.
func (c *coordClient) wait(id uint32, op uint8) (uint16, wire.Coord) {
	c.t.Helper()
	for {
		f := c.r.Recv()
		if f.Type != wire.TypeCoordReply {
			c.t.Fatalf("waiting for T %d: got %s (code %d %q)", id, f.Type, f.Code, f.Text)
		}
		if f.ID == id && f.Op == op {
			var b wire.Coord
			if err := wire.DecodeCoord(&f, &b); err != nil {
				c.t.Fatal(err)
			}
			return f.Code, b
		}
		c.other = append(c.other, f)
	}
}

func (c *coordClient) call(op uint8, body wire.Coord) (uint16, wire.Coord) {
	c.t.Helper()
	return c.wait(c.send(op, body), op)
}

// must calls and fails unless the status is want.
func (c *coordClient) must(want uint16, op uint8, body wire.Coord) wire.Coord {
	c.t.Helper()
	st, b := c.call(op, body)
	if st != want {
		c.t.Fatalf("op %d: status %s (%s), want %s", op, wire.CoordStatusName(st), b.Message, wire.CoordStatusName(want))
	}
	return b
}

// notification waits for a notification op (for id, or 0), skipping nothing
// else: a frame already received goes first.
func (c *coordClient) notification(op uint8, id uint32) wire.Coord {
	c.t.Helper()
	for i, f := range c.other {
		if f.Op == op && f.ID == id {
			c.other = append(c.other[:i], c.other[i+1:]...)
			var b wire.Coord
			wire.DecodeCoord(&f, &b)
			return b
		}
	}
	for {
		f := c.r.Recv()
		if f.Type == wire.TypeCoordReply && f.Op == op && f.ID == id {
			var b wire.Coord
			if err := wire.DecodeCoord(&f, &b); err != nil {
				c.t.Fatal(err)
			}
			return b
		}
		c.other = append(c.other, f)
	}
}

func (c *coordClient) attach(path string, session, seq uint64, key string, timeoutMs uint64) (uint16, wire.Coord) {
	return c.call(wire.CoordAttach, wire.Coord{Path: []byte(path), Session: session, SeqNo: seq, Key: []byte(key), TimeoutMs: timeoutMs})
}

func (c *coordClient) start(path string) uint64 {
	c.t.Helper()
	st, b := c.attach(path, 0, 1, "k", 30000)
	if st != wire.CoordSuccess {
		c.t.Fatalf("attach: %s", wire.CoordStatusName(st))
	}
	return b.Session
}

func (c *coordClient) describe(name string, flags uint8) wire.Coord {
	c.t.Helper()
	return c.must(wire.CoordSuccess, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte(name), Flags: flags})
}

func TestCoordServerSemaphores(t *testing.T) {
	cl := testcluster.Start(t, 1)
	a, b := coordHello(t, cl.Addr(0)), coordHello(t, cl.Addr(0))
	a.must(wire.CoordBadSession, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1}) // no session yet
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	a.must(wire.CoordAlreadyExists, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	if n := a.must(wire.CoordSuccess, wire.CoordDescribeNode, wire.Coord{Path: []byte("/n")}); n.GraceMs != 10000 || n.SelfCheckMs != 1000 {
		t.Fatalf("describe node: %+v", n)
	}
	sa, sb := a.start("/n"), b.start("/n")
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1, Data: []byte("cfg")})
	got := a.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1})
	if got.Flags&wire.CoordFlagAcquired == 0 || got.OrderID == 0 {
		t.Fatalf("first acquire: %+v", got)
	}
	orderA := got.OrderID
	// b waits: Queued (not final), with a larger order id.
	idB := b.send(wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1, TimeoutMs: wire.CoordWaitForever})
	if q := b.notification(wire.CoordQueued, idB); q.OrderID <= orderA {
		t.Fatalf("queued with order %d after %d", q.OrderID, orderA)
	}
	// b watches the owners; a's release hands the semaphore to b in FIFO order.
	d := b.describe("s", wire.CoordFlagOwners|wire.CoordFlagWaiters|wire.CoordFlagWatchOwners)
	if len(d.Owners) != 1 || d.Owners[0].Session != sa || len(d.Queue) != 1 || d.Queue[0].Session != sb || string(d.Data) != "cfg" {
		t.Fatalf("describe: %+v", d)
	}
	watchID := b.r.ID() - 1 // the describe's id
	if rel := a.must(wire.CoordSuccess, wire.CoordRelease, wire.Coord{Name: []byte("s")}); rel.Flags != wire.CoordFlagReleased {
		t.Fatalf("release: %+v", rel)
	}
	st, gb := b.wait(idB, wire.CoordAcquire)
	if st != wire.CoordSuccess || gb.Flags&wire.CoordFlagAcquired == 0 || gb.OrderID <= orderA {
		t.Fatalf("b's acquire: %s %+v", wire.CoordStatusName(st), gb)
	}
	if ch := b.notification(wire.CoordChanged, watchID); ch.Flags&wire.CoordFlagChangedOwners == 0 {
		t.Fatalf("watch fired %+v", ch)
	}
	// Try once on a held semaphore: answered, not acquired, not queued.
	if r := a.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1}); r.Flags != 0 {
		t.Fatalf("try once: %+v", r)
	}
	// A waiter's timeout ends its acquire with acquired = false.
	idT := a.send(wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1, TimeoutMs: 200})
	if st, r := a.wait(idT, wire.CoordAcquire); st != wire.CoordSuccess || r.Flags != 0 {
		t.Fatalf("timed out acquire: %s %+v", wire.CoordStatusName(st), r)
	}
	// Force delete tells the owner.
	a.must(wire.CoordPreconditionFailed, wire.CoordDeleteSemaphore, wire.Coord{Name: []byte("s")})
	a.must(wire.CoordSuccess, wire.CoordDeleteSemaphore, wire.Coord{Name: []byte("s"), Flags: wire.CoordFlagForce})
	if lost := b.notification(wire.CoordLost, 0); string(lost.Name) != "s" || lost.OrderID != gb.OrderID {
		t.Fatalf("lost: %+v", lost)
	}
	b.must(wire.CoordNotFound, wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s")})
}

func TestCoordServerWatchReplacedAndData(t *testing.T) {
	cl := testcluster.Start(t, 1)
	a := coordHello(t, cl.Addr(0))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	a.start("/n")
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("cfg"), Limit: 1})
	a.describe("cfg", wire.CoordFlagWatchData)
	first := a.r.ID() - 1
	a.describe("cfg", wire.CoordFlagWatchData)
	second := a.r.ID() - 1
	if ch := a.notification(wire.CoordChanged, first); ch.Flags != 0 {
		t.Fatalf("replaced watch fired %+v, want changed(false, false)", ch)
	}
	a.must(wire.CoordSuccess, wire.CoordUpdateSemaphore, wire.Coord{Name: []byte("cfg"), Data: []byte("v2")})
	if ch := a.notification(wire.CoordChanged, second); ch.Flags != wire.CoordFlagChangedData {
		t.Fatalf("data watch fired %+v", ch)
	}
	// One-shot: a second update fires nothing (the next frame is the answer).
	a.must(wire.CoordSuccess, wire.CoordUpdateSemaphore, wire.Coord{Name: []byte("cfg"), Data: []byte("v3")})
	if len(a.other) != 0 {
		t.Fatalf("frames after a one-shot watch fired: %+v", a.other)
	}
}

func TestCoordServerRestoreAndExpiry(t *testing.T) {
	cl := testcluster.Start(t, 1)
	a, b := coordHello(t, cl.Addr(0)), coordHello(t, cl.Addr(0))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	st, at := a.attach("/n", 0, 1, "secret", 1000)
	if st != wire.CoordSuccess {
		t.Fatal(wire.CoordStatusName(st))
	}
	b.start("/n")
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	held := a.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1})
	idB := b.send(wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1, TimeoutMs: wire.CoordWaitForever})
	b.notification(wire.CoordQueued, idB)

	// The connection drops; a new one restores the session with a higher
	// seq_no: the hold is still there, b still waits.
	a.r.Conn.Close()
	a2 := coordHello(t, cl.Addr(0))
	if st, _ := a2.attach("/n", at.Session, 2, "wrong", 1000); st != wire.CoordBadSession {
		t.Fatalf("restore with a wrong key: %s", wire.CoordStatusName(st))
	}
	if st, r := a2.attach("/n", at.Session, 2, "secret", 1000); st != wire.CoordSuccess || r.Session != at.Session || r.SeqNo != 2 {
		t.Fatalf("restore: %s %+v", wire.CoordStatusName(st), r)
	}
	a3 := coordHello(t, cl.Addr(0))
	if st, _ := a3.attach("/n", at.Session, 1, "secret", 1000); st != wire.CoordBadSession {
		t.Fatalf("restore with a lower seq_no: %s", wire.CoordStatusName(st))
	}
	d := a2.describe("s", wire.CoordFlagOwners|wire.CoordFlagWaiters)
	if len(d.Owners) != 1 || d.Owners[0].OrderID != held.OrderID || len(d.Queue) != 1 {
		t.Fatalf("after restore: %+v", d)
	}
	// The session's connection drops for good: after its timeout it expires,
	// its hold is released and b is granted.
	a2.r.Conn.Close()
	if st, r := b.wait(idB, wire.CoordAcquire); st != wire.CoordSuccess || r.Flags&wire.CoordFlagAcquired == 0 {
		t.Fatalf("b after a's expiry: %s %+v", wire.CoordStatusName(st), r)
	}
	if st, _ := a3.attach("/n", at.Session, 3, "secret", 1000); st != wire.CoordSessionExpired {
		t.Fatalf("restore of an expired session: %s", wire.CoordStatusName(st))
	}
}

// TestCoordServerLeaderKill: a new leader expires no session before its
// timeout plus the node's grace period from the takeover, and a client that
// restores meanwhile keeps its hold.
func TestCoordServerLeaderKill(t *testing.T) {
	cl := testcluster.Start(t, 3)
	leader := cl.LeaderIndex(t)
	a := coordHello(t, cl.Addr(leader))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n"), GraceMs: 120000})
	st, at := a.attach("/n", 0, 1, "k", 500)
	if st != wire.CoordSuccess {
		t.Fatal(wire.CoordStatusName(st))
	}
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1})
	held := a.must(wire.CoordSuccess, wire.CoordAcquire, wire.Coord{Name: []byte("s"), Count: 1})

	cl.Kill(leader)
	next := cl.LeaderIndex(t)
	info, last, ok := server.CoordSession(cl.Server(next), at.Session)
	if !ok || info.Attached || info.ExpiresAt < last+500+120000-int64(time.Minute/time.Millisecond) {
		// The takeover time is at most the last batch time; the expiry is
		// takeover + timeout + grace, so well over a minute past last.
		t.Fatalf("session after the takeover: %+v (last batch time %d), want detached until takeover + 500 ms + 120 s", info, last)
	}
	a2 := coordHello(t, cl.Addr(next))
	if st, _ := a2.attach("/n", at.Session, 2, "k", 500); st != wire.CoordSuccess {
		t.Fatalf("restore at the new leader: %s", wire.CoordStatusName(st))
	}
	d := a2.describe("s", wire.CoordFlagOwners)
	if len(d.Owners) != 1 || d.Owners[0].Session != at.Session || d.Owners[0].OrderID != held.OrderID {
		t.Fatalf("hold after the failover: %+v", d)
	}
}

// TestCoordServerLargeFrames: K frames over 64 KiB (semaphore data up to
// 1 MiB) are read only after the hello; before it the usual bound holds.
func TestCoordServerLargeFrames(t *testing.T) {
	cl := testcluster.Start(t, 1)
	big := wire.Append(nil, wire.CoordFrame(false, 1, wire.CoordUpdateSemaphore, 0, &wire.Coord{Name: []byte("s"), Data: make([]byte, 200<<10)}))
	pre := testcluster.DialRaw(t, cl.Addr(0))
	pre.SendBytes(big[:64]) // the length prefix and a little: nothing more is read
	expectFatal(t, pre, wire.CodeFrameTooLarge)

	a := coordHello(t, cl.Addr(0))
	a.must(wire.CoordSuccess, wire.CoordCreateNode, wire.Coord{Path: []byte("/n")})
	a.start("/n")
	data := bytes.Repeat([]byte("0123456789abcdef"), wire.MaxCoordData/16)
	a.must(wire.CoordSuccess, wire.CoordCreateSemaphore, wire.Coord{Name: []byte("s"), Limit: 1, Data: data})
	// The answer is larger than 64 KiB too: read it with a Reader that allows it.
	id := a.send(wire.CoordDescribeSemaphore, wire.Coord{Name: []byte("s")})
	a.r.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rd := wire.NewReader(a.r.Conn)
	rd.AllowCoordFrames()
	var f wire.Frame
	for {
		if err := rd.Next(&f); err != nil {
			t.Fatal(err)
		}
		if f.Type == wire.TypeCoordReply && f.ID == id {
			break
		}
	}
	var d wire.Coord
	if err := wire.DecodeCoord(&f, &d); err != nil || !bytes.Equal(d.Data, data) {
		t.Fatalf("1 MiB of data read back: %v (%d bytes)", err, len(d.Data))
	}
}
