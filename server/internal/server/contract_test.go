package server_test

// Tests of the client contract in docs/protocol.md: ordering on
// one connection, request ids, the hello, and what a client learns when a
// connection ends.

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// A describe pipelined behind a release (both in one write, no wait for R)
// sees the key free: a describe is answered only after everything the
// connection sent before it has committed.
func TestPipelinedDescribeSeesEarlierRequests(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("k%d", i)
		g := expect(t, r.Final(r.Acquire(key, testcluster.Owner(i), 0, 60)), wire.TypeGranted)
		lid, did := r.ID(), r.ID()
		var b []byte
		b = wire.Append(b, &wire.Frame{Type: wire.TypeRelease, ID: lid, Token: g.Token, Key: []byte(key)})
		b = wire.Append(b, &wire.Frame{Type: wire.TypeDescribe, ID: did, Key: []byte(key)})
		r.SendBytes(b)
		got := map[uint32]wire.Frame{}
		for len(got) < 2 {
			f := r.Recv()
			got[f.ID] = f
		}
		expect(t, got[lid], wire.TypeReleased)
		if f := expect(t, got[did], wire.TypeInfo); f.Flags != 0 || f.Token != 0 {
			t.Fatalf("round %d: a describe pipelined after the release still sees the hold: %+v", i, f)
		}
		// And an acquire pipelined before a describe is seen by it.
		aid, did2 := r.ID(), r.ID()
		b = wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: aid, Owner: testcluster.Owner(100 + i), Lease: 60, Key: []byte(key)})
		b = wire.Append(b, &wire.Frame{Type: wire.TypeDescribe, ID: did2, Key: []byte(key)})
		r.SendBytes(b)
		got = map[uint32]wire.Frame{}
		for len(got) < 2 {
			f := r.Recv()
			got[f.ID] = f
		}
		g2 := expect(t, got[aid], wire.TypeGranted)
		if f := expect(t, got[did2], wire.TypeInfo); f.Flags != 1 || f.Token != g2.Token {
			t.Fatalf("round %d: a describe pipelined after the acquire does not see its grant %d: %+v", i, g2.Token, f)
		}
	}
}

// An acquire is decided against the state the leader has applied when it
// arrives; it does not wait for a release sent before it to commit. So an
// acquire with wait 0 pipelined right behind the release that frees the key
// can be answered W, and one with wait > 0 queues and is granted once the
// release is applied.
func TestAcquirePipelinedBehindReleaseOfTheSameKey(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	notAcquired := 0
	for i := 0; i < 10; i++ {
		lid, aid := r.ID(), r.ID()
		b := wire.Append(nil, &wire.Frame{Type: wire.TypeRelease, ID: lid, Token: g.Token, Key: []byte("k")})
		b = wire.Append(b, &wire.Frame{Type: wire.TypeAcquire, ID: aid, Owner: testcluster.Owner(100 + i), Lease: 60, Key: []byte("k")})
		r.SendBytes(b)
		got := map[uint32]wire.Frame{}
		for len(got) < 2 {
			f := r.Recv()
			got[f.ID] = f
		}
		expect(t, got[lid], wire.TypeReleased)
		switch f := got[aid]; f.Type {
		case wire.TypeNotAcquired:
			notAcquired++
			g = expect(t, r.Final(r.Acquire("k", testcluster.Owner(200+i), 0, 60)), wire.TypeGranted)
		case wire.TypeGranted:
			g = f
		default:
			t.Fatalf("acquire behind a release: %s", f.Type)
		}
	}
	if notAcquired == 0 {
		t.Fatal("every wait-0 acquire pipelined behind the release was granted: it waited for the release to commit")
	}
	// With wait > 0 it queues behind the release and gets the key.
	lid, aid := r.ID(), r.ID()
	b := wire.Append(nil, &wire.Frame{Type: wire.TypeRelease, ID: lid, Token: g.Token, Key: []byte("k")})
	b = wire.Append(b, &wire.Frame{Type: wire.TypeAcquire, ID: aid, Owner: testcluster.Owner(999), Wait: 30, Lease: 60, Key: []byte("k")})
	r.SendBytes(b)
	var final wire.Frame
	for released := false; !released || final.Type == 0; {
		f := r.Recv()
		switch {
		case f.ID == lid:
			expect(t, f, wire.TypeReleased)
			released = true
		case f.ID == aid && f.Type != wire.TypeQueued:
			final = f
		}
	}
	expect(t, final, wire.TypeGranted)
}

// The life of a request id: busy from the request to its final answer (Q is
// not final), free again afterwards; C names an acquire's id and takes no id
// of its own; id 0 is answered like any other id.
func TestRequestIDLifetime(t *testing.T) {
	c := testcluster.Start(t, 1)
	h := testcluster.Hello(t, c.Addr(0), "")
	held := expect(t, h.Final(h.Acquire("busy", testcluster.Owner(1), 0, 60)), wire.TypeGranted)

	r := testcluster.Hello(t, c.Addr(0), "")
	// Id 0 is an ordinary request id on the wire (clients are told not to
	// use it, since B with id 0 means "connection refused").
	r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 0, Owner: testcluster.Owner(2), Lease: 5, Key: []byte("zero")})
	if g := expect(t, r.Recv(), wire.TypeGranted); g.ID != 0 {
		t.Fatalf("answer to id 0 carries id %d", g.ID)
	}
	// A final answer frees the id: the same id again is a new request.
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: 0, Key: []byte("zero")})
	if f := expect(t, r.Recv(), wire.TypeInfo); f.ID != 0 || f.Flags != 1 {
		t.Fatalf("describe with a reused id: %+v", f)
	}
	// A queued acquire keeps its id (Q is not final). A cancel names it
	// without being a request of its own: no E 13, and X is the answer.
	r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 7, Owner: testcluster.Owner(3), Wait: 30, Lease: 5, Key: []byte("busy")})
	expect(t, r.Recv(), wire.TypeQueued)
	r.Send(&wire.Frame{Type: wire.TypeCancel, ID: 7, Owner: testcluster.Owner(3)})
	expect(t, r.Final(7), wire.TypeCancelled)
	// 7 is free again; queue it once more and reuse it while it waits.
	r.Send(&wire.Frame{Type: wire.TypeAcquire, ID: 7, Owner: testcluster.Owner(4), Wait: 30, Lease: 5, Key: []byte("busy")})
	expect(t, r.Recv(), wire.TypeQueued)
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: 7, Key: []byte("busy")})
	expectFatal(t, r, wire.CodeDuplicateID)
	expect(t, h.Final(h.Release("busy", held.Token)), wire.TypeReleased)
}

// The hello's own failures: a malformed hello is E 1, a token over 1024
// bytes E 8 (the state diagram), and a server without tokens ignores any
// token the hello carries.
func TestHelloFailuresAndTokensWithoutAuth(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.DialRaw(t, c.Addr(0))
	hello := wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte("tok")})
	bad := append([]byte(nil), hello[:len(hello)-1]...)
	bad[3]-- // a consistent length prefix, but text_len overruns the frame
	r.SendBytes(bad)
	expectFatal(t, r, wire.CodeMalformedFrame)

	r = testcluster.DialRaw(t, c.Addr(0))
	r.SendBytes([]byte{0, 0, 0, 1, 'Z'}) // an unknown type where H belongs
	expectFatal(t, r, wire.CodeUnknownFrame)

	r = testcluster.DialRaw(t, c.Addr(0))
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: bytes.Repeat([]byte("t"), wire.MaxToken+1)})
	expectFatal(t, r, wire.CodeInvalidArgument)

	for _, tok := range []string{"anything", strings.Repeat("x", wire.MaxToken)} {
		r := testcluster.Hello(t, c.Addr(0), tok)
		g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(len(tok)), 0, 5)), wire.TypeGranted)
		expect(t, r.Final(r.Release("k", g.Token)), wire.TypeReleased)
	}
}

// The count of I is the number of waiters in the key's queue, without the
// holder.
func TestDescribeCountsWaitersOnly(t *testing.T) {
	c := testcluster.Start(t, 1)
	h := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, h.Final(h.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	if f := describe(t, h, "k"); f.Flags != 1 || f.Count != 0 {
		t.Fatalf("held, nobody waiting: %+v, want count 0", f)
	}
	w := testcluster.Hello(t, c.Addr(0), "")
	for i := 0; i < 2; i++ {
		w.Acquire("k", testcluster.Owner(10+i), 30, 5)
		expect(t, w.Recv(), wire.TypeQueued)
	}
	// Asked on the waiters' own connection: answered while they still wait.
	if f := describe(t, w, "k"); f.Flags != 1 || f.Token != g.Token || f.Count != 2 {
		t.Fatalf("held with two waiters: %+v, want count 2", f)
	}
}

// A client's own pings are answered with O and the same nonce, and any
// frame from the client counts as a sign of life: a client that never
// answers the server's pings but sends its own keeps its connection.
func TestClientPingsAnsweredAndCountAsLife(t *testing.T) {
	const interval = 300 * time.Millisecond
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) { cfg.PingInterval = interval }))
	r := testcluster.DialRaw(t, c.Addr(0))
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	rd := wire.NewReader(r.Conn)
	next := func() wire.Frame {
		t.Helper()
		r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var f wire.Frame
		if err := rd.Next(&f); err != nil {
			t.Fatalf("read: %v", err)
		}
		return f
	}
	expect(t, next(), wire.TypeReady)
	// Eight server pings go unanswered (the server would give up after two
	// whole intervals); each is followed by a client ping, which counts.
	var nonce uint64 = 1000
	for pings := 0; pings < 8; {
		f := next()
		switch f.Type {
		case wire.TypePing:
			pings++
			nonce++
			r.Send(&wire.Frame{Type: wire.TypePing, Nonce: nonce})
		case wire.TypePong:
			if f.Nonce <= 1000 || f.Nonce > nonce {
				t.Fatalf("pong nonce %d, want one of the client's 1001..%d", f.Nonce, nonce)
			}
		default:
			t.Fatalf("got %s code %d %q: client pings did not keep the connection", f.Type, f.Code, f.Text)
		}
	}
}

// Right after a leadership transfer to a named member, before Raft has
// told the old leader who won, the old leader's M names the target instead
// of nothing, so clients go straight to it.
func TestNotLeaderAfterTransferNamesTheTarget(t *testing.T) {
	c := testcluster.Start(t, 3)
	// A transfer before every member applied the cluster ID can leave the
	// one that had not refused by the new leader (F7, docs/reliability.md).
	testcluster.WaitFor(t, 30*time.Second, "not every server applied the cluster ID", func() bool {
		for i := range c.Len() {
			if c.Server(i).Status().ClusterID == "none" {
				return false
			}
		}
		return true
	})
	// Raft gives up a transfer whose target does not win within an election
	// timeout, which a busy machine can cause: such a transfer is retried.
	// A failed transfer stays "in progress" at the old leader for a while,
	// so retries back off (50 ms doubling to 1 s) within an overall bound.
	failures, backoff := 0, 50*time.Millisecond
	giveUp := time.Now().Add(90 * time.Second)
	transferFailed := func(code uint16, st map[string]any) {
		t.Helper()
		if failures++; time.Now().After(giveUp) {
			t.Fatalf("leader.transfer failed %d times in 90 s, last: %d %v", failures, code, st)
		}
		t.Logf("leader.transfer failed (%d %v); trying again in %v", code, st, backoff)
		<-time.After(backoff)
		backoff = min(2*backoff, time.Second)
		c.LeaderIndex(t)
	}
	// A member's client address is recorded by its first takeover: let every
	// member lead once, so that each has one the others can name.
	for i := 0; i < 3; i++ {
		for l := c.LeaderIndex(t); l != i; l = c.LeaderIndex(t) {
			if code, st := admin(t, c.Addr(l), fmt.Sprintf(`{"op":"leader.transfer","id":"n%d"}`, i+1)); code != 0 {
				transferFailed(code, st)
			}
		}
		testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("n%d serving", i+1), c.Server(i).IsServing)
	}
	for round := 0; round < 3; round++ {
		l := c.LeaderIndex(t)
		target := (l + 1) % 3
		testcluster.WaitFor(t, 20*time.Second, "every member applied the cluster's addresses", func() bool {
			for i := 0; i < 3; i++ {
				for _, m := range c.Server(i).Status().Members {
					if m.ClientAddr == "" {
						return false
					}
				}
			}
			return true
		})
		var conns []*testcluster.Raw
		for i := 0; i < 3; i++ {
			conns = append(conns, testcluster.Hello(t, c.Addr(l), ""))
		}
		if code, st := admin(t, c.Addr(l), fmt.Sprintf(`{"op":"leader.transfer","id":"n%d"}`, target+1)); code != 0 {
			for _, r := range conns {
				r.Conn.Close()
			}
			transferFailed(code, st)
			round--
			continue
		}
		for _, r := range conns {
			f := expect(t, r.Recv(), wire.TypeNotLeader)
			if string(f.Text) != c.Addr(target) {
				t.Fatalf("round %d: M after a transfer to n%d names %q, want %s", round, target+1, f.Text, c.Addr(target))
			}
		}
		testcluster.WaitFor(t, 20*time.Second, "the target serving", c.Server(target).IsServing)
	}
}

// TLS as protocol.md describes it: at least TLS 1.2; the server presents
// its one certificate whatever name the client sends in SNI (or none, as
// for an IP address); the client checks that certificate against the host
// it dialled.
func TestTLSVersionAndServerName(t *testing.T) {
	ca := testcerts.New(t)
	srvCert, srvKey := ca.Issue(t, "server")
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: srvCert, KeyFile: srvKey}
	}))
	addr := c.Addr(0)
	handshake := func(cfg *tls.Config) (*tls.Conn, error) {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			t.Cleanup(func() { nc.Close() })
		}
		return nc, err
	}
	// An IP address: no SNI is sent, the certificate's IP SAN is checked.
	ip, err := handshake(&tls.Config{RootCAs: ca.Pool()})
	if err != nil {
		t.Fatalf("TLS to %s verified against the IP SAN: %v", addr, err)
	}
	// A DNS name in SNI: the same certificate.
	named, err := handshake(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("TLS with SNI localhost: %v", err)
	}
	// A name the certificate lacks: the server does not mind (one
	// certificate), the client's check refuses it.
	if _, err := handshake(&tls.Config{RootCAs: ca.Pool(), ServerName: "other.invalid"}); err == nil {
		t.Fatal("a certificate without the dialled name was accepted")
	}
	other, err := handshake(&tls.Config{InsecureSkipVerify: true, ServerName: "other.invalid"})
	if err != nil {
		t.Fatalf("unverified TLS with SNI other.invalid: %v", err)
	}
	want := ip.ConnectionState().PeerCertificates[0].Raw
	for name, nc := range map[string]*tls.Conn{"localhost": named, "other.invalid": other} {
		if !bytes.Equal(nc.ConnectionState().PeerCertificates[0].Raw, want) {
			t.Fatalf("SNI %s got another certificate", name)
		}
	}
	// The protocol runs inside: H, Y.
	ip.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version}))
	var f wire.Frame
	ip.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := wire.NewReader(ip).Next(&f); err != nil || f.Type != wire.TypeReady {
		t.Fatalf("hello over TLS: %s %v", f.Type, err)
	}
	// TLS 1.1 and older are refused.
	if _, err := handshake(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

// The hello answer carries the cluster ID only to a client that asked for
// it (HelloClusterID): an older client's decoder refuses the longer Y. The ID
// is the one admin status reports, on an admin session as on a ticket one.
func TestHelloAnswerCarriesTheClusterIDWhenAsked(t *testing.T) {
	c := testcluster.Start(t, 1)
	c.LeaderIndex(t)

	plain := testcluster.DialRaw(t, c.Addr(0))
	plain.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
	if y := expect(t, plain.Recv(), wire.TypeReady); y.Flags&wire.ReadyClusterID != 0 || y.ClusterID != (wire.ClusterID{}) {
		t.Fatalf("a hello without HelloClusterID got flags %#x and cluster %x: an older client would refuse this Y", y.Flags, y.ClusterID)
	}

	a := testcluster.DialRaw(t, c.Addr(0))
	a.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin | wire.HelloClusterID})
	ya := expect(t, a.Recv(), wire.TypeReady)
	id := a.ID()
	a.Send(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(`{"op":"status"}`)})
	var st adminwire.Status
	if f := expect(t, a.Final(id), wire.TypeAdminReply); adminwire.Decode("status", f.Text, &st) != nil {
		t.Fatalf("status: %s", f.Text)
	}
	if ya.Flags&wire.ReadyClusterID == 0 || hex.EncodeToString(ya.ClusterID[:]) != st.ClusterID {
		t.Fatalf("admin hello with HelloClusterID: flags %#x, cluster %x; status says cluster %s", ya.Flags, ya.ClusterID, st.ClusterID)
	}

	r := testcluster.DialRaw(t, c.Addr(0))
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloClusterID})
	y := expect(t, r.Recv(), wire.TypeReady)
	if y.Flags&(wire.ReadyClusterID|wire.ReadyLeader) != wire.ReadyClusterID|wire.ReadyLeader || y.ClusterID != ya.ClusterID {
		t.Fatalf("hello with HelloClusterID: flags %#x, cluster %x, want the leader of cluster %s", y.Flags, y.ClusterID, st.ClusterID)
	}
	expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 5)), wire.TypeGranted)

	// A server waiting to be added has no cluster ID yet, and says so: the
	// flag with an all-zero ID (only an admin session sees it; a client
	// session is told "not the leader").
	cfg := testcluster.Config(t, "w1", filepath.Join(t.TempDir(), "w1"))
	cfg.Join = true
	waiting, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	w := testcluster.DialRaw(t, cfg.ClientAddr)
	w.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin | wire.HelloClusterID})
	if yw := expect(t, w.Recv(), wire.TypeReady); yw.Flags&wire.ReadyClusterID == 0 || yw.ClusterID != (wire.ClusterID{}) {
		t.Fatalf("a server waiting to be added: flags %#x, cluster %x; want the cluster ID flag with an all-zero ID", yw.Flags, yw.ClusterID)
	}
}
