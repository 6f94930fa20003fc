package coordtest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestOversizedDataRefusedAlone: data above 1 MiB is refused BAD_REQUEST
// before anything is sent, naming the field; the session stays attached on
// its one connection (no restore), and the semaphore is unchanged.
func TestOversizedDataRefusedAlone(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/big", coordination.NodeConfig{})
	var changes atomic.Int32
	s := session(t, c, "/big", coordination.WithStateCallback(func(coordination.State) { changes.Add(1) }))
	if err := s.CreateSemaphore(ctx, "s", 1, []byte("small")); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 2<<20)
	for what, call := range map[string]func() error{
		"create": func() error { return s.CreateSemaphore(ctx, "t", 1, big) },
		"update": func() error { return s.UpdateSemaphore(ctx, "s", big) },
		"acquire": func() error {
			_, err := s.AcquireSemaphore(context.Background(), "s", coordination.Data(big))
			return err
		},
	} {
		err := call()
		if !errors.Is(err, coordination.ErrBadRequest) || errors.Is(err, coordination.ErrIndeterminate) || !strings.Contains(err.Error(), "data") {
			t.Fatalf("%s with 2 MiB of data: %v, want BAD_REQUEST naming the data", what, err)
		}
	}
	if n := changes.Load(); n != 1 || s.State() != coordination.Attached {
		t.Fatalf("%d state changes (want only the first ATTACHED), state %v", n, s.State())
	}
	d, _, err := s.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true})
	if err != nil || string(d.Data) != "small" || len(d.Owners) != 0 {
		t.Fatalf("the semaphore after the refusals: %+v %v", d, err)
	}
}

// TestServerRefusesOversizedRequestAlone: a K request too long to read is
// skipped by the server and answered BAD_REQUEST; the connection and its
// session go on.
func TestServerRefusesOversizedRequestAlone(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/big", coordination.NodeConfig{})
	r := testcluster.Hello(t, cl.Addr(0), "")
	r.AllowCoordFrames()
	id := r.ID()
	r.Send(wire.CoordFrame(false, id, wire.CoordAttach, 0, &wire.Coord{Path: []byte("/big"), SeqNo: 1, TimeoutMs: 5000}))
	if f := r.Recv(); f.Type != wire.TypeCoordReply || f.ID != id || f.Code != wire.CoordSuccess {
		t.Fatalf("attach: %+v", f)
	}
	id = r.ID()
	r.Send(wire.CoordFrame(false, id, wire.CoordCreateSemaphore, 0, &wire.Coord{Name: []byte("s"), Limit: 1, Data: make([]byte, 2<<20)}))
	f := r.Recv()
	var body wire.Coord
	if f.Type != wire.TypeCoordReply || f.ID != id || f.Code != wire.CoordBadRequest || wire.DecodeCoord(&f, &body) != nil || !strings.Contains(string(body.Message), "data") {
		t.Fatalf("oversized create: %+v %q", f, body.Message)
	}
	id = r.ID()
	r.Send(wire.CoordFrame(false, id, wire.CoordCreateSemaphore, 0, &wire.Coord{Name: []byte("s"), Limit: 1}))
	if f := r.Recv(); f.Type != wire.TypeCoordReply || f.ID != id || f.Code != wire.CoordSuccess {
		t.Fatalf("the next request on the same connection: %+v", f)
	}
}

// TestBadRequestNamesTheField: the server's BAD_REQUEST says which field.
func TestBadRequestNamesTheField(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	for path, field := range map[string]string{"no-slash": "path", "/a//b": "path", "/a/": "path"} {
		err := c.CreateNode(ctx, path, coordination.NodeConfig{})
		if !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), field) {
			t.Fatalf("create node %q: %v, want BAD_REQUEST naming the %s", path, err, field)
		}
	}
	c.CreateNode(ctx, "/n", coordination.NodeConfig{})
	s := session(t, c, "/n")
	if err := s.CreateSemaphore(ctx, "s", 0, nil); !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("limit 0: %v", err)
	}
	if _, err := s.AcquireSemaphore(ctx, "", coordination.Timeout(0)); !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), "name") {
		t.Fatalf("empty name: %v", err)
	}
}

// TestQueueTimeoutAbsoluteAcrossRestore: an acquire sent again after a
// restore carries only the time left of its timeout, not the whole.
func TestQueueTimeoutAbsoluteAcrossRestore(t *testing.T) {
	cl, ps, viaProxy := proxied(t, 1)
	direct := newClient(t, cl.Addr(0))
	ctx := ctxT(t)
	direct.CreateNode(ctx, "/q", coordination.NodeConfig{})
	owner := session(t, direct, "/q")
	owner.CreateSemaphore(ctx, "s", 1, nil)
	if _, err := owner.AcquireSemaphore(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	cw := newClient(t, viaProxy)
	w := session(t, cw, "/q", coordination.WithTimeout(10*time.Second))
	const timeout = 20 * time.Second
	queued := make(chan uint64, 4)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := w.AcquireSemaphore(ctx, "s", coordination.Timeout(timeout), coordination.OnQueued(func(o uint64) { queued <- o }))
		done <- err
	}()
	recv(t, ctx, queued)
	testcluster.WaitFor(t, 10*time.Second, "some of the wait spent", func() bool { return time.Since(start) > 500*time.Millisecond })
	cut := time.Now()
	ps[0].Cut() // the session restores at once and sends the acquire again
	recv(t, ctx, queued)
	d, _, err := owner.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Waiters: true})
	if err != nil || len(d.Waiters) != 1 {
		t.Fatalf("waiters after the restore: %+v %v", d, err)
	}
	if left := d.Waiters[0].Timeout; left > timeout-cut.Sub(start) {
		t.Fatalf("the acquire sent again after the restore carries %v, more than the %v left at the cut", left, timeout-cut.Sub(start))
	}
	w.Close(ctx)
	<-done
}

// TestCallReturnsWhenItsContextEnds: an acquire waiting on a connection
// that has gone silent returns when its context ends; the withdrawal of its
// wait happens in the background.
func TestCallReturnsWhenItsContextEnds(t *testing.T) {
	cl, ps, viaProxy := proxied(t, 1)
	direct := newClient(t, cl.Addr(0))
	ctx := ctxT(t)
	direct.CreateNode(ctx, "/r", coordination.NodeConfig{})
	owner := session(t, direct, "/r")
	owner.CreateSemaphore(ctx, "s", 1, nil)
	if _, err := owner.AcquireSemaphore(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	cw := newClient(t, viaProxy)
	w := session(t, cw, "/r", coordination.WithTimeout(10*time.Second))
	queued := make(chan uint64, 1)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.AcquireSemaphore(wctx, "s", coordination.OnQueued(func(o uint64) { queued <- o }))
		done <- err
	}()
	recv(t, ctx, queued)
	ps[0].Set(nemesis.LinkMode{Stall: true}) // the withdrawal cannot get through
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v", err)
		}
	case <-time.After(5 * time.Second):
		// Generous for a loaded machine (the promise is 100 ms): a
		// withdrawal made in the call would block here for the whole stall,
		// up to the session's 10 s.
		t.Fatal("the acquire did not return within 5 s of its context's end")
	}
	ps[0].Set(nemesis.LinkMode{})
	testcluster.WaitFor(t, 20*time.Second, "the wait withdrawn in the background", func() bool {
		d, _, err := owner.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Waiters: true})
		return err == nil && len(d.Waiters) == 0
	})
}

// TestSessionCauseNamesExpiry: a session that ends gives its Context a
// cause that matches ErrSessionExpired (ErrClosed for Close).
func TestSessionCauseNamesExpiry(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/e", coordination.NodeConfig{})
	a, b := session(t, c, "/e"), session(t, c, "/e")
	if err := c.DropNode(ctx, "/e"); err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	if cause := context.Cause(a.Context()); !errors.Is(cause, coordination.ErrSessionExpired) {
		t.Fatalf("cause after the node was dropped: %v", cause)
	}
	<-b.Context().Done()
	c2 := newClient(t, cl.AddrList())
	c2.CreateNode(ctx, "/e2", coordination.NodeConfig{})
	s := session(t, c2, "/e2")
	s.Close(ctx)
	if cause := context.Cause(s.Context()); !errors.Is(cause, coordination.ErrClosed) {
		t.Fatalf("cause after Close: %v", cause)
	}
}

// TestForeverWaiterDescribed: a wait without a timeout is described as
// Forever and printed "forever".
func TestForeverWaiterDescribed(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	c.CreateNode(ctx, "/f", coordination.NodeConfig{})
	a, b := session(t, c, "/f"), session(t, c, "/f")
	a.CreateSemaphore(ctx, "s", 1, nil)
	if _, err := a.AcquireSemaphore(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	queued := make(chan uint64, 1)
	go b.AcquireSemaphore(ctx, "s", coordination.OnQueued(func(o uint64) { queued <- o }))
	recv(t, ctx, queued)
	d, _, err := a.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Waiters: true})
	if err != nil || len(d.Waiters) != 1 || !d.Waiters[0].Forever || d.Waiters[0].TimeoutString() != "forever" {
		t.Fatalf("waiters %+v %v, want one waiting forever", d.Waiters, err)
	}
}

// TestWrongPortsReported: pointed at ticketd's HTTP or Raft port, the
// coordination client says so before its context ends, in the Ticketing
// client's words; at a server that never answers, a call returns when its
// context ends.
func TestWrongPortsReported(t *testing.T) {
	cl := testcluster.Start(t, 1)
	for name, addr := range map[string]string{"http": cl.Config(0).HTTPAddr, "raft": cl.Config(0).RaftAddr} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := newCoordClient(t, addr)
		if err != nil {
			t.Fatal(err)
		}
		err = c.CreateNode(ctx, "/n", coordination.NodeConfig{})
		if ctx.Err() != nil || !errors.Is(err, coordination.ErrUnavailable) || !strings.Contains(err.Error(), "5225") {
			t.Errorf("%s port: %v (context: %v), want a prompt error naming the client port", name, err, ctx.Err())
		}
		c.Close()
		cancel()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close() // accepted, never answered
		}
	}()
	c, _ := newCoordClient(t, ln.Addr().String())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.CreateNode(ctx, "/n", coordination.NodeConfig{}) }()
	select {
	case err := <-done:
		if !errors.Is(err, coordination.ErrUnavailable) {
			t.Fatalf("silent server: %v", err)
		}
	case <-time.After(3 * time.Second): // generous: the bound is the 300 ms context
		t.Fatal("a call to a silent server outlived its context by seconds")
	}
}

// TestDialerAndLogger: the client dials through WithDialer, and a session's
// loss and restore are logged to WithLogger.
func TestDialerAndLogger(t *testing.T) {
	cl, ps, viaProxy := proxied(t, 1)
	var dials atomic.Int32
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	var d net.Dialer
	c, err := newCoordClient(t, viaProxy, ticketing.WithLogger(logger), ticketing.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	direct := newClient(t, cl.Addr(0))
	direct.CreateNode(ctx, "/d", coordination.NodeConfig{})
	s := session(t, c, "/d", coordination.WithTimeout(10*time.Second))
	ps[0].Cut()
	testcluster.WaitFor(t, 20*time.Second, "the restore logged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "coordination session restored")
	})
	if n := dials.Load(); n < 2 || s.State() != coordination.Attached {
		t.Fatalf("%d dials through WithDialer (want the first and the restore's), state %v", n, s.State())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
