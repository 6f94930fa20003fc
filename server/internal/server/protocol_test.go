package server_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// expectFatal reads the E frame and then the end of the connection.
func expectFatal(t *testing.T, r *testcluster.Raw, code wire.Code) {
	t.Helper()
	f := r.Recv()
	if f.Type != wire.TypeError || wire.Code(f.Code) != code {
		t.Fatalf("got %s code %d %q, want E code %d (%s)", f.Type, f.Code, f.Text, code, code)
	}
	if len(f.Text) == 0 {
		t.Fatalf("E code %d has no message", code)
	}
	if _, err := r.RecvErr(10 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("after E the connection should close, read gave %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

// stillServes proves the server keeps working for others after a bad client.
func stillServes(t *testing.T, addr string, n int) {
	t.Helper()
	r := testcluster.Hello(t, addr, "")
	g := expect(t, r.Final(r.Acquire("still", testcluster.Owner(1000+n), 0, 30)), wire.TypeGranted)
	expect(t, r.Final(r.Release("still", g.Token)), wire.TypeReleased)
}

func TestBadFrames(t *testing.T) {
	c := testcluster.Start(t, 1)
	// A held ticket that must survive every bad client below.
	holder := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, holder.Final(holder.Acquire("held", testcluster.Owner(1), 0, 120)), wire.TypeGranted)

	oversized := binary.BigEndian.AppendUint32(nil, wire.MaxFrame+1)
	cases := []struct {
		name  string
		hello bool
		bytes []byte
		code  wire.Code
	}{
		{"request before hello", false, wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 5, Key: []byte("k")}), wire.CodeHelloRequired},
		{"unknown version", false, wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: 9}), wire.CodeUnsupportedVersion},
		{"oversized before hello", false, oversized, wire.CodeFrameTooLarge},
		{"oversized", true, oversized, wire.CodeFrameTooLarge},
		{"zero length", true, []byte{0, 0, 0, 0}, wire.CodeMalformedFrame},
		{"unknown type", true, []byte{0, 0, 0, 1, 'Z'}, wire.CodeUnknownFrame},
		{"truncated acquire", true, wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 5, Key: []byte("k")})[:0], wire.CodeMalformedFrame},
		{"lease zero", true, wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 0, Key: []byte("k")}), wire.CodeInvalidArgument},
		{"lease 251", true, wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 251, Key: []byte("k")}), wire.CodeInvalidArgument},
		{"empty key", true, wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 5}), wire.CodeInvalidArgument},
		{"second hello", true, wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version}), wire.CodeHelloRequired},
		{"server frame from a client", true, wire.Append(nil, &wire.Frame{Type: wire.TypeGranted, ID: 1}), wire.CodeNotAllowed},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bytes
			if tc.name == "truncated acquire" {
				full := wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: 1, Lease: 5, Key: []byte("k")})
				b = append(binary.BigEndian.AppendUint32(nil, uint32(len(full)-5)), full[4:len(full)-1]...)
			}
			var r *testcluster.Raw
			if tc.hello {
				r = testcluster.Hello(t, c.Addr(0), "")
			} else {
				r = testcluster.DialRaw(t, c.Addr(0))
			}
			r.SendBytes(b)
			expectFatal(t, r, tc.code)
			stillServes(t, c.Addr(0), i)
		})
	}
	t.Run("duplicate request id", func(t *testing.T) {
		r := testcluster.Hello(t, c.Addr(0), "")
		r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 7, Owner: testcluster.Owner(50), Wait: 30, Lease: 5, Key: []byte("held")})
		expect(t, r.Recv(), wire.TypeQueued)
		r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 7, Owner: testcluster.Owner(51), Wait: 30, Lease: 5, Key: []byte("held")})
		expectFatal(t, r, wire.CodeDuplicateID)
	})
	t.Run("hello timeout", func(t *testing.T) {
		c2 := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.HelloTimeout = 200 * time.Millisecond }))
		r := testcluster.DialRaw(t, c2.Addr(0))
		expectFatal(t, r, wire.CodeHelloTimeout)
	})
	// The held ticket is untouched by all of that.
	did := holder.ID()
	holder.Send(&wire.Frame{Type: wire.TypeDescribe, ID: did, Key: []byte("held")})
	if f := expect(t, holder.Final(did), wire.TypeInfo); f.Token != g.Token {
		t.Fatalf("held ticket changed: %+v", f)
	}
}

func TestPingsEndDeadConnections(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.PingInterval = 100 * time.Millisecond }))
	r := testcluster.Hello(t, c.Addr(0), "")
	// Read without answering pings: the server gives up after two intervals.
	r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rd := wire.NewReader(r.Conn)
	var pings int
	for {
		var f wire.Frame
		if err := rd.Next(&f); err != nil {
			t.Fatalf("read: %v", err)
		}
		if f.Type == wire.TypePing {
			pings++
			continue
		}
		if f.Type != wire.TypeError || wire.Code(f.Code) != wire.CodePingTimeout {
			t.Fatalf("got %s code %d, want E ping timeout", f.Type, f.Code)
		}
		break
	}
	if pings < 2 {
		t.Fatalf("closed after %d pings, want at least 2", pings)
	}
	// A client that answers pings stays connected through many intervals.
	ok := testcluster.Hello(t, c.Addr(0), "")
	for i := 0; i < 5; i++ {
		ok.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var f wire.Frame
		if err := wire.NewReader(ok.Conn).Next(&f); err != nil || f.Type != wire.TypePing {
			t.Fatalf("want a ping, got %s err %v", f.Type, err)
		}
		ok.Send(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
	}
	expect(t, ok.Final(ok.Acquire("k", testcluster.Owner(1), 0, 5)), wire.TypeGranted)
}

// The pings of many idle connections leave in small groups spread over the
// interval, never all at once: a burst of one ping per connection (10,000 at
// a time) delays every other connection's answers while the server and its
// clients work through it. Pings sent together carry the same nonce, so the
// nonces seen across the connections show the groups.
func TestPingsOfManyConnectionsAreSpreadOverTheInterval(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.PingInterval = 200 * time.Millisecond }))
	const conns, pingsEach = 40, 3
	raws := make([]*testcluster.Raw, conns)
	for i := range raws {
		raws[i] = testcluster.Hello(t, c.Addr(0), "")
	}
	var mu sync.Mutex
	together := map[uint64]int{} // nonce -> connections that got a ping with it
	errs := make(chan error, conns)
	for _, r := range raws {
		go func(nc net.Conn) {
			nc.SetReadDeadline(time.Now().Add(20 * time.Second))
			rd := wire.NewReader(nc)
			for got := 0; got < pingsEach; {
				var f wire.Frame
				if err := rd.Next(&f); err != nil {
					errs <- fmt.Errorf("read: %w", err)
					return
				}
				if f.Type != wire.TypePing {
					errs <- fmt.Errorf("got %s, want only pings on an idle connection", f.Type)
					return
				}
				got++
				mu.Lock()
				together[f.Nonce]++
				mu.Unlock()
				if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})); err != nil {
					errs <- fmt.Errorf("pong: %w", err)
					return
				}
			}
			errs <- nil
		}(r.Conn)
	}
	for range raws {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	largest := 0
	for _, n := range together {
		largest = max(largest, n)
	}
	if largest > conns/4 {
		t.Fatalf("%d of %d idle connections were pinged together (nonce groups %v); want the pings spread in small groups", largest, conns, together)
	}
}

func TestAuthentication(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.ClientTokens = []string{"s3cret", "other-token"}
	}))
	for _, tok := range []string{"", "wrong", "s3cre", "s3cret!"} {
		r := testcluster.DialRaw(t, c.Addr(0))
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(tok)})
		expectFatal(t, r, wire.CodeUnauthenticated)
	}
	for _, tok := range []string{"s3cret", "other-token"} {
		r := testcluster.Hello(t, c.Addr(0), tok)
		g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(len(tok)), 0, 5)), wire.TypeGranted)
		expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	}
}

func TestTLSAndMutualTLS(t *testing.T) {
	ca := testcerts.New(t)
	caFile, pool := ca.CAFile, ca.Pool()
	srvCert, srvKey := ca.Issue(t, "server")

	// Three servers: client TLS with mTLS, and TLS for Raft between them
	// (each Raft certificate names its server's node id).
	c := testcluster.Start(t, 3, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile}
		raftCert, raftKey := ca.Issue(t, cfg.NodeID)
		cfg.RaftTLS = server.TLSFiles{CertFile: raftCert, KeyFile: raftKey, CAFile: caFile}
	}))
	addr := c.Addr(c.LeaderIndex(t))
	good := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{ca.TLSCert(t, "client")}}
	r := testcluster.DialRawTLS(t, addr, good)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	expect(t, r.Recv(), wire.TypeReady)
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 5)), wire.TypeGranted)
	expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)

	// Without a client certificate the handshake fails (mTLS).
	nc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err == nil {
		nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version}))
		_, err = nc.Read(make([]byte, 16))
		nc.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
	// Plain TCP garbage on the TLS port: refused, and the server goes on.
	raw := testcluster.DialRaw(t, addr)
	raw.SendBytes(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version}))
	if _, err := raw.RecvErr(10 * time.Second); err == nil {
		t.Fatal("plain TCP was answered on the TLS port")
	}
	r2 := testcluster.DialRawTLS(t, addr, good)
	r2.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	expect(t, r2.Recv(), wire.TypeReady)
}

func TestFollowerAnswersM(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	// Every follower answers the hello with M carrying the leader's client address.
	for i := 0; i < 3; i++ {
		if i == l {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := testcluster.DialRaw(t, c.Addr(i))
			r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
			f := r.Recv()
			if f.Type != wire.TypeNotLeader {
				t.Fatalf("follower %d answered %s, want M", i, f.Type)
			}
			if string(f.Text) == c.Addr(l) {
				break
			}
			if time.Now().After(deadline) { // the takeover entry may still be applying there
				t.Fatalf("follower %d hint %q, want %q", i, f.Text, c.Addr(l))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
