package server

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of how the core's answers are written: held until the turn ends,
// then written by the core itself, with what the socket does not take left
// to the writer in order.

// loopbackPair is a connected TCP pair on loopback: the server's side and
// the client's.
func loopbackPair(t *testing.T) (srv, cli *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return sc.(*net.TCPConn), cc.(*net.TCPConn)
}

// answerConn is a server connection on the server side of a loopback pair,
// with one request in flight per id in ids.
func answerConn(t *testing.T, nc net.Conn, ids ...uint32) *conn {
	s := &Server{cfg: Config{WriteBufferLimit: 64 << 20}}
	c := newConn(s, nc)
	c.srv.metrics = nil
	for _, id := range ids {
		c.inflight[id] = true
		c.acquires++
		c.busy.Add(1)
	}
	return c
}

// A final answer from the core waits for the end of the core's turn, and
// then the core's own write sends it: no writer goroutine starts.
func TestCoreAnswerIsWrittenAtTheTurnsEnd(t *testing.T) {
	sc, cc := loopbackPair(t)
	c := answerConn(t, sc, 7)
	if !c.Finish(7, &wire.Frame{Type: wire.TypeGranted, ID: 7, Token: 42, LeaseMs: 1000}) {
		t.Fatal("Finish refused on an open connection")
	}
	c.mu.Lock()
	held, writing := len(c.out), c.writing
	c.mu.Unlock()
	if held == 0 || writing {
		t.Fatalf("before the turn ended: %d bytes queued, writer running %v; want the answer held, no writer", held, writing)
	}
	c.srv.answers.flush()
	c.mu.Lock()
	held, writing = len(c.out), c.writing
	c.mu.Unlock()
	if held != 0 || writing {
		t.Fatalf("after the turn: %d bytes still queued, writer running %v; want it written by the turn's end", held, writing)
	}
	cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(cc)
	var f wire.Frame
	if err := r.Next(&f); err != nil {
		t.Fatal(err)
	}
	if f.Type != wire.TypeGranted || f.ID != 7 || f.Token != 42 {
		t.Fatalf("read %v id %d token %d, want G id 7 token 42", f.Type, f.ID, f.Token)
	}
}

// What the socket does not take at once goes to the writer, ahead of what
// is queued after it: the client reads every answer whole and in order.
func TestCoreAnswersTheSocketCannotTakeGoToTheWriterInOrder(t *testing.T) {
	sc, cc := loopbackPair(t)
	sc.SetWriteBuffer(4096)
	cc.SetReadBuffer(64 << 10) // fixed, not tuned up; small windows would stall TCP itself
	const n = 2000
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i + 1)
	}
	c := answerConn(t, sc, ids...)
	// Far more than the socket's buffers hold, so the core's write is
	// partial; then more answers in a second turn while the writer runs.
	for _, id := range ids[:n/2] {
		c.Finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Text: bytes.Repeat([]byte{'a' + byte(id%26)}, 1000)})
	}
	c.srv.answers.flush()
	c.mu.Lock()
	writing := c.writing
	c.mu.Unlock()
	if !writing {
		t.Fatal("no writer runs: the socket took everything at once, so this test shows nothing")
	}
	for _, id := range ids[n/2:] {
		c.Finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Text: bytes.Repeat([]byte{'a' + byte(id%26)}, 1000)})
	}
	c.srv.answers.flush()
	cc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(io.Reader(cc))
	for _, id := range ids {
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		want := bytes.Repeat([]byte{'a' + byte(id%26)}, 1000)
		if f.ID != id || !bytes.Equal(f.Text, want) {
			t.Fatalf("read answer %d (%d bytes of %q...), want answer %d: out of order or torn", f.ID, len(f.Text), f.Text[:min(8, len(f.Text))], id)
		}
	}
}
