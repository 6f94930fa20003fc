package server_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Hostile and careless clients: none of them may stall the server or other
// clients, make it lose state, or crash it. Each test holds a ticket that
// must keep its token throughout.

// holdTicket acquires key (lease 200 s) on a connection of its own.
func holdTicket(t *testing.T, addr, key string, owner int) uint64 {
	t.Helper()
	r := testcluster.Hello(t, addr, "")
	return expect(t, r.Final(r.Acquire(key, testcluster.Owner(owner), 0, 200)), wire.TypeGranted).Token
}

// checkHeld checks, on a new connection, that key is held under token.
func checkHeld(t *testing.T, addr, key string, token uint64) {
	t.Helper()
	r := testcluster.Hello(t, addr, "")
	if f := describe(t, r, key); f.Flags&1 == 0 || f.Token != token {
		t.Fatalf("%s lost its ticket: describe gives held=%v token %d, want token %d", key, f.Flags&1 != 0, f.Token, token)
	}
	r.Conn.Close()
}

// recvWithin is Raw.RecvErr that fails the test when no frame comes within d.
func recvWithin(t *testing.T, r *testcluster.Raw, d time.Duration, what string) wire.Frame {
	t.Helper()
	f, err := r.RecvErr(d)
	if err != nil {
		t.Fatalf("%s: no answer within %v: %v", what, d, err)
	}
	return f
}

// cycle acquires and releases key once on r, each answer within 10 s, and
// returns the token.
func cycle(t *testing.T, r *testcluster.Raw, key string, owner int) uint64 {
	t.Helper()
	id := r.Acquire(key, testcluster.Owner(owner), 0, 30)
	g := recvWithin(t, r, 10*time.Second, "acquire of "+key)
	if g.Type != wire.TypeGranted || g.ID != id {
		t.Fatalf("acquire of %s: got %s for %d (code %d %q), want G for %d", key, g.Type, g.ID, g.Code, g.Text, id)
	}
	id = r.Release(key, g.Token)
	if f := recvWithin(t, r, 10*time.Second, "release of "+key); f.Type != wire.TypeReleased || f.ID != id {
		t.Fatalf("release of %s: got %s for %d, want R for %d", key, f.Type, f.ID, id)
	}
	return g.Token
}

func TestHostileSlowloris(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.HelloTimeout = time.Second }))
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr := c.Addr(0)
	held := holdTicket(t, addr, "held", 1)
	// Hellos sent one byte per 100 ms: 200 bytes of token would take 20 s,
	// so only a deadline that runs from the accept ends them in time.
	hello := wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: bytes.Repeat([]byte("t"), 200)})
	const n = 8
	conns := make([]*testcluster.Raw, n)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	sentBytes := make([]atomic.Int64, n)
	for i := range conns {
		conns[i] = testcluster.DialRaw(t, addr)
		wg.Add(1)
		go func(nc net.Conn, sent *atomic.Int64) {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for _, b := range hello {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := nc.Write([]byte{b}); err != nil {
					return // closed by the server
				}
				sent.Add(1)
			}
		}(conns[i].Conn, &sentBytes[i])
	}
	defer func() { close(stop); wg.Wait() }()
	r := testcluster.Hello(t, addr, "")
	for i, s := range conns {
		cycle(t, r, "other", 100+i) // others are served while the hellos trickle in
		// Read without answering pings: a pong would land in the middle
		// of the half-sent hello.
		s.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		rd := wire.NewReader(s.Conn)
		var f wire.Frame
		for {
			if err := rd.Next(&f); err != nil {
				t.Fatalf("connection %d (%d of %d hello bytes sent): no E within 30 s: %v", i, sentBytes[i].Load(), len(hello), err)
			}
			if f.Type != wire.TypePing {
				break
			}
		}
		if f.Type != wire.TypeError || wire.Code(f.Code) != wire.CodeHelloTimeout {
			t.Fatalf("connection %d (%d of %d hello bytes sent): got %s code %d %q, want E %d (hello timeout)",
				i, sentBytes[i].Load(), len(hello), f.Type, f.Code, f.Text, wire.CodeHelloTimeout)
		}
		if err := rd.Next(&f); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("connection %d: after E the connection should close, read gave %v", i, err)
		}
	}
	checkHeld(t, addr, "held", held)
}

func TestHostileConnectionFlood(t *testing.T) {
	const limit = 8
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.Limits.MaxConnections = limit
		cfg.HelloTimeout = 30 * time.Second // a refusal must not wait for the hello
	}))
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr, httpAddr := c.Addr(0), c.Server(0).HTTPAddr().String()
	holder := testcluster.Hello(t, addr, "")
	held := expect(t, holder.Final(holder.Acquire("held", testcluster.Owner(1), 0, 200)), wire.TypeGranted).Token
	worker := testcluster.Hello(t, addr, "")
	var fill []*testcluster.Raw
	for i := 2; i < limit; i++ {
		fill = append(fill, testcluster.Hello(t, addr, ""))
	}
	// The server is full. Every further connection gets B (id 0, reason 5)
	// at once, before any hello, and is closed.
	const flood = 60
	errs := make(chan error, flood)
	var wg sync.WaitGroup
	for i := 0; i < flood; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			rd := wire.NewReader(nc)
			var f wire.Frame
			if err := rd.Next(&f); err != nil {
				errs <- fmt.Errorf("no B before the hello: %w", err)
				return
			}
			if f.Type != wire.TypeCapacity || f.ID != 0 || f.Reason != wire.CapacityConnections {
				errs <- fmt.Errorf("got %s id %d reason %d, want B id 0 reason %d", f.Type, f.ID, f.Reason, wire.CapacityConnections)
				return
			}
			if err := rd.Next(&f); err == nil {
				errs <- fmt.Errorf("after B the connection stays open: got %s", f.Type)
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				errs <- fmt.Errorf("after B the connection stays open")
			}
		}()
	}
	// Existing clients keep working during the flood.
	for i := 0; i < 5; i++ {
		cycle(t, worker, "other", 100+i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := scrape(t, httpAddr)
	if n := m[`ticketing_capacity_rejects_total{limit="connections"}`]; n != flood {
		t.Errorf(`ticketing_capacity_rejects_total{limit="connections"} = %v, want %d`, n, flood)
	}
	if n := m["ticketing_connections"]; n > limit {
		t.Errorf("ticketing_connections = %v, above the limit %d", n, limit)
	}
	// Once connections close, new ones are accepted again.
	for _, r := range fill {
		r.Conn.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := testcluster.DialRaw(t, addr)
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
		f, err := r.RecvErr(10 * time.Second)
		r.Conn.Close()
		if err == nil && f.Type == wire.TypeReady {
			break
		}
		if err != nil || f.Type != wire.TypeCapacity {
			t.Fatalf("a connection after the flood: %s %v", f.Type, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("connections are still refused 10 s after the others closed")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	cycle(t, worker, "other", 99)
	checkHeld(t, addr, "held", held)
}

func TestHostileTLSGarbage(t *testing.T) {
	ca := testcerts.New(t)
	certFile, keyFile := ca.Issue(t, "server")
	pool := ca.Pool()
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: certFile, KeyFile: keyFile}
		// Also bounds a TLS handshake that stalls; long enough that the
		// served TLS clients' handshakes finish on a loaded machine.
		cfg.HelloTimeout = 3 * time.Second
	}))
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr := c.Addr(0)
	tlsCfg := &tls.Config{RootCAs: pool}
	tlsHello := func() *testcluster.Raw {
		r := testcluster.DialRawTLS(t, addr, tlsCfg)
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
		expect(t, recvWithin(t, r, 10*time.Second, "TLS hello"), wire.TypeReady)
		return r
	}
	holder := tlsHello()
	held := expect(t, holder.Final(holder.Acquire("held", testcluster.Owner(1), 0, 200)), wire.TypeGranted).Token

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	kinds := []string{"random bytes", "TLS record header then garbage", "plaintext protocol hello", "half a TLS handshake", "nothing"}
	var wg sync.WaitGroup
	var closed atomic.Int64
	// If the test stops early, its garbage senders still finish (and report)
	// before the test counts as completed.
	t.Cleanup(wg.Wait)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < 10; i++ {
				kind := kinds[rng.IntN(len(kinds))]
				nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					t.Errorf("%s: dial: %v", kind, err)
					return
				}
				switch kind {
				case "random bytes":
					b := make([]byte, 1+rng.IntN(4096))
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
					nc.Write(b)
				case "TLS record header then garbage":
					b := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc}
					for len(b) < 517 {
						b = append(b, byte(rng.Uint32()))
					}
					nc.Write(b)
				case "plaintext protocol hello":
					nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version}))
				case "half a TLS handshake":
					var buf bytes.Buffer
					cl := tls.Client(&recordConn{Conn: nc, w: &buf}, &tls.Config{RootCAs: pool, ServerName: "localhost"})
					cl.SetDeadline(time.Now().Add(50 * time.Millisecond))
					cl.Handshake() // fails: the ClientHello went to buf only
					nc.Write(buf.Bytes()[:buf.Len()/2])
				}
				// The server ends every such connection by itself.
				nc.SetReadDeadline(time.Now().Add(15 * time.Second))
				_, err = io.Copy(io.Discard, nc)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("%s: the server kept the connection open", kind)
				} else {
					closed.Add(1)
				}
				nc.Close()
			}
		}(g)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// TLS clients are served throughout.
	for i := 0; ; i++ {
		r := tlsHello()
		cycle(t, r, "other", 100+i)
		r.Conn.Close()
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	t.Logf("%d garbage connections closed by the server", closed.Load())
	r := tlsHello()
	if f := describe(t, r, "held"); f.Flags&1 == 0 || f.Token != held {
		t.Fatalf("held ticket changed: %+v", f)
	}
}

// recordConn captures what a TLS client writes instead of sending it.
type recordConn struct {
	net.Conn
	w io.Writer
}

func (c *recordConn) Write(b []byte) (int, error) { return c.w.Write(b) }

func TestHostileWrongTokens(t *testing.T) {
	const good = "correct-horse-battery-staple"
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ClientTokens = []string{good, "second-token-0123456789"}
	}))
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr, httpAddr := c.Addr(0), c.Server(0).HTTPAddr().String()
	r := testcluster.Hello(t, addr, good)
	held := expect(t, r.Final(r.Acquire("held", testcluster.Owner(1), 0, 200)), wire.TypeGranted).Token

	random := func(n int) string {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	wrong := []struct {
		name, token string
		flags       uint8
	}{
		{"empty", "", 0},
		{"last byte differs", good[:len(good)-1] + "f", 0},
		{"first byte differs", "C" + good[1:], 0},
		{"one byte short", good[:len(good)-1], 0},
		{"one byte long", good + "e", 0},
		{"trailing newline", good + "\n", 0},
		{"trailing NUL", good + "\x00", 0},
		{"upper case", "CORRECT-HORSE-BATTERY-STAPLE", 0},
		{"both tokens", good + "second-token-0123456789", 0},
		{"prefix of the other token", "second-token", 0},
		{"random 16 bytes", random(16), 0},
		{"random 1024 bytes", random(1024), 0},
		{"near miss, admin session", good[:len(good)-1] + "f", wire.HelloAdmin},
		{"random, admin session", random(40), wire.HelloAdmin},
	}
	before := scrape(t, httpAddr)["ticketing_auth_failures_total"]
	var msg string
	for _, w := range wrong {
		f := func() wire.Frame {
			rr := testcluster.DialRaw(t, addr)
			defer rr.Conn.Close()
			rr.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: w.flags, Text: []byte(w.token)})
			f := recvWithin(t, rr, 10*time.Second, w.name)
			if _, err := rr.RecvErr(10 * time.Second); err == nil {
				t.Errorf("%s: the connection stays open after the refusal", w.name)
			}
			return f
		}()
		if f.Type != wire.TypeError || wire.Code(f.Code) != wire.CodeUnauthenticated {
			t.Fatalf("%s: got %s code %d %q, want E %d", w.name, f.Type, f.Code, f.Text, wire.CodeUnauthenticated)
		}
		// The same words for every wrong token: nothing tells a near miss
		// from a wild guess, and the token is not echoed.
		if msg == "" {
			msg = string(f.Text)
		} else if string(f.Text) != msg {
			t.Errorf("%s: message %q differs from %q: refusals must not tell wrong tokens apart", w.name, f.Text, msg)
		}
		if len(w.token) >= 4 && bytes.Contains(f.Text, []byte(w.token)) {
			t.Errorf("%s: the refusal echoes the token", w.name)
		}
	}
	// A token over 1024 bytes is out of range, whatever it is.
	rr := testcluster.DialRaw(t, addr)
	rr.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(random(1025))})
	expectFatal(t, rr, wire.CodeInvalidArgument)

	if n := scrape(t, httpAddr)["ticketing_auth_failures_total"] - before; n != float64(len(wrong)) {
		t.Errorf("ticketing_auth_failures_total rose by %v, want %d", n, len(wrong))
	}
	ok := testcluster.Hello(t, addr, "second-token-0123456789")
	cycle(t, ok, "other", 2)
	if f := describe(t, ok, "held"); f.Flags&1 == 0 || f.Token != held {
		t.Fatalf("held ticket changed: %+v", f)
	}
	if n := scrape(t, httpAddr)["ticketing_auth_failures_total"] - before; n != float64(len(wrong)) {
		t.Errorf("a good token counted as an auth failure: the counter rose by %v, want %d", n, len(wrong))
	}
}

func TestHostileUnknownVersions(t *testing.T) {
	c := testcluster.Start(t, 1)
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr := c.Addr(0)
	held := holdTicket(t, addr, "held", 1)
	var msg string
	for _, v := range []uint16{0, 2, 3, 0x0100, 0x7fff, 0xffff} {
		for _, flags := range []uint8{0, wire.HelloAdmin, 0xff} {
			r := testcluster.DialRaw(t, addr)
			r.Send(&wire.Frame{Type: wire.TypeHello, Version: v, Flags: flags})
			f := recvWithin(t, r, 10*time.Second, fmt.Sprintf("hello version %d", v))
			if f.Type != wire.TypeError || wire.Code(f.Code) != wire.CodeUnsupportedVersion {
				t.Fatalf("hello version %d flags %#x: got %s code %d %q, want E %d", v, flags, f.Type, f.Code, f.Text, wire.CodeUnsupportedVersion)
			}
			if msg == "" {
				msg = string(f.Text)
			} else if string(f.Text) != msg {
				t.Errorf("version %d: message %q, others %q", v, f.Text, msg)
			}
			if _, err := r.RecvErr(10 * time.Second); err == nil {
				t.Errorf("version %d: the connection stays open", v)
			}
			r.Conn.Close()
		}
	}
	r := testcluster.Hello(t, addr, "")
	cycle(t, r, "other", 2)
	checkHeld(t, addr, "held", held)
}

// garbage returns bytes for one hostile connection, after its hello when
// the bool is true.
func garbage(rng *rand.Rand) ([]byte, bool) {
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	valid := func() []byte {
		key := randBytes(1 + rng.IntN(40))
		if rng.IntN(2) == 0 {
			key = []byte("held") // a held key, with random tokens and owners
		}
		var owner wire.Owner
		copy(owner[:], randBytes(16))
		switch rng.IntN(7) {
		case 5:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeReleaseOwner, ID: rng.Uint32(), Owner: owner, Key: key})
		case 0:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: rng.Uint32(), Owner: owner, Wait: uint8(rng.IntN(3)), Lease: uint8(rng.IntN(256)), Key: key})
		case 1:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeRelease, ID: rng.Uint32(), Token: rng.Uint64(), Key: key})
		case 2:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeDescribe, ID: rng.Uint32(), Key: key})
		case 3:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeCancel, ID: rng.Uint32(), Owner: owner})
		case 4:
			return wire.Append(nil, &wire.Frame{Type: wire.TypeAdmin, ID: rng.Uint32(), Text: randBytes(rng.IntN(60))})
		}
		return wire.Append(nil, &wire.Frame{Type: wire.TypePing, Nonce: rng.Uint64()})
	}
	switch rng.IntN(6) {
	case 0: // bytes, from the first one
		return randBytes(1 + rng.IntN(2048)), rng.IntN(2) == 0
	case 1: // frames with a right length and a random type and payload
		var b []byte
		for n := 1 + rng.IntN(8); n > 0; n-- {
			body := randBytes(1 + rng.IntN(64))
			b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
			b = append(b, body...)
		}
		return b, true
	case 2: // valid frames with random fields
		var b []byte
		for n := 1 + rng.IntN(20); n > 0; n-- {
			b = append(b, valid()...)
		}
		return b, true
	case 3: // valid frames with a few bytes flipped
		var b []byte
		for n := 1 + rng.IntN(8); n > 0; n-- {
			b = append(b, valid()...)
		}
		for n := 1 + rng.IntN(4); n > 0; n-- {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		return b, rng.IntN(4) != 0
	case 4: // a frame cut short, then the connection closes
		b := valid()
		return b[:rng.IntN(len(b))], true
	}
	// a length prefix promising more than ever comes, or too much
	b := binary.BigEndian.AppendUint32(nil, uint32(rng.IntN(1<<17)))
	return append(b, randBytes(rng.IntN(32))...), true
}

func TestHostileGarbageFromManyGoroutines(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.HelloTimeout = time.Second
		cfg.PingInterval = 300 * time.Millisecond // ends connections left with half a frame
	}))
	// Parallel only once the cluster is up: its ports are taken then, so
	// other tests' connections cannot take them between FreePort and bind.
	t.Parallel()
	addr, httpAddr := c.Addr(0), c.Server(0).HTTPAddr().String()
	held := holdTicket(t, addr, "held", 1)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	hello := wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := 0; i < 40; i++ {
				nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				b, withHello := garbage(rng)
				if withHello {
					b = append(append([]byte(nil), hello...), b...)
				}
				nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				nc.Write(b)
				// Read whatever comes back, briefly; valid frames may keep
				// the connection open, so the client may end it too.
				nc.SetReadDeadline(time.Now().Add(time.Duration(rng.IntN(300)) * time.Millisecond))
				io.Copy(io.Discard, nc)
				nc.Close()
			}
		}(g)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// A legitimate client works throughout; its tokens keep increasing.
	r := testcluster.Hello(t, addr, "")
	var last uint64
	cycles := 0
	for {
		tok := cycle(t, r, "legit", 100+cycles)
		if tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
		cycles++
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	m := scrape(t, httpAddr)
	t.Logf("%d cycles by the legitimate client; %v connections ended by malformed frames", cycles, m["ticketing_malformed_frames_total"])
	if m["ticketing_malformed_frames_total"] == 0 {
		t.Error("ticketing_malformed_frames_total is 0 after 320 garbage connections")
	}
	checkHeld(t, addr, "held", held)
	// Nothing acquired by the garbage survives as a surprise: the server
	// holds "held" and what random acquires got, never "legit".
	r2 := testcluster.Hello(t, addr, "")
	if f := describe(t, r2, "legit"); f.Flags&1 != 0 {
		t.Fatalf("legit is held after its last release: %+v", f)
	}
	if g := cycle(t, r2, "legit", 1); g <= last {
		t.Fatalf("token %d after %d", g, last)
	}
}
