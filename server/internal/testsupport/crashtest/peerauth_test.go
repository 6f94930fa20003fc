package crashtest

// The Raft port trusts nobody on their word: an unknown node id, a
// certificate naming another id, an empty server asked for its vote are
// refused before any Raft RPC reaches Raft, and nothing is written to the
// log. The intruder here is this test, speaking the handshake of
// docs/design.md by hand and then Raft's own RPCs (hashicorp/raft's
// transport).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Handshake constants as docs/design.md describes the frame (version 3).
const (
	hsKindRaft  = 1
	hsKindProbe = 2
	hsSettled   = 2
	hsEmpty     = 0
)

// forgedPeer claims to be node id (state, cluster) on every connection.
type forgedPeer struct {
	id      string
	state   byte
	cluster [16]byte
	tls     *tls.Config // nil: plain TCP
	// secret, when set, is what the peer proves in handshake version 3
	// (the cluster's, or a wrong one); without it the hello says it proves
	// nothing. version 2 speaks the handshake of ticketd before secrets.
	secret  []byte
	version byte
	closed  chan struct{}
}

func (f *forgedPeer) hello(kind byte) []byte {
	v := f.version
	if v == 0 {
		v = 3
	}
	b := append([]byte("TKRC"), v, kind)
	b = append(b, f.cluster[:]...)
	b = append(b, f.state, byte(len(f.id)))
	b = append(b, f.id...)
	b = binary.BigEndian.AppendUint64(b, 0xF0F0F0F0)
	if v >= 3 {
		auth := byte(0)
		if f.secret != nil {
			auth = 1
		}
		b = append(b, auth)
		nonce := make([]byte, 32)
		rand.Read(nonce)
		b = append(b, nonce...)
	}
	return b
}

// peerProof is the proof of the cluster secret as docs/design.md defines
// it: HMAC-SHA256 keyed by the secret over the role, the dialer's hello
// and the acceptor's challenge up to its proofs.
func peerProof(secret []byte, role string, hello, challengeHead []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ticketing raft peer proof\x00" + role + "\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hello))))
	h.Write(hello)
	h.Write(challengeHead)
	return h.Sum(nil)
}

// exchange dials addr, says hello (answering a challenge with the proof
// of f.secret), and reads the reply: the peer's cluster and, when it
// refused, its reason. challenged says whether the peer asked for a proof.
func (f *forgedPeer) exchange(addr string, kind byte, timeout time.Duration) (net.Conn, [16]byte, string, error) {
	c, cluster, reason, _, err := f.exchangeChallenged(addr, kind, timeout)
	return c, cluster, reason, err
}

func (f *forgedPeer) exchangeChallenged(addr string, kind byte, timeout time.Duration) (net.Conn, [16]byte, string, bool, error) {
	var cluster [16]byte
	d := &net.Dialer{Timeout: timeout}
	var c net.Conn
	var err error
	if f.tls != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, f.tls)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, cluster, "", false, err
	}
	fail := func(err error) (net.Conn, [16]byte, string, bool, error) {
		c.Close()
		return nil, cluster, "", false, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	hello := f.hello(kind)
	if _, err := c.Write(hello); err != nil {
		return fail(err)
	}
	head := make([]byte, 6)
	if _, err := io.ReadFull(c, head); err != nil {
		return fail(fmt.Errorf("read the answer: %w", err))
	}
	challenged := head[4] >= 3 && head[5] == 2
	if challenged {
		// "TKRC" 3 2 id:str8 nonce:[32] n:u8 proof:[32]*n
		n := make([]byte, 1)
		if _, err := io.ReadFull(c, n); err != nil {
			return fail(err)
		}
		rest := make([]byte, int(n[0])+32+1)
		if _, err := io.ReadFull(c, rest); err != nil {
			return fail(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 32*int(rest[len(rest)-1]))); err != nil {
			return fail(err)
		}
		challengeHead := append(append(append([]byte(nil), head...), n...), rest[:len(rest)-1]...)
		secret := f.secret
		if secret == nil {
			secret = []byte("no secret at all")
		}
		if _, err := c.Write(append([]byte{1}, peerProof(secret, "dialer", hello, challengeHead)...)); err != nil {
			return fail(err)
		}
		if _, err := io.ReadFull(c, head); err != nil {
			return fail(fmt.Errorf("read the reply after the proof: %w", err))
		}
	}
	body := make([]byte, 18)
	if _, err := io.ReadFull(c, body); err != nil {
		return fail(fmt.Errorf("read the reply: %w", err))
	}
	copy(cluster[:], body[:16])
	rest := make([]byte, int(body[17])+8+2)
	if _, err := io.ReadFull(c, rest); err != nil {
		return fail(err)
	}
	reason := make([]byte, binary.BigEndian.Uint16(rest[len(rest)-2:]))
	if _, err := io.ReadFull(c, reason); err != nil {
		return fail(err)
	}
	if head[5] != 0 {
		c.Close()
		return nil, cluster, string(reason), challenged, errRefusedByPeer
	}
	c.SetDeadline(time.Time{})
	return c, cluster, "", challenged, nil
}

var errRefusedByPeer = errors.New("refused by the peer")

// Dial, Accept, Close and Addr make forgedPeer a raft.StreamLayer.
func (f *forgedPeer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, _, reason, err := f.exchange(string(addr), hsKindRaft, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, reason)
	}
	return c, nil
}
func (f *forgedPeer) Accept() (net.Conn, error) { <-f.closed; return nil, net.ErrClosed }
func (f *forgedPeer) Close() error              { close(f.closed); return nil }
func (f *forgedPeer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// requestVote sends one RequestVote as f, with the leadership-transfer flag
// and a log longer than anyone's, as a disruptive intruder would.
func (f *forgedPeer) requestVote(target string, term uint64) (*raft.RequestVoteResponse, error) {
	f.closed = make(chan struct{})
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: f, MaxPool: 1, Timeout: 5 * time.Second, Logger: nil})
	defer trans.Close()
	var resp raft.RequestVoteResponse
	err := trans.RequestVote(raft.ServerID("x"), raft.ServerAddress(target), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(f.id), Addr: []byte("127.0.0.1:1")},
		Term:      term, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40, LeadershipTransfer: true,
	}, &resp)
	return &resp, err
}

func clusterBytes(t *testing.T, hexID string) [16]byte {
	t.Helper()
	var id [16]byte
	b, err := hex.DecodeString(hexID)
	if err != nil || len(b) != 16 {
		t.Fatalf("cluster ID %q", hexID)
	}
	copy(id[:], b)
	return id
}

// TestRaftPortRefusesNonMembers: an intruder on the Raft port that holds
// the cluster secret (a server of the cluster, misconfigured) claims
// made-up node ids with the cluster's ID
// read from the handshake, hundreds of times, and sends RequestVotes with
// the leadership-transfer flag. None becomes a participant, nothing is
// written to the log, no term changes, and the cluster keeps granting.
func TestRaftPortRefusesNonMembers(t *testing.T) {
	c, id := threeNodes(t)
	li := c.leader()
	leader := c.procs[li]
	before := statusOf(t, leader)
	cluster := clusterBytes(t, id)
	for i := 0; i < 200; i++ {
		f := &forgedPeer{id: fmt.Sprintf("intruder-%d", i), state: hsSettled, cluster: cluster, secret: clusterSecret(t)}
		p := c.procs[i%3]
		if conn, _, reason, err := f.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil {
			conn.Close()
			t.Fatalf("%s accepted a Raft connection from the made-up node id %s", p.id, f.id)
		} else if !strings.Contains(reason, "not a member of this cluster") {
			t.Fatalf("%s refused %s with %q (%v); want it to say it is not a member", p.id, f.id, reason, err)
		}
	}
	for _, p := range c.procs {
		f := &forgedPeer{id: "intruder", state: hsSettled, cluster: cluster, secret: clusterSecret(t)}
		if resp, err := f.requestVote(p.raftAddr, before.Term+100); err == nil {
			t.Fatalf("%s answered a RequestVote from a non-member: %+v", p.id, resp)
		}
	}
	after := statusOf(t, leader)
	if after.Term != before.Term || after.Role != "leader" {
		t.Fatalf("the intruder disturbed the leader: term %d → %d, role %s", before.Term, after.Term, after.Role)
	}
	if after.CommitIndex != before.CommitIndex {
		t.Fatalf("the intruder's handshakes wrote to the log: commit index %d → %d", before.CommitIndex, after.CommitIndex)
	}
	if !slices.Equal(after.Participants, before.Participants) {
		t.Fatalf("participants changed: %v → %v", before.Participants, after.Participants)
	}
	grantKey(t, c.addrs(), "after-intruder", 1)
}

// TestEmptyServerNeverVotes: a server waiting to be added (empty data
// directory) is asked for its vote by a peer that claims a cluster ID and
// a log longer than anyone's. It refuses: an empty directory cannot tell
// whether it lost what it once acknowledged.
func TestEmptyServerNeverVotes(t *testing.T) {
	p := newProc(t, "e1", t.TempDir(), "--initial-cluster-state", "existing")
	p.start()
	waitFor(t, startTimeout, "e1 waits to be added", func() bool { return strings.Contains(p.log(), "waiting to be added") }, p)
	f := &forgedPeer{id: "c1", state: hsSettled, cluster: [16]byte{1, 2, 3}, secret: clusterSecret(t)}
	resp, err := f.requestVote(p.raftAddr, 7)
	if err == nil {
		t.Fatalf("the empty server answered a RequestVote: granted=%v", resp.Granted)
	}
	if !strings.Contains(err.Error(), "does not vote") {
		t.Fatalf("refusal %v; want it to say the empty server does not vote", err)
	}
	// A peer without a cluster ID is not even let in.
	g := &forgedPeer{id: "c2", state: 1, secret: clusterSecret(t)}
	if _, _, reason, err := g.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil || !strings.Contains(reason, "data directory is empty") {
		t.Fatalf("a peer without a cluster ID was let in by an empty server: %q %v", reason, err)
	}
}

// testPKI is a CA and certificates signed by it, written as PEM files.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	return newNamedTestPKI(t, "test raft CA")
}

// newNamedTestPKI is newTestPKI with the CA's subject CN, for tests with
// two CAs.
func newNamedTestPKI(t *testing.T, caName string) *testPKI {
	t.Helper()
	k := &testPKI{dir: t.TempDir()}
	var err error
	if k.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.caKey.PublicKey, k.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if k.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	k.caFile = filepath.Join(k.dir, "ca.crt")
	writePEM(t, k.caFile, "CERTIFICATE", der)
	k.serial = 1
	return k
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes a certificate for 127.0.0.1 with subject CN cn (and a URI
// SAN when uri is set); it returns the cert and key files.
func (k *testPKI) issue(t *testing.T, cn, uri string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(k.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, k.ca, &key.PublicKey, k.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(k.dir, fmt.Sprintf("%d.crt", k.serial)), filepath.Join(k.dir, fmt.Sprintf("%d.key", k.serial))
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func (k *testPKI) clientTLS(t *testing.T, certFile, keyFile string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(k.ca)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// TestRaftTLSBindsCertificateToNodeID: with raft_tls, each server's
// certificate names its node id (n1 in the CN, n2 and n3 in a URI SAN). A
// certificate from the same CA naming another id cannot claim a member's
// id, a made-up id is not a member, and a peer without a certificate does
// not get through TLS.
func TestRaftTLSBindsCertificateToNodeID(t *testing.T) {
	pki := newTestPKI(t)
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		cn, uri := id, ""
		if i > 1 {
			cn, uri = "raft server "+id, "ticketing://node/"+id
		}
		cert, key := pki.issue(t, cn, uri)
		p := newProc(t, id, base, "--config", cfgFile, "--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", pki.caFile)
		p.noSecret = true // authenticated by raft_tls alone
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
		p.start()
	}
	c := &cluster{t: t, procs: ps}
	leader := ps[c.leader()]
	grantKey(t, c.addrs(), "tls/0", 1)
	before := statusOf(t, leader)

	rogueCert, rogueKey := pki.issue(t, "n9", "ticketing://node/n9")
	rogue := pki.clientTLS(t, rogueCert, rogueKey)
	for _, p := range ps {
		claim := "n2"
		if p.id == "n2" {
			claim = "n3"
		}
		f := &forgedPeer{id: claim, state: hsSettled, cluster: clusterBytes(t, before.ClusterID), tls: rogue}
		_, _, reason, err := f.exchange(p.raftAddr, hsKindRaft, 5*time.Second)
		if err == nil || !strings.Contains(reason, "its certificate names") {
			t.Fatalf("%s let a certificate for n9 claim node id %s: %q %v", p.id, claim, reason, err)
		}
		if _, err := f.requestVote(p.raftAddr, before.Term+100); err == nil {
			t.Fatalf("%s answered a RequestVote sent as %s with n9's certificate", p.id, claim)
		}
		self := &forgedPeer{id: "n9", state: hsSettled, cluster: clusterBytes(t, before.ClusterID), tls: rogue}
		if _, _, reason, err := self.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil || !strings.Contains(reason, "not a member") {
			t.Fatalf("%s let n9 in with its own certificate: %q %v", p.id, reason, err)
		}
		noCert := &forgedPeer{id: claim, state: hsSettled, tls: &tls.Config{RootCAs: rogue.RootCAs, MinVersion: tls.VersionTLS12}}
		if _, _, _, err := noCert.exchange(p.raftAddr, hsKindProbe, 5*time.Second); err == nil {
			t.Fatalf("%s answered a peer that presented no certificate", p.id)
		}
	}
	if !strings.Contains(ps[0].log()+ps[1].log()+ps[2].log(), "its certificate names") {
		t.Fatalf("no server logged the refused certificate")
	}
	after := statusOf(t, leader)
	if after.Term != before.Term || after.CommitIndex != before.CommitIndex || !slices.Equal(after.Participants, before.Participants) {
		t.Fatalf("the intruder changed the cluster: %+v → %+v", before, after)
	}
	grantKey(t, c.addrs(), "tls/1", 2)
}

// TestRaftAuthRequiredAtStart: ticketd refuses raft_tls without a CA, and
// a server meant to have peers without peer authentication (on loopback
// too) unless raft_insecure says so, in which case it warns at every start.
func TestRaftAuthRequiredAtStart(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "s1", "")
	port := strings.TrimPrefix(freePort(t), "127.0.0.1")
	cases := []struct {
		name  string
		extra []string
		want  string
	}{
		{"raft_tls without ca", []string{"--raft-tls-cert", cert, "--raft-tls-key", key}, "raft_tls needs ca"},
		{"loopback bootstrap list without peer authentication", []string{"--bootstrap", "s1=127.0.0.1" + port + ",s2=" + freePort(t)}, "its Raft peers are not authenticated"},
		{"waiting to be added without peer authentication", []string{"--join"}, "its Raft peers are not authenticated"},
		{"cluster_name without raft_tls", []string{"--cluster-name", "alpha", "--raft-insecure"}, "cluster_name binds Raft certificates to the cluster and needs [raft_tls]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc(t, "s1", t.TempDir(), tc.extra...)
			p.noSecret = true
			if tc.name == "loopback bootstrap list without peer authentication" {
				p.raftAddr = "127.0.0.1" + port
			}
			p.start()
			waitExit(t, p)
			if p.exitCode() == 0 || !strings.Contains(p.log(), tc.want) {
				t.Fatalf("exit code %d; want a refusal saying %q\n%s", p.exitCode(), tc.want, p.logTail(10))
			}
		})
	}
	t.Run("raft_insecure", func(t *testing.T) {
		p := newProc(t, "s1", t.TempDir(), "--raft-listen", "0.0.0.0"+port, "--raft-advertise", "127.0.0.1"+port, "--raft-insecure")
		p.noSecret = true
		for start := 1; start <= 2; start++ {
			p.start()
			p.mustReady()
			if !strings.Contains(p.log(), "raft_insecure: Raft peers that prove nothing are accepted") {
				t.Fatalf("start %d: no warning about raft_insecure\n%s", start, p.logTail(10))
			}
			p.stop()
		}
	})
}

// clusterSecret is the first secret of the test's shared raft_secret_file.
func clusterSecret(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(testcluster.RaftSecretFile(t))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return []byte(line)
}
