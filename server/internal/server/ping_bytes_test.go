package server_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// A client whose request takes many ping intervals to arrive (a large K
// frame on a slow link) cannot answer the server's pings meanwhile: its
// pong would wait behind the request. Its bytes are its sign of life: the
// server keeps the connection and answers the request. A client from which
// nothing arrives is still ended (TestPingsEndDeadConnections).
func TestBytesOfASlowRequestCountAsLife(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.PingInterval = 100 * time.Millisecond }))
	r := testcluster.Hello(t, c.Addr(0), "")
	// Read without answering pings (a pong would land inside the request).
	r.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rd := wire.NewReader(r.Conn)
	rd.AllowCoordReplies()
	frames := make(chan wire.Frame, 64)
	readErr := make(chan error, 1)
	go func() {
		for {
			var f wire.Frame
			if err := rd.Next(&f); err != nil {
				readErr <- err
				return
			}
			f.Text = bytes.Clone(f.Text)
			frames <- f
		}
	}()
	// The pings have begun: the first one goes unanswered.
	select {
	case f := <-frames:
		if f.Type != wire.TypePing {
			t.Fatalf("got %s before any ping", f.Type)
		}
	case err := <-readErr:
		t.Fatal(err)
	}
	// A semaphore's data in no session: refused BAD_SESSION once read.
	req := wire.Append(nil, wire.CoordFrame(false, 7, wire.CoordCreateSemaphore, 0,
		&wire.Coord{Name: []byte("s"), Limit: 1, Data: bytes.Repeat([]byte("d"), 192<<10)}))
	// About 40 ms per 8 KiB: 192 KiB take some 10 ping intervals, with
	// bytes arriving in every one of them.
	const piece = 8 << 10
	for off := 0; off < len(req); off += piece {
		r.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.Conn.Write(req[off:min(off+piece, len(req))]); err != nil {
			t.Fatalf("writing byte %d of %d: %v", off, len(req), err)
		}
		time.Sleep(40 * time.Millisecond) // the slow link under test
	}
	pings := 1
	for {
		select {
		case f := <-frames:
			switch {
			case f.Type == wire.TypePing:
				pings++
				continue
			case f.Type == wire.TypeCoordReply && f.ID == 7:
				if f.Code != wire.CoordBadSession {
					t.Fatalf("answer %s, want BAD_SESSION", wire.CoordStatusName(f.Code))
				}
				if pings < 3 {
					t.Fatalf("only %d pings went unanswered while the request arrived: the scenario did not happen", pings)
				}
				return
			}
			t.Fatalf("got %s code %d %q while the request arrived (%d pings unanswered), want its answer", f.Type, f.Code, f.Text, pings)
		case err := <-readErr:
			t.Fatalf("the connection ended after %d unanswered pings: %v", pings, err)
		}
	}
}
