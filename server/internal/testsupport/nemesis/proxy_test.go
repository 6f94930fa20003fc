package nemesis

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every connection on loopback.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func newTestProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	addr := ""
	listen := func() (net.Listener, error) {
		if addr == "" {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err == nil {
				addr = ln.Addr().String()
			}
			return ln, err
		}
		return net.Listen("tcp", addr)
	}
	var d net.Dialer
	p, err := NewProxy("test", listen, target, d.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func roundTrip(c net.Conn, msg string, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	b := make([]byte, len(msg))
	_, err := io.ReadFull(c, b)
	return string(b), err
}

func TestProxyForwardsStallsCutsAndRefuses(t *testing.T) {
	p := newTestProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "hello", 10*time.Second); err != nil || got != "hello" {
		t.Fatalf("forwarding: %q, %v", got, err)
	}

	// Stall: nothing comes through while it lasts; everything afterwards.
	p.Set(LinkMode{Stall: true})
	if _, err := roundTrip(c, "stalled", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled link answered: %v", err)
	}
	p.Set(LinkMode{})
	b := make([]byte, len("stalled"))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "stalled" {
		t.Fatalf("after the stall: %q, %v", b, err)
	}

	// Delay still delivers, in order.
	p.Set(LinkMode{Delay: time.Millisecond, Jitter: 5 * time.Millisecond})
	if got, err := roundTrip(c, "slow", 10*time.Second); err != nil || got != "slow" {
		t.Fatalf("delayed: %q, %v", got, err)
	}

	// Cut with Refuse: the open connection ends, new ones are refused by
	// the kernel, and come back when Refuse is cleared.
	p.Set(LinkMode{Refuse: true})
	p.Cut()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(b); err == nil {
		t.Fatal("a cut connection still reads")
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}
	if err := p.Set(LinkMode{}); err != nil {
		t.Fatal(err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, "again", 10*time.Second); err != nil || got != "again" {
		t.Fatalf("after refusing: %q, %v", got, err)
	}
}

// A stalled connection that is cut ends at once instead of waiting for the
// stall to end.
func TestProxyCutEndsStalledConnection(t *testing.T) {
	p := newTestProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, "up", 10*time.Second); err != nil {
		t.Fatal(err) // the proxy has accepted the connection
	}
	p.Set(LinkMode{Stall: true})
	c.Write([]byte("x"))
	p.Cut()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a cut, stalled connection: %v, want the connection closed", err)
	}
}

// A Rate paces each direction: bytes arrive whole and in order, never
// faster than the rate allows (the pacing sleeps, so this bound is the
// mechanism's, not the machine's speed).
func TestProxyRateLimitsEachDirection(t *testing.T) {
	p := newTestProxy(t, echoServer(t))
	const rate = 256 << 10
	if err := p.Set(LinkMode{Rate: rate}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 128<<10)
	for i := range msg {
		msg[i] = byte(i)
	}
	began := time.Now()
	go c.Write(msg)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	for i := range got {
		if got[i] != msg[i] {
			t.Fatalf("byte %d differs after the round trip", i)
		}
	}
	// Each direction paces the message; the first piece of each goes
	// after one piece's time, so the round trip takes at least the
	// message's time at the rate.
	if least := time.Duration(len(msg)) * time.Second / rate; took < least {
		t.Fatalf("128 KiB went through a %d B/s link and back in %v, under %v", rate, took, least)
	}
}
