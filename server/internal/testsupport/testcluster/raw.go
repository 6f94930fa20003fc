package testcluster

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Raw is a byte-level protocol client for tests: it sends exactly the frames
// it is given and returns every frame it reads.
type Raw struct {
	t    testing.TB
	Conn net.Conn
	r    *wire.Reader
	next uint32
}

// DialRaw connects to addr (plain TCP).
func DialRaw(t testing.TB, addr string) *Raw {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &Raw{t: t, Conn: nc, r: wire.NewReader(nc)}
}

// DialRawTLS connects to addr with TLS.
func DialRawTLS(t testing.TB, addr string, cfg *tls.Config) *Raw {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s with TLS: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &Raw{t: t, Conn: nc, r: wire.NewReader(nc)}
}

// Hello dials addr, sends a hello with token and expects Y.
func Hello(t testing.TB, addr, token string) *Raw {
	t.Helper()
	r := DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(token)})
	if f := r.Recv(); f.Type != wire.TypeReady {
		t.Fatalf("hello to %s: got %s (code %d %q), want Y", addr, f.Type, f.Code, f.Text)
	}
	return r
}

// Send writes one frame.
func (r *Raw) Send(f *wire.Frame) {
	r.t.Helper()
	r.SendBytes(wire.Append(nil, f))
}

// SendBytes writes raw bytes.
func (r *Raw) SendBytes(b []byte) {
	r.t.Helper()
	r.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.Conn.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// AllowCoordFrames lets this connection read K and T frames up to
// wire.MaxCoordFrame, as a coordination client does.
func (r *Raw) AllowCoordFrames() { r.r.AllowCoordFrames() }

// ID returns a fresh request id.
func (r *Raw) ID() uint32 { r.next++; return r.next }

// Recv reads the next frame other than a ping (pings are answered), waiting
// up to 30 s. Byte fields are copied.
func (r *Raw) Recv() wire.Frame {
	r.t.Helper()
	f, err := r.RecvErr(30 * time.Second)
	if err != nil {
		r.t.Fatalf("read frame: %v", err)
	}
	return f
}

// RecvErr is Recv returning the read error instead of failing the test.
func (r *Raw) RecvErr(d time.Duration) (wire.Frame, error) {
	r.Conn.SetReadDeadline(time.Now().Add(d))
	for {
		var f wire.Frame
		if err := r.r.Next(&f); err != nil {
			return wire.Frame{}, err
		}
		if f.Type == wire.TypePing {
			_, _ = r.Conn.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce}))
			continue
		}
		f.Key = append([]byte(nil), f.Key...)
		f.Text = append([]byte(nil), f.Text...)
		return f, nil
	}
}

// Acquire sends an acquire and returns its id.
func (r *Raw) Acquire(key string, owner wire.Owner, wait, lease uint8) uint32 {
	r.t.Helper()
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: id, Owner: owner, Wait: wait, Lease: lease, Key: []byte(key)})
	return id
}

// Release sends a release and returns its id.
func (r *Raw) Release(key string, token uint64) uint32 {
	r.t.Helper()
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeRelease, ID: id, Token: token, Key: []byte(key)})
	return id
}

// Final reads frames until the final answer to id, skipping Q for it. It
// fails on any frame for another request.
func (r *Raw) Final(id uint32) wire.Frame {
	r.t.Helper()
	for {
		f := r.Recv()
		if f.Type == wire.TypeQueued && f.ID == id {
			continue
		}
		if f.ID != id && f.Type != wire.TypeError && f.Type != wire.TypeNotLeader {
			r.t.Fatalf("waiting for the answer to request %d, got %s for request %d", id, f.Type, f.ID)
		}
		return f
	}
}

// Owner returns a distinct owner for test number n.
func Owner(n int) wire.Owner {
	var o wire.Owner
	o[0], o[1], o[2], o[15] = byte(n>>16), byte(n>>8), byte(n), 0xA5
	return o
}
