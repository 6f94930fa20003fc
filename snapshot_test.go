package ticketing

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// snapshotData is a snapshot of 40 pieces (more than SaveSnapshot buffers)
// of different sizes.
func snapshotData() [][]byte {
	var pieces [][]byte
	for i := range 40 {
		pieces = append(pieces, bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*37))
	}
	return pieces
}

func snapshotMeta(pieces [][]byte) string {
	h := sha256.New()
	n := 0
	for _, p := range pieces {
		h.Write(p)
		n += len(p)
	}
	return fmt.Sprintf(`{"index":42,"term":3,"size":%d,"sha256":"%s"}`, n, hex.EncodeToString(h.Sum(nil)))
}

// adminServer answers an admin hello, "status" with a leader status and
// "snapshot.save" with snap, which sends what the test wants.
func adminServer(t *testing.T, snap func(c *faketicketd.Conn, id uint32)) *faketicketd.Server {
	return faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NodeID: "n1"}); err != nil {
			return
		}
		for {
			f, err := c.ReadType(wire.TypeAdmin)
			if err != nil {
				return
			}
			var req struct{ Op string }
			json.Unmarshal(f.Text, &req)
			switch req.Op {
			case "status":
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(`{"node_id":"n1","role":"leader"}`)})
			case "snapshot.save":
				snap(c, f.ID)
			}
		}
	})
}

// streamSnapshot sends pieces as V status 3 and then final as V status
// code.
func streamSnapshot(c *faketicketd.Conn, id uint32, pieces [][]byte, code uint16, final string) {
	for _, p := range pieces {
		c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminwire.StatusChunk, Text: p})
	}
	c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: code, Text: []byte(final)})
}

func dialAdmin(t *testing.T, addr string) *Admin {
	t.Helper()
	a, err := DialAdmin(ctxFor(t), addr, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// stillUsable checks that the admin session answers after a snapshot.
func stillUsable(t *testing.T, a *Admin) {
	t.Helper()
	if st, err := a.Status(ctxFor(t)); err != nil || st.NodeID != "n1" {
		t.Errorf("status after the snapshot: %+v, %v", st, err)
	}
}

// The pieces are written in order and verified; the session goes on.
func TestSaveSnapshot(t *testing.T) {
	pieces := snapshotData()
	srv := adminServer(t, func(c *faketicketd.Conn, id uint32) { streamSnapshot(c, id, pieces, 0, snapshotMeta(pieces)) })
	a := dialAdmin(t, srv.Addr())
	var buf bytes.Buffer
	info, err := a.SaveSnapshot(ctxFor(t), &buf)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join(pieces, nil)
	sum := sha256.Sum256(want)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("wrote %d bytes, not the %d sent in order", buf.Len(), len(want))
	}
	if info != (SnapshotInfo{Index: 42, Term: 3, Size: int64(len(want)), SHA256: hex.EncodeToString(sum[:])}) {
		t.Errorf("info %+v", info)
	}
	stillUsable(t, a)
}

// gatedWriter blocks its first Write until open is closed.
type gatedWriter struct {
	open chan struct{}
	buf  bytes.Buffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	return g.buf.Write(p)
}

// A writer slower than the network: the whole stream, final answer
// included, has been sent before the writer takes the first piece; nothing
// is lost or reordered, and the final answer is taken only after every piece.
func TestSaveSnapshotSlowWriter(t *testing.T) {
	pieces := snapshotData()
	sent := make(chan struct{})
	srv := adminServer(t, func(c *faketicketd.Conn, id uint32) {
		streamSnapshot(c, id, pieces, 0, snapshotMeta(pieces))
		close(sent)
	})
	a := dialAdmin(t, srv.Addr())
	w := &gatedWriter{open: make(chan struct{})}
	go func() {
		<-sent
		close(w.open)
	}()
	if _, err := a.SaveSnapshot(ctxFor(t), w); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.buf.Bytes(), bytes.Join(pieces, nil)) {
		t.Errorf("wrote %d bytes, not the pieces in order", w.buf.Len())
	}
	stillUsable(t, a)
}

// Every way a snapshot can fail is an error, never a verified snapshot.
func TestSaveSnapshotFailures(t *testing.T) {
	pieces := snapshotData()[:3]
	sum := sha256.Sum256(bytes.Join(pieces, nil))
	hexSum := hex.EncodeToString(sum[:])
	size := len(bytes.Join(pieces, nil))
	tests := []struct {
		name  string
		snap  func(c *faketicketd.Conn, id uint32)
		check func(t *testing.T, err error)
		after bool // the session still answers afterwards
	}{
		{"size mismatch", func(c *faketicketd.Conn, id uint32) {
			streamSnapshot(c, id, pieces, 0, fmt.Sprintf(`{"index":1,"term":1,"size":%d,"sha256":"%s"}`, size+1, hexSum))
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("%v", err)
			}
		}, true},
		{"checksum mismatch", func(c *faketicketd.Conn, id uint32) {
			streamSnapshot(c, id, pieces, 0, fmt.Sprintf(`{"index":1,"term":1,"size":%d,"sha256":"%s"}`, size, strings.Repeat("0", 64)))
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), hexSum) {
				t.Errorf("%v", err)
			}
		}, true},
		{"no checksum", func(c *faketicketd.Conn, id uint32) {
			streamSnapshot(c, id, pieces, 0, fmt.Sprintf(`{"index":1,"term":1,"size":%d}`, size))
		}, func(t *testing.T, err error) {
			if !strings.Contains(err.Error(), "not verified") {
				t.Errorf("%v", err)
			}
		}, true},
		{"failed midway", func(c *faketicketd.Conn, id uint32) {
			streamSnapshot(c, id, pieces, 2, `{"error":"disk on fire"}`)
		}, func(t *testing.T, err error) {
			var ae *AdminError
			if !errors.As(err, &ae) || ae.Message != "disk on fire" || ae.Op != "snapshot.save" {
				t.Errorf("%v", err)
			}
		}, true},
		{"not the leader", func(c *faketicketd.Conn, id uint32) {
			streamSnapshot(c, id, nil, 1, `{"error":"not the leader","leader_addr":"10.0.0.2:5225"}`)
		}, func(t *testing.T, err error) {
			var nl *NotLeaderError
			if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderAddr != "10.0.0.2:5225" {
				t.Errorf("%v", err)
			}
		}, true},
		{"capacity", func(c *faketicketd.Conn, id uint32) {
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: id, Reason: wire.CapacityInFlight})
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrCapacity) {
				t.Errorf("%v", err)
			}
		}, true},
		{"dropped midway", func(c *faketicketd.Conn, id uint32) {
			for _, p := range pieces {
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminwire.StatusChunk, Text: p})
			}
			c.Close()
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "incomplete after") {
				t.Errorf("%v", err)
			}
		}, false},
		{"server error midway", func(c *faketicketd.Conn, id uint32) {
			c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminwire.StatusChunk, Text: pieces[0]})
			c.Error(wire.CodeShuttingDown, "bye")
		}, func(t *testing.T, err error) {
			var se *ServerError
			if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.Code != CodeShuttingDown {
				t.Errorf("%v", err)
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := dialAdmin(t, adminServer(t, tc.snap).Addr())
			info, err := a.SaveSnapshot(ctxFor(t), new(bytes.Buffer))
			if err == nil {
				t.Fatalf("succeeded: %+v", info)
			}
			if info != (SnapshotInfo{}) {
				t.Errorf("info %+v with an error", info)
			}
			tc.check(t, err)
			if tc.after {
				stillUsable(t, a)
			}
		})
	}
}

type failingWriter struct {
	n   int
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, w.err
	}
	w.n--
	return len(p), nil
}

// A failing writer or an ended context stops SaveSnapshot at once; the
// rest of the stream is dropped and the session goes on.
func TestSaveSnapshotCallerStops(t *testing.T) {
	pieces := snapshotData()
	srv := adminServer(t, func(c *faketicketd.Conn, id uint32) { streamSnapshot(c, id, pieces, 0, snapshotMeta(pieces)) })
	a := dialAdmin(t, srv.Addr())

	errDisk := errors.New("disk full")
	_, err := a.SaveSnapshot(ctxFor(t), &failingWriter{n: 2, err: errDisk})
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "writing the snapshot failed after") {
		t.Fatalf("failing writer: %v", err)
	}
	stillUsable(t, a)

	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	_, err = a.SaveSnapshot(ctx, writerFunc(func(p []byte) (int, error) {
		cancel()
		return len(p), nil
	}))
	// The whole stream may have arrived before the cancellation was seen,
	// and then it is complete and verified; otherwise the error says so.
	if err != nil && (!errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "incomplete")) {
		t.Fatalf("cancelled: %v", err)
	}
	stillUsable(t, a)

	a.Close()
	if _, err := a.SaveSnapshot(ctxFor(t), new(bytes.Buffer)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Closing the Admin while a snapshot streams ends it with ErrClosed.
func TestSaveSnapshotClosedMidway(t *testing.T) {
	pieces := snapshotData()
	srv := adminServer(t, func(c *faketicketd.Conn, id uint32) {
		streamSnapshot(c, id, pieces[:5], adminwire.StatusChunk, "more")
		<-c.Done()
	})
	a := dialAdmin(t, srv.Addr())
	var once sync.Once
	_, err := a.SaveSnapshot(ctxFor(t), writerFunc(func(p []byte) (int, error) {
		once.Do(func() { go a.Close() })
		return len(p), nil
	}))
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

// A piece of a stream answering a request that does not stream is a
// protocol violation: the session ends.
func TestStreamPieceForOtherRequest(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		f, err := c.ReadType(wire.TypeAdmin)
		if err != nil {
			return
		}
		c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: adminwire.StatusChunk, Text: []byte("x")})
		<-c.Done()
	})
	a := dialAdmin(t, srv.Addr())
	_, err := a.Status(ctxFor(t))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "invalid frame") {
		t.Fatalf("got %v", err)
	}
}
