//go:build unix

package transport

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the caller's own write: a request alone on its connection is
// written by the goroutine that sends it; with others in flight, the writer
// gathers frames; what the socket does not take goes to the writer in order.

// rawConnPair is a Conn on a loopback TCP connection whose writer does not
// run yet (start it with run), and the server's side of that connection.
func rawConnPair(t *testing.T) (c *Conn, srv *net.TCPConn, run func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c = &Conn{nc: nc, raw: rawSocket(nc), addr: "loopback", interval: time.Hour,
		pending: make(map[uint32]*Request), wsig: make(chan struct{}, 1), done: make(chan struct{})}
	if c.raw == nil {
		t.Fatal("no raw socket on a loopback TCP connection")
	}
	var wg sync.WaitGroup
	var once sync.Once
	run = func() {
		once.Do(func() {
			wg.Add(1)
			go c.writeLoop(&wg)
		})
	}
	t.Cleanup(func() {
		close(c.done)
		wg.Wait()
		nc.Close()
		sc.Close()
	})
	return c, sc.(*net.TCPConn), run
}

func describe(key string) (*Request, *wire.Frame) {
	return NewRequest(wire.TypeDescribe, key), &wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)}
}

// A request alone on its connection leaves with its caller's write: it
// reaches the server although no writer runs. The next request, sent while
// the first awaits its answer, is left to the writer, which gathers the
// frames of callers sending together.
func TestALoneRequestIsWrittenByItsCaller(t *testing.T) {
	c, srv, _ := rawConnPair(t)
	ctx := context.Background()
	cl, f := describe("first")
	if err := c.Start(ctx, cl, f); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got wire.Frame
	if err := wire.NewReader(srv).Next(&got); err != nil {
		t.Fatalf("the lone request did not reach the server with no writer running: %v", err)
	}
	if got.Type != wire.TypeDescribe || string(got.Key) != "first" {
		t.Fatalf("server read %v %q, want D \"first\"", got.Type, got.Key)
	}
	cl2, f2 := describe("second")
	if err := c.Start(ctx, cl2, f2); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	queued := len(c.wbuf)
	c.mu.Unlock()
	if queued == 0 {
		t.Fatal("a request sent while another is in flight was written by its caller; want it left to the writer, which gathers frames")
	}
}

// A frame the socket takes only in part is finished by the writer, ahead of
// the frames queued after it: the server reads each whole and in order.
func TestTheWriterFinishesAPartialCallerWrite(t *testing.T) {
	c, srv, run := rawConnPair(t)
	c.nc.(*net.TCPConn).SetWriteBuffer(4096)
	srv.SetReadBuffer(8192)
	ctx := context.Background()
	// Just under the large-request size, so that its caller writes it; far
	// more than the two sockets' buffers, which nobody empties yet.
	data := bytes.Repeat([]byte("0123456789abcdef"), (largeRequest-1024)/16)
	cl := NewRequest(wire.TypeCoord, "")
	f := wire.CoordFrame(false, 0, wire.CoordUpdateSemaphore, 0, &wire.Coord{Path: []byte("/n"), Name: []byte("s"), Data: data})
	if err := c.Start(ctx, cl, f); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	left := len(c.wbuf)
	c.mu.Unlock()
	if left == 0 {
		t.Fatal("the socket took the whole frame at once; this test shows nothing")
	}
	// Queued behind the rest, and written by the writer after it.
	c.mu.Lock()
	c.wbuf = wire.Append(c.wbuf, &wire.Frame{Type: wire.TypePong, Nonce: 77})
	c.mu.Unlock()
	run()
	c.signal()
	srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(srv)
	r.AllowCoordFrames()
	var got wire.Frame
	if err := r.Next(&got); err != nil {
		t.Fatalf("the partly written frame: %v", err)
	}
	var body wire.Coord
	if got.Type != wire.TypeCoord || wire.DecodeCoord(&got, &body) != nil || !bytes.Equal(body.Data, data) {
		t.Fatalf("read %v with %d bytes of data, want the update whole (%d bytes)", got.Type, len(body.Data), len(data))
	}
	if err := r.Next(&got); err != nil || got.Type != wire.TypePong || got.Nonce != 77 {
		t.Fatalf("after it: %v nonce %d (%v), want the pong queued behind it", got.Type, got.Nonce, err)
	}
}
