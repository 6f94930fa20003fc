package ticketing

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Many goroutines share one broker and one connection; the server's grants
// are exclusive and tokens grow per key (the fencing check).
func TestManyGoroutinesOneBroker(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	keys := []string{"k0", "k1", "k2", "k3"}
	var inUse [4]atomic.Int32
	var mu sync.Mutex
	var high [4]uint64
	var grants atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				k := (g + i) % len(keys)
				tk, err := b.Acquire(ctx, keys[k], 10*time.Second, 30*time.Second, time.Second)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if inUse[k].Add(1) != 1 {
					t.Errorf("two holders of %s", keys[k])
				}
				mu.Lock()
				if tk.Token() <= high[k] {
					t.Errorf("token %d for %s not above the high-water mark %d", tk.Token(), keys[k], high[k])
				}
				high[k] = tk.Token()
				mu.Unlock()
				inUse[k].Add(-1)
				grants.Add(1)
				if i%2 == 0 {
					if err := tk.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
				} else {
					tk.Close()
				}
			}
		}()
	}
	wg.Wait()
	if grants.Load() != 32*20 {
		t.Errorf("%d grants", grants.Load())
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d connections, want 1 shared connection", n)
	}
}

// A hello answered with M and a hint sends the broker to that server.
func TestReconnectFollowsHelloRedirect(t *testing.T) {
	l := newLocks(t)
	leader := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{NodeID: "n2"}))
	follower := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err == nil {
			c.NotLeader(leader.Addr())
		}
	})
	b := connect(t, follower.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := l.Holder("k"); tok != tk.Token() {
		t.Errorf("not granted by the leader")
	}
	tk.Release(ctx)
}

// A refused token is surfaced promptly by WaitReady and by calls; the broker
// keeps retrying and recovers once the server accepts it.
func TestAuthFailureSurfaced(t *testing.T) {
	var accept atomic.Bool
	l := newLocks(t)
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		if !accept.Load() && string(h.Text) != "good" {
			c.Error(wire.CodeUnauthenticated, "the client token is not accepted")
			return
		}
		c.Send(faketicketd.Ready{}.Frame())
		defer l.Drop(c)
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			l.Handle(c, f)
		}
	})
	b := connect(t, srv.Addr(), WithToken("bad"))
	ctx := ctxFor(t) // long: a prompt answer must not wait for it
	err := b.WaitReady(ctx)
	if !errors.Is(err, ErrUnauthenticated) || ctx.Err() != nil {
		t.Fatalf("WaitReady: %v, want ErrUnauthenticated", err)
	}
	var se *ServerError
	if !errors.As(err, &se) || se.Code != CodeUnauthenticated {
		t.Errorf("no ServerError code 5 in %v", err)
	}
	if !strings.Contains(err.Error(), "unauthenticated") || !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("message: %v", err)
	}
	_, err = b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if !errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrIndeterminate) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("Acquire: %v, want ErrUnauthenticated (not sent)", err)
	}
	if c := retry.Classify(err); c.Retryable(true) {
		t.Errorf("an auth failure is classified %v", c)
	}
	accept.Store(true)
	waitUntil(t, "the broker recovers", func() bool { return b.WaitReady(ctx) == nil })
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Release(ctx)
}

// makeCA returns a self-signed CA and a server certificate for 127.0.0.1
// signed by it.
func makeCA(t *testing.T) (caPEM []byte, server tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ticketing test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ticketd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLSModes(t *testing.T) {
	caPEM, cert := makeCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}),
		faketicketd.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))

	for name, mode := range map[string]TLSMode{"CA file": TLSCAFile(caFile), "insecure": TLSInsecureSkipVerify()} {
		t.Run(name, func(t *testing.T) {
			b := connect(t, srv.Addr(), WithTLS(mode))
			ctx := ctxFor(t)
			tk, err := b.Acquire(ctx, "tls-"+name, time.Second, 10*time.Second, 0)
			if err != nil {
				t.Fatalf("acquire over %v: %v", mode, err)
			}
			if err := tk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("system roots", func(t *testing.T) {
		// It constructs; our test CA is not a system root, so the refusal is
		// reported promptly as a certificate problem.
		b := connect(t, srv.Addr(), WithTLS(TLSSystemRoots()))
		err := b.WaitReady(ctxFor(t))
		var cv *tls.CertificateVerificationError
		if !errors.As(err, &cv) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("WaitReady: %v, want a certificate verification error", err)
		}
	})
	t.Run("plain client against TLS server", func(t *testing.T) {
		// The server closes the plain hello; a TLS handshake shows why.
		err := refusedPromptly(t, connect(t, srv.Addr()))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "uses TLS") || !strings.Contains(err.Error(), "WithTLS") {
			t.Fatalf("WaitReady: %v, want an error saying the server uses TLS", err)
		}
	})
	t.Run("bad CA files", func(t *testing.T) {
		if _, err := Connect(srv.Addr(), WithTLS(TLSCAFile(filepath.Join(dir, "missing.crt")))); err == nil {
			t.Errorf("an unreadable CA file was accepted")
		}
		empty := filepath.Join(dir, "empty.crt")
		os.WriteFile(empty, []byte("not a certificate"), 0o600)
		if _, err := Connect(srv.Addr(), WithTLS(TLSCAFile(empty))); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("a CA file without certificates: %v", err)
		}
	})
}

func TestConnectConfigErrors(t *testing.T) {
	for _, addrs := range []string{"", " , ", "a:b:c", "[a:1"} {
		if b, err := Connect(addrs); err == nil {
			b.Close()
			t.Errorf("Connect(%q) succeeded", addrs)
		} else if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Connect(%q): %v", addrs, err)
		}
	}
	if _, err := Connect("a:1", WithToken(strings.Repeat("t", 1025))); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("long token: %v", err)
	}
	b, err := Connect(" 127.0.0.1:1 , 127.0.0.1:2 ", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.addrs) != 2 || b.addrs[1] != "127.0.0.1:2" {
		t.Errorf("addresses %q", b.addrs)
	}
	b.Close()
}

// Broker.Close ends every pending call with ErrClosed.
func TestCloseMakesPendingCallsReturnErrClosed(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire && string(f.Key) == "held" {
			grant(c, f, 3)
		}
		return true // nothing else is ever answered
	}))
	// Close waits up to the release bound for what it can still reach.
	b := connect(t, srv.Addr(), withCfg(func(c *config) { c.releaseBound = 300 * time.Millisecond }))
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "held", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { _, err := b.Acquire(ctx, "pending", 10*time.Second, 10*time.Second, 0); errs <- err }()
	go func() { _, err := b.Describe(ctx, "pending"); errs <- err }()
	go func() { errs <- tk.Release(ctx) }()
	r.wait(t, 1, isAcquireOf("pending"))
	r.wait(t, 1, isType(wire.TypeDescribe))
	r.wait(t, 1, isType(wire.TypeRelease))
	b.Close()
	for range 3 {
		err := <-errs
		if strings.Contains(err.Error(), "release") && errors.Is(err, ErrIndeterminate) {
			continue // the release ran out its own bound while Close waited
		}
		if !errors.Is(err, ErrClosed) {
			t.Errorf("pending call: %v, want ErrClosed", err)
		} else if strings.Contains(err.Error(), "acquire") && !errors.Is(err, ErrIndeterminate) {
			t.Errorf("a sent acquire must also be indeterminate: %v", err)
		}
	}
	if _, err := b.Acquire(ctx, "after", time.Second, time.Second, 0); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "nothing was sent") {
		t.Errorf("Acquire after Close: %v", err)
	}
	if err := b.WaitReady(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitReady after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Close wakes callers that wait for a connection that never comes.
func TestCloseWakesWaitReady(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) { c.Read() }) // never answers the hello
	b := connect(t, srv.Addr())
	done := make(chan error, 1)
	go func() { done <- b.WaitReady(context.Background()) }()
	waitUntil(t, "a hello was attempted", func() bool { return srv.Accepted() > 0 })
	b.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitReady: %v", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := faketicketd.NewLocks()
	srv, err := faketicketd.New(faketicketd.Serve(l, faketicketd.Ready{}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Connect(srv.Addr(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Close()
	b.Close()
	srv.Close()
	l.Close()
	if _, ok := l.Holder("k"); ok {
		t.Errorf("the queued background release did not run before Close returned")
	}
}

func TestPingAnsweredWithPong(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		c.Send(wire.Frame{Type: wire.TypePing, Nonce: 42})
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
		}
	})
	connect(t, srv.Addr())
	o := r.wait(t, 1, isType(wire.TypePong))
	if o.f.Nonce != 42 {
		t.Errorf("pong nonce %d", o.f.Nonce)
	}
}

// The Y frame's in-flight limit is never exceeded; callers wait for a slot.
func TestInFlightLimitRespected(t *testing.T) {
	const limit = 2
	var mu sync.Mutex
	var outstanding []wire.Frame
	violations := 0
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{MaxInFlight: limit}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type != wire.TypeAcquire {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		outstanding = append(outstanding, f)
		if len(outstanding) > limit {
			violations++
		}
		if len(outstanding) == limit { // answer only when the client is at its limit
			for _, a := range outstanding {
				c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: a.ID})
			}
			outstanding = outstanding[:0]
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Acquire(ctx, "k"+string(rune('a'+i)), time.Second, 10*time.Second, 0); !errors.Is(err, ErrNotAcquired) {
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if violations > 0 {
		t.Errorf("the client exceeded the in-flight limit %d times", violations)
	}
}

func TestDescribe(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Describe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Held || d.Token != tk.Token() || d.Lease != 30*time.Second || d.Remaining <= 0 || d.Remaining > 30*time.Second || d.Waiters != 0 || d.Key != "k" {
		t.Errorf("held key: %+v", d)
	}
	tk.Release(ctx)
	if d, err = b.Describe(ctx, "k"); err != nil || d.Held || d.Token != 0 {
		t.Errorf("free key: %+v, %v", d, err)
	}
}

func TestAdmin(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		if h.Flags&wire.HelloAdmin == 0 {
			c.Error(wire.CodeNotAllowed, "expected an admin hello")
			return
		}
		c.Send(faketicketd.Ready{NodeID: "n1", Follower: true}.Frame())
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
			var req map[string]any
			json.Unmarshal(f.Text, &req)
			reply := func(code uint16, body string) {
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: code, Text: []byte(body)})
			}
			switch req["op"] {
			case "status":
				reply(0, `{"node_id":"n1","role":"follower","leader_id":"n2","leader_addr":"10.0.0.2:5225","term":3,
					"commit_index":10,"applied_index":9,"last_token":7,"held":1,
					"members":[{"id":"n1","raft_addr":"10.0.0.1:7000","client_addr":"10.0.0.1:5225","voter":true,"leader":false}]}`)
			case "members.add":
				reply(1, `{"leader_addr":"10.0.0.2:5225"}`)
			case "members.remove":
				reply(2, `{"error":"no such member"}`)
			case "leader.transfer":
				reply(0, `{"leader_id":"n3"}`)
			}
		}
	})
	ctx := ctxFor(t)
	a, err := DialAdmin(ctx, srv.Addr(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.NodeID() != "n1" {
		t.Errorf("node id %q", a.NodeID())
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "n1" || st.Role != "follower" || st.LeaderAddr != "10.0.0.2:5225" || st.Term != 3 || st.LastToken != 7 ||
		len(st.Members) != 1 || st.Members[0].RaftAddr != "10.0.0.1:7000" || !st.Members[0].Voter {
		t.Errorf("status: %+v", st)
	}
	err = a.AddMember(ctx, "n4", "10.0.0.4:7000")
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderAddr != "10.0.0.2:5225" {
		t.Errorf("AddMember on a follower: %v", err)
	}
	add := r.wait(t, 2, isType(wire.TypeAdmin))
	var req map[string]string
	if json.Unmarshal(add.f.Text, &req); req["op"] != "members.add" || req["id"] != "n4" || req["raft_addr"] != "10.0.0.4:7000" {
		t.Errorf("members.add request %s", add.f.Text)
	}
	err = a.RemoveMember(ctx, "n9")
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Message != "no such member" {
		t.Errorf("RemoveMember: %v", err)
	}
	if id, err := a.TransferLeader(ctx, ""); err != nil || id != "n3" {
		t.Errorf("TransferLeader: %q, %v", id, err)
	}
	a.Close()
	if _, err := a.Status(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Status after Close: %v", err)
	}
}

func TestDialAdminErrors(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err == nil {
			c.Error(wire.CodeUnauthenticated, "bad token")
		}
	})
	ctx := ctxFor(t)
	if _, err := DialAdmin(ctx, srv.Addr(), quiet); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("refused token: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := DialAdmin(ctx, addr, quiet); !errors.Is(err, ErrUnavailable) {
		t.Errorf("nobody listening: %v", err)
	}
	if _, err := DialAdmin(ctx, "a:1,b:2"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("two addresses: %v", err)
	}
}

// gateConn is a net.Conn whose first Write blocks until released, to show
// that frames queued meanwhile go out together.
type gateConn struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	bytes   int
	entered chan struct{}
	release chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (g *gateConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	first := g.writes == 1
	g.mu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	g.bytes += len(b)
	g.mu.Unlock()
	return len(b), nil
}
func (g *gateConn) Read([]byte) (int, error)         { <-g.closed; return 0, net.ErrClosed }
func (g *gateConn) Close() error                     { g.once.Do(func() { close(g.closed) }); return nil }
func (g *gateConn) SetWriteDeadline(time.Time) error { return nil }

func TestWriterCoalescesFrames(t *testing.T) {
	g := &gateConn{entered: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	c := &conn{nc: g, addr: "gate", pending: make(map[uint32]*call), wsig: make(chan struct{}, 1), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go c.writeLoop(&wg)
	ctx := context.Background()
	total := 0
	send := func() {
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte("key")}
		if err := c.start(ctx, newCall(wire.TypeDescribe, "key"), &f); err != nil {
			t.Fatal(err)
		}
		total += len(wire.Append(nil, &f))
	}
	send()
	<-g.entered
	for range 100 {
		send()
	}
	close(g.release)
	waitUntil(t, "every frame was written", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.bytes == total
	})
	g.mu.Lock()
	if g.writes != 2 {
		t.Errorf("101 frames took %d writes, want 2", g.writes)
	}
	g.mu.Unlock()
	c.fail(&connFailure{kind: failClosed, addr: "gate"})
	wg.Wait()
}

func TestRetryClasses(t *testing.T) {
	cases := []struct {
		err  error
		want retry.Class
	}{
		{newOpError("acquire", "k", true, &CapacityError{Reason: CapacityHeld}, "x", ErrCapacity), retry.Overloaded},
		{&CapacityError{Reason: CapacityHeld}, retry.Overloaded},
		{newOpError("acquire", "k", true, nil, "x", ErrIndeterminate), retry.Undetermined},
		{newOpError("describe", "k", true, nil, "x", ErrUnavailable), retry.TransportUnavailable},
		{&waitError{ctx: context.DeadlineExceeded}, retry.Timeout},
		{connectError("acquire", "k", true, &waitError{ctx: context.DeadlineExceeded}), retry.TransportUnavailable},
		{newOpError("acquire", "k", true, nil, "x", ErrNotAcquired), retry.NonRetryable},
		{invalidArg("acquire", "k", true, "x"), retry.InvalidArgument},
		{newOpError("release", "k", true, nil, "x", ErrNotHeld), retry.NonRetryable},
		{newOpError("acquire", "k", true, nil, "x", ErrIndeterminate, ErrClosed), retry.NonRetryable},
		{newOpError("acquire", "k", true, nil, "x", context.Canceled), retry.Canceled},
	}
	for _, c := range cases {
		if got := retry.Classify(c.err); got != c.want {
			t.Errorf("%v: class %v, want %v", c.err, got, c.want)
		}
	}
	if !retry.Undetermined.Retryable(true) || retry.Undetermined.Retryable(false) {
		t.Errorf("indeterminate errors must be retried only when idempotent")
	}
}

// The exported constants mirror the wire package.
func TestConstantsMatchWire(t *testing.T) {
	if MaxWait != wire.MaxWait*time.Second || MinLease != wire.MinLease*time.Second ||
		MaxLease != wire.MaxLease*time.Second || MaxKey != wire.MaxKey {
		t.Errorf("argument limits differ from package wire")
	}
	codes := map[ErrorCode]wire.Code{
		CodeMalformedFrame: wire.CodeMalformedFrame, CodeFrameTooLarge: wire.CodeFrameTooLarge,
		CodeUnknownFrame: wire.CodeUnknownFrame, CodeUnsupportedVersion: wire.CodeUnsupportedVersion,
		CodeUnauthenticated: wire.CodeUnauthenticated, CodeHelloRequired: wire.CodeHelloRequired,
		CodeHelloTimeout: wire.CodeHelloTimeout, CodeInvalidArgument: wire.CodeInvalidArgument,
		CodePingTimeout: wire.CodePingTimeout, CodeSlowConsumer: wire.CodeSlowConsumer,
		CodeShuttingDown: wire.CodeShuttingDown, CodeInternal: wire.CodeInternal,
		CodeDuplicateID: wire.CodeDuplicateID, CodeNotAllowed: wire.CodeNotAllowed,
	}
	for c, w := range codes {
		if uint16(c) != uint16(w) {
			t.Errorf("code %v is %d, wire has %d", c, c, w)
		}
	}
	reasons := map[CapacityReason]uint8{
		CapacityHeld: wire.CapacityHeld, CapacityKeyWaiters: wire.CapacityKeyWaiters, CapacityWaiters: wire.CapacityWaiters,
		CapacityInFlight: wire.CapacityInFlight, CapacityConnections: wire.CapacityConnections,
	}
	for r, w := range reasons {
		if uint8(r) != w {
			t.Errorf("capacity reason %d, wire has %d", r, w)
		}
	}
}
