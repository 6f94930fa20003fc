package transport

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the connection's writer: frames coalesced into few writes, each
// write bounded by its deadline, answers kept across a write error.

// gateConn is a net.Conn whose first Write blocks until released, to show
// that frames queued meanwhile go out together.
type gateConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	bytes   int
	entered chan struct{}
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (g *gateConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	first := g.writes == 1
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	g.bytes += len(b)
	g.mu.Unlock()
	return len(b), nil
}

func (g *gateConn) Read([]byte) (int, error) { <-g.closed; return 0, net.ErrClosed }

func (g *gateConn) Close() error { g.once.Do(func() { close(g.closed) }); return nil }

func (g *gateConn) SetWriteDeadline(time.Time) error { return nil }

func TestWriterCoalescesFrames(t *testing.T) {
	g := &gateConn{entered: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	c := &Conn{nc: g, addr: "gate", pending: make(map[uint32]*Request), wsig: make(chan struct{}, 1), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go c.writeLoop(&wg)
	ctx := context.Background()
	total := 0
	send := func() {
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte("key")}
		if err := c.Start(ctx, NewRequest(wire.TypeDescribe, "key"), &f); err != nil {
			t.Fatal(err)
		}
		total += len(wire.Append(nil, &f))
	}
	send()
	<-g.entered
	for range 100 {
		send()
	}
	close(g.release)
	waitUntil(t, "every frame was written", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.bytes == total
	})
	g.mu.Lock()
	if g.writes != 2 {
		t.Errorf("101 frames took %d writes, want 2", g.writes)
	}
	g.mu.Unlock()
	c.fail(&Ended{kind: failClosed, addr: "gate"})
	wg.Wait()
}

// fakeNet is a net.Conn for writer tests: it records every Write and the
// write deadline in force, and can fail writes.
type fakeNet struct {
	net.Conn
	mu        sync.Mutex
	writes    []int
	failWrite error
	wrote     chan struct{} // signalled after each Write
	reads     chan []byte   // what Read returns, in order
	readDL    chan struct{} // closed on the first SetReadDeadline after a failed write
	failed    bool
	dlOnce    sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newFakeNet() *fakeNet {
	return &fakeNet{wrote: make(chan struct{}, 1000), reads: make(chan []byte, 10),
		readDL: make(chan struct{}), closed: make(chan struct{})}
}

func (n *fakeNet) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer func() {
		n.mu.Unlock()
		n.wrote <- struct{}{}
	}()
	if n.failWrite != nil {
		n.failed = true
		return 0, n.failWrite
	}
	n.writes = append(n.writes, len(b))
	return len(b), nil
}

// Read returns the queued bytes, but only once the writer has failed and
// the client has set a read deadline afterwards (the drain), or the
// connection was closed.
func (n *fakeNet) Read(p []byte) (int, error) {
	select {
	case <-n.readDL:
	case <-n.closed:
		select {
		case b := <-n.reads:
			return copy(p, b), nil
		default:
		}
		return 0, net.ErrClosed
	}
	select {
	case b := <-n.reads:
		return copy(p, b), nil
	default:
		return 0, os.ErrDeadlineExceeded
	}
}

func (n *fakeNet) SetReadDeadline(time.Time) error {
	n.mu.Lock()
	failed := n.failed
	n.mu.Unlock()
	if failed {
		n.dlOnce.Do(func() { close(n.readDL) })
	}
	return nil
}

func (n *fakeNet) SetWriteDeadline(time.Time) error { return nil }

func (n *fakeNet) Close() error { n.closeOnce.Do(func() { close(n.closed) }); return nil }

func testConn(nc net.Conn) *Conn {
	return &Conn{nc: nc, addr: "fake", r: wire.NewReader(nc), interval: time.Hour, pending: make(map[uint32]*Request),
		wsig: make(chan struct{}, 1), done: make(chan struct{})}
}

// A large coalesced batch is written in pieces of at most maxWrite bytes,
// each under its own write deadline.
func TestWriteSizeBoundedPerDeadline(t *testing.T) {
	n := newFakeNet()
	c := testConn(n)
	key := strings.Repeat("k", wire.MaxKey)
	total := 0
	c.mu.Lock() // queue everything before the writer runs: one coalesced batch
	for total < 4<<20 {
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)}
		c.wbuf = wire.Append(c.wbuf, &f)
		total = len(c.wbuf)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go c.writeLoop(&wg)
	c.signal()
	waitUntil(t, "everything was written", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		sum := 0
		for _, w := range n.writes {
			sum += w
		}
		return sum == total
	})
	const bound = 256 << 10 // maxWrite
	n.mu.Lock()
	for i, w := range n.writes {
		if w > bound {
			t.Errorf("write %d: %d bytes under one deadline, want at most %d", i, w, bound)
		}
	}
	n.mu.Unlock()
	c.fail(&Ended{kind: failClosed, addr: "fake"})
	wg.Wait()
}

// A final answer the server sent before the connection broke is not lost
// because the write side failed first: the reader drains what arrived.
func TestWriteErrorKeepsAnswersAlreadyReceived(t *testing.T) {
	n := newFakeNet()
	n.failWrite = errors.New("broken pipe")
	c := testConn(n)
	var wg sync.WaitGroup
	wg.Add(2)
	go c.readLoop(&wg)
	go c.writeLoop(&wg)
	// The server's answer to request id 1 has arrived, unread, when the
	// write fails.
	n.reads <- wire.Append(nil, &wire.Frame{Type: wire.TypeReleased, ID: 1})
	cl := NewRequest(wire.TypeRelease, "k")
	f := wire.Frame{Type: wire.TypeRelease, Token: 4, Key: []byte("k")}
	if err := c.Start(context.Background(), cl, &f); err != nil || cl.ID != 1 {
		t.Fatalf("start: id %d, %v", cl.ID, err)
	}
	a := <-cl.Res
	if a.Fail != nil || a.F.Type != wire.TypeReleased {
		t.Fatalf("answer: %+v, want the R the server had sent", a)
	}
	<-c.done
	if fl := c.failureCause(); fl.kind != failDrop || !strings.Contains(fl.Cause.Error(), "broken pipe") {
		t.Errorf("failure %+v, want the write error", fl)
	}
	wg.Wait()
}

// waitUntil polls cond until it holds, failing the test after a long
// deadline (a condition, never a fixed sleep).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
