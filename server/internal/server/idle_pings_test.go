package server_test

import (
	"net"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// helloIdle dials addr with a hello that asks for idle pings and returns the
// connection and its Y.
func helloIdle(t *testing.T, addr string) (*testcluster.Raw, wire.Frame) {
	t.Helper()
	r := testcluster.DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloIdlePings})
	y := r.Recv()
	if y.Type != wire.TypeReady {
		t.Fatalf("hello: got %s (code %d %q), want Y", y.Type, y.Code, y.Text)
	}
	return r, y
}

// nextFrame reads one frame of nc, answering nothing, within d.
func nextFrame(t *testing.T, rd *wire.Reader, nc net.Conn, d time.Duration) wire.Frame {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(d))
	var f wire.Frame
	if err := rd.Next(&f); err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}

// A client that asks for idle pings is told the idle interval in Y, and its
// idle connection is pinged at that interval while a client that did not
// ask is pinged every ping interval; the moment it waits in a key's queue
// it is pinged every ping interval again, so that a silent server is found
// as fast as ever while it waits.
func TestIdleConnectionsArePingedAtTheIdleInterval(t *testing.T) {
	const interval, idle = 20 * time.Millisecond, 30 * time.Second
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.PingInterval, cfg.IdlePingInterval = interval, idle
	}))
	old := testcluster.Hello(t, c.Addr(0), "")
	r, y := helloIdle(t, c.Addr(0))
	if y.Flags&wire.ReadyIdlePings == 0 || time.Duration(y.IdleInterval)*time.Millisecond != idle || time.Duration(y.Interval)*time.Millisecond != interval {
		t.Fatalf("Y flags %#x interval %d ms idle %d ms, want ReadyIdlePings with %v and %v", y.Flags, y.Interval, y.IdleInterval, interval, idle)
	}

	// While the older client's connection gets ten pings, the idle one
	// gets its first at most (the second would come an idle interval later).
	idleRd := wire.NewReader(r.Conn)
	idlePings := make(chan uint64, 16)
	go func() {
		for {
			var f wire.Frame
			r.Conn.SetReadDeadline(time.Now().Add(time.Minute))
			if err := idleRd.Next(&f); err != nil {
				close(idlePings)
				return
			}
			if f.Type == wire.TypePing {
				if _, err := r.Conn.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})); err != nil {
					close(idlePings)
					return
				}
				idlePings <- f.Nonce
			}
		}
	}()
	oldRd := wire.NewReader(old.Conn)
	for range 10 {
		if f := nextFrame(t, oldRd, old.Conn, 10*time.Second); f.Type != wire.TypePing {
			t.Fatalf("the older client got %s, want only pings", f.Type)
		} else {
			old.Send(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		}
	}
	if n := len(idlePings); n > 1 {
		t.Fatalf("the idle connection got %d pings while the older one got 10; want at most its first", n)
	}
	for len(idlePings) > 0 {
		<-idlePings
	}

	// The older client holds the key; the idle one waits for it.
	old.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 1, Owner: testcluster.Owner(1), Wait: 0, Lease: 30, Key: []byte("k")})
	var g wire.Frame
	for g = nextFrame(t, oldRd, old.Conn, 10*time.Second); g.Type == wire.TypePing; g = nextFrame(t, oldRd, old.Conn, 10*time.Second) {
		old.Send(&wire.Frame{Type: wire.TypePong, Nonce: g.Nonce})
	}
	if g.Type != wire.TypeGranted {
		t.Fatalf("the older client's acquire: got %s, want G", g.Type)
	}
	r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 1, Owner: testcluster.Owner(2), Wait: 60, Lease: 30, Key: []byte("k")})
	// Waiting, it is pinged every ping interval: three pings come long
	// before one idle interval has passed.
	timeout := time.After(idle / 2)
	for range 3 {
		select {
		case _, ok := <-idlePings:
			if !ok {
				t.Fatal("the waiting connection ended")
			}
		case <-timeout:
			t.Fatalf("a connection waiting in a queue was not pinged three times within %v (its ping interval is %v)", idle/2, interval)
		}
	}
}

// Client connections carry no TCP keep-alive: pings are their liveness
// check, and probes every 15 s (Go's default) would cost an idle
// connection more than its pings.
func TestClientConnectionsHaveNoTCPKeepAlive(t *testing.T) {
	c := testcluster.Start(t, 1)
	testcluster.Hello(t, c.Addr(0), "")
	on := server.KeepAlives(c.Server(0))
	if len(on) != 1 || on[0] {
		t.Fatalf("keep-alive on the server's client sockets: %v, want one socket without it", on)
	}
}
