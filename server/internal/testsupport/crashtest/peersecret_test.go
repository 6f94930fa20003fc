package crashtest

// Raft peers prove the cluster secret (raft_secret_file) or a certificate
// bound to their node id and cluster before any Raft message, on loopback
// too. The intruder is a local process that knows the node ids, the
// addresses and the cluster ID, but not the secret.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/testcerts"
)

// newSecretFile writes a fresh cluster secret with ticketd new-raft-secret.
func newSecretFile(t *testing.T, file string, rotate bool) {
	t.Helper()
	args := []string{"new-raft-secret", file}
	if rotate {
		args = []string{"new-raft-secret", "--rotate", file}
	}
	if out, err := exec.Command(ticketdBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("ticketd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ticketd new-raft-secret wrote %s with %v, %v; want mode 0600", file, fi.Mode(), err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pushyPeer is a forgedPeer that ignores the handshake's answer: it says
// hello and sends its Raft RPC at once, as an intruder that hopes the
// server reads Raft messages before it has checked anything.
type pushyPeer struct{ forgedPeer }

func (f *pushyPeer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(f.hello(hsKindRaft)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// forgedRPCs sends, as f (through its stream layer), one AppendEntries at
// term+1 that would replace everything after the bootstrap entry, and one
// RequestVote with a log longer than anyone's. It returns their errors.
func forgedRPCs(stream raft.StreamLayer, target, leaderID string, term uint64) (appendErr, voteErr error) {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 1, Timeout: 5 * time.Second})
	defer trans.Close()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leaderID), Addr: []byte(target)}
	var ar raft.AppendEntriesResponse
	appendErr = trans.AppendEntries(raft.ServerID("x"), raft.ServerAddress(target), &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: term + 1, PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 2,
		Entries: []*raft.Log{{Index: 2, Term: term + 1, Type: raft.LogCommand, Data: []byte("forged")}},
	}, &ar)
	var vr raft.RequestVoteResponse
	voteErr = trans.RequestVote(raft.ServerID("x"), raft.ServerAddress(target), &raft.RequestVoteRequest{
		RPCHeader: hdr, Term: term + 2, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40, LeadershipTransfer: true,
	}, &vr)
	return appendErr, voteErr
}

// TestForgedPeerWithoutSecretRefused: a local process claims the leader's
// node id and sends each follower an AppendEntries at term+1 placed right
// after the bootstrap entry, and RequestVotes, without the secret (saying
// it proves none, in the handshake of older ticketd, with a wrong secret,
// and sending its RPC without waiting for the handshake's answer). Each is
// refused before Raft reads a message: no follower clears a log suffix or
// changes its term, grants continue, and after every server restarts the
// tokens keep rising and the grants are held.
func TestForgedPeerWithoutSecretRefused(t *testing.T) {
	c, id := threeNodes(t)
	li := c.leader()
	leader := c.procs[li]
	var last uint64
	for i := 0; i < 5; i++ {
		last = grantKey(t, c.addrs(), fmt.Sprintf("forged/%d", i), byte(i))
	}
	before := statusOf(t, leader)
	cluster := clusterBytes(t, id)
	intruders := []struct {
		name string
		f    forgedPeer
		want string
	}{
		{"no secret", forgedPeer{secret: nil}, "did not prove the cluster secret"},
		{"older handshake", forgedPeer{version: 2}, "cannot prove the cluster secret"},
		{"wrong secret", forgedPeer{secret: []byte("0123456789abcdef0123456789abcdef-wrong")}, "does not match the cluster secret"},
	}
	for round := 0; round < 3; round++ {
		for _, in := range intruders {
			for _, p := range c.procs {
				if p == leader {
					continue
				}
				f := in.f
				f.id, f.state, f.cluster = leader.id, hsSettled, cluster
				if _, _, reason, err := f.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil || !strings.Contains(reason, in.want) {
					t.Fatalf("%s: %s let in a peer claiming %s: %q %v; want a refusal saying %q", in.name, p.id, leader.id, reason, err, in.want)
				}
				f.closed = make(chan struct{})
				if aerr, verr := forgedRPCs(&f, p.raftAddr, leader.id, before.Term); aerr == nil || verr == nil {
					t.Fatalf("%s: %s answered forged RPCs: append %v, vote %v", in.name, p.id, aerr, verr)
				}
				pushy := &pushyPeer{f}
				pushy.closed = make(chan struct{})
				if aerr, verr := forgedRPCs(pushy, p.raftAddr, leader.id, before.Term); aerr == nil || verr == nil {
					t.Fatalf("%s: %s answered RPCs sent with the hello: append %v, vote %v", in.name, p.id, aerr, verr)
				}
			}
		}
		tok := grantKey(t, c.addrs(), fmt.Sprintf("forged/round%d", round), byte(10+round))
		if tok <= last {
			t.Fatalf("round %d: token %d, not above %d", round, tok, last)
		}
		last = tok
	}
	for _, p := range c.procs {
		if log := p.log(); strings.Contains(log, "clearing log suffix") {
			t.Fatalf("%s cleared a log suffix:\n%s", p.id, p.logTail(30))
		}
		if st := statusOf(t, p); st.Term != before.Term {
			t.Fatalf("%s moved from term %d to %d", p.id, before.Term, st.Term)
		}
	}
	if !strings.Contains(c.procs[(li+1)%3].log()+c.procs[(li+2)%3].log(), "did not prove the cluster secret") {
		t.Fatal("no follower logged the refused intruder")
	}
	// Every server restarts: nothing of the intruder's is in any log.
	for _, p := range c.procs {
		p.stop()
	}
	for _, p := range c.procs {
		p.start()
	}
	tok := grantKey(t, c.addrs(), "forged/after-restart", 20)
	if tok <= last {
		t.Fatalf("after the restart: token %d, not above %d", tok, last)
	}
	for i := 0; i < 5; i++ {
		if holder(t, c.addrs(), fmt.Sprintf("forged/%d", i)) == 0 {
			t.Fatalf("forged/%d lost its grant", i)
		}
	}
}

// TestWrongSecretRefused: a member restarted with another secret is
// refused by the others and refuses them, both sides saying so, while the
// two others keep granting; with the cluster's secret again it catches up.
func TestWrongSecretRefused(t *testing.T) {
	c, _ := threeNodes(t)
	li := c.leader()
	f := c.procs[(li+1)%3]
	others := []*proc{c.procs[li], c.procs[(li+2)%3]}
	f.stop()
	wrong := filepath.Join(t.TempDir(), "wrong-secret")
	newSecretFile(t, wrong, false)
	f.secret = wrong
	f.start()
	waitFor(t, startTimeout, "the others refuse "+f.id+" and it refuses them", func() bool {
		return strings.Contains(f.log(), "does not match the cluster secret") &&
			strings.Contains(others[0].log()+others[1].log(), "does not match the cluster secret")
	}, append(others, f)...)
	tok := grantKey(t, c.addrs(), "wrong-secret/0", 1)
	if st := statusOf(t, f); st.LastToken >= tok {
		t.Fatalf("%s with the wrong secret applied token %d", f.id, st.LastToken)
	}
	f.stop()
	f.secret = ""
	f.start()
	waitFor(t, startTimeout, f.id+" catches up with the cluster's secret", func() bool {
		st, err := adminStatus(f.client)
		return err == nil && st.LastToken >= tok
	}, f)
}

// TestSecretRotationKeepsServing: the cluster's secret is replaced as
// docs/deployment.md says, two rolling restarts: every server gets the new
// secret above the old one (ticketd new-raft-secret --rotate), then the
// new one alone. Grants continue after every restart, and the old secret
// is refused at the end.
func TestSecretRotationKeepsServing(t *testing.T) {
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	oldFile := filepath.Join(base, "old-secret")
	newSecretFile(t, oldFile, false)
	var ps []*proc
	for i := 1; i <= 3; i++ {
		p := newProc(t, fmt.Sprintf("n%d", i), base, "--config", cfgFile)
		p.secret = filepath.Join(base, p.id+".secret")
		copyFile(t, oldFile, p.secret)
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
		p.start()
	}
	c := &cluster{t: t, procs: ps}
	last := grantKey(t, c.addrs(), "rotate/start", 1)
	rotated := filepath.Join(base, "rotated-secret")
	copyFile(t, oldFile, rotated)
	newSecretFile(t, rotated, true)
	b, _ := os.ReadFile(rotated)
	lines := strings.Fields(string(b))
	old, _ := os.ReadFile(oldFile)
	if len(lines) != 2 || lines[1] != strings.TrimSpace(string(old)) {
		t.Fatalf("--rotate wrote %q; want the new secret above the old one", b)
	}
	newOnly := filepath.Join(base, "new-secret")
	if err := os.WriteFile(newOnly, []byte(lines[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	step := 0
	for _, file := range []string{rotated, newOnly} {
		li := c.leader()
		for _, i := range []int{(li + 1) % 3, (li + 2) % 3, li} {
			p := ps[i]
			p.stop()
			copyFile(t, file, p.secret)
			p.start()
			p.mustReady()
			step++
			tok := grantKey(t, c.addrs(), fmt.Sprintf("rotate/%d", step), byte(step))
			if tok <= last {
				t.Fatalf("after restarting %s with %s: token %d, not above %d", p.id, filepath.Base(file), tok, last)
			}
			last = tok
		}
	}
	cluster := clusterBytes(t, statusOf(t, ps[0]).ClusterID)
	for _, p := range ps {
		f := &forgedPeer{id: "n1", state: hsSettled, cluster: cluster, secret: []byte(strings.TrimSpace(string(old)))}
		if p.id == "n1" {
			f.id = "n2"
		}
		if _, _, reason, err := f.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil || !strings.Contains(reason, "does not match the cluster secret") {
			t.Fatalf("%s accepted the retired secret: %q %v", p.id, reason, err)
		}
	}
}

// TestSecretFileAccessibleToOthersRefused: ticketd refuses to start with a
// secret file that group or others may read, naming the file and the fix.
func TestSecretFileAccessibleToOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "raft-secret")
			newSecretFile(t, file, false)
			if err := os.Chmod(file, mode); err != nil {
				t.Fatal(err)
			}
			p := newProc(t, "n1", t.TempDir())
			p.secret = file
			p.start()
			waitExit(t, p)
			if want := "chmod 600 " + file; p.exitCode() == 0 || !strings.Contains(p.log(), want) {
				t.Fatalf("exit code %d; want a refusal saying %q\n%s", p.exitCode(), want, p.logTail(10))
			}
		})
	}
}

// TestLoneServerOpensNoRaftPort: a server without peer authentication
// runs alone: its Raft port is closed, and members add is refused with
// what to configure. With a secret, the same server listens.
func TestLoneServerOpensNoRaftPort(t *testing.T) {
	p := newProc(t, "n1", t.TempDir())
	p.noSecret = true
	p.start()
	p.mustReady()
	grantKey(t, []string{p.client}, "alone", 1)
	if c, err := net.DialTimeout("tcp", p.raftAddr, time.Second); err == nil {
		c.Close()
		t.Fatalf("a lone server without peer authentication listens on its Raft address %s", p.raftAddr)
	}
	if !strings.Contains(p.log(), "opens no Raft listener") {
		t.Fatalf("the lone server did not say it opens no Raft listener\n%s", p.logTail(10))
	}
	code, _, errs := ctl(t, "--addr", p.client, "members", "add", "n2", freePort(t))
	if code == 0 || !strings.Contains(errs, "raft_secret_file") {
		t.Fatalf("members add on a lone server: exit %d %s; want a refusal naming raft_secret_file", code, errs)
	}
	p.stop()
	p.noSecret = false
	p.start()
	p.mustReady()
	c, err := net.DialTimeout("tcp", p.raftAddr, time.Second)
	if err != nil {
		t.Fatalf("with a cluster secret the server does not listen on %s: %v", p.raftAddr, err)
	}
	c.Close()
	if holder(t, []string{p.client}, "alone") == 0 {
		t.Fatal("the grant was lost across the restart")
	}
}

// TestRaftTLSClusterNameRefusesOtherCluster: two clusters share a CA; with
// cluster_name each server's certificate carries
// ticketing://NAME/node/ID. The certificate of n2 of cluster alpha cannot
// claim n2 in cluster beta (nor can a certificate naming n2 only in its
// CN): refused with a log line naming the cluster, while beta grants on.
func TestRaftTLSClusterNameRefusesOtherCluster(t *testing.T) {
	ca := testcerts.New(t)
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig+"cluster_name = \"beta\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		cert, key := ca.IssueRaft(t, "beta", id)
		p := newProc(t, id, base, "--config", cfgFile, "--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", ca.CAFile)
		p.noSecret = true // authenticated by raft_tls alone
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.extra = append(p.extra, "--bootstrap", peers(ps...))
		p.start()
	}
	c := &cluster{t: t, procs: ps}
	leader := ps[c.leader()]
	last := grantKey(t, c.addrs(), "beta/0", 1)
	before := statusOf(t, leader)

	alphaCert, alphaKey := ca.IssueRaft(t, "alpha", "n2")
	plainCert, plainKey := ca.Issue(t, "n2") // CN only, no cluster
	for _, cert := range []struct{ name, certFile, keyFile string }{{"alpha's n2", alphaCert, alphaKey}, {"CN n2 only", plainCert, plainKey}} {
		pair, err := tls.LoadX509KeyPair(cert.certFile, cert.keyFile)
		if err != nil {
			t.Fatal(err)
		}
		conf := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		for _, p := range ps {
			if p.id == "n2" {
				continue
			}
			f := &forgedPeer{id: "n2", state: hsSettled, cluster: clusterBytes(t, before.ClusterID), tls: conf}
			if _, _, reason, err := f.exchange(p.raftAddr, hsKindRaft, 5*time.Second); err == nil || !strings.Contains(reason, `of cluster "beta"`) {
				t.Fatalf("%s: %s let it claim n2: %q %v", cert.name, p.id, reason, err)
			}
			f.closed = make(chan struct{})
			if _, err := f.requestVote(p.raftAddr, before.Term+100); err == nil {
				t.Fatalf("%s: %s answered a RequestVote", cert.name, p.id)
			}
		}
	}
	logs := ps[0].log() + ps[2].log()
	if !strings.Contains(logs, "ticketing://alpha/node/n2") || !strings.Contains(logs, "ticketing://beta/node/n2") {
		t.Fatalf("no server logged the certificate of another cluster with what it names and what it must name")
	}
	after := statusOf(t, leader)
	if after.Term != before.Term || after.Role != "leader" {
		t.Fatalf("the intruder disturbed the leader: term %d → %d, role %s", before.Term, after.Term, after.Role)
	}
	if tok := grantKey(t, c.addrs(), "beta/1", 2); tok <= last {
		t.Fatalf("token %d, not above %d", tok, last)
	}
}

// TestSquatterOnMemberAddressRefused: while a follower is down, a local
// process listens on its Raft address without the secret. The leader's
// dials reach it; whether it accepts at once or sends a challenge with a
// made-up proof, the leader refuses it, saying so, and sends it neither
// its own proof nor any Raft message: both directions prove.
func TestSquatterOnMemberAddressRefused(t *testing.T) {
	c, id := threeNodes(t)
	li := c.leader()
	leader, f := c.procs[li], c.procs[(li+1)%3]
	cluster := clusterBytes(t, id)
	f.stop()
	for _, tc := range []struct {
		name      string
		challenge bool
		want      string
	}{
		{"accepts without a challenge", false, "accepted the connection without proving the cluster secret"},
		{"challenges with a made-up proof", true, "did not prove the cluster secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", f.raftAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			leaked := make(chan int, 16)
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					go squat(conn, f.id, cluster, tc.challenge, leaked)
				}
			}()
			waitFor(t, startTimeout, "the leader refuses the squatter", func() bool { return strings.Contains(leader.log(), tc.want) }, leader)
			ln.Close()
			for {
				select {
				case n := <-leaked:
					if n > 0 {
						t.Fatalf("the leader sent the squatter %d bytes after the handshake", n)
					}
					continue
				default:
				}
				break
			}
		})
	}
	f.start()
	grantKey(t, c.addrs(), "squatter/after", 1)
}

// squat answers one connection as the member id would without the secret:
// it reads the version 3 hello, accepts at once or challenges with a proof
// of nothing, then reports how many bytes the dialer sent after that.
func squat(conn net.Conn, id string, cluster [16]byte, challenge bool, leaked chan<- int) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, 24)
	if _, err := io.ReadFull(conn, head); err != nil || head[4] != 3 {
		return
	}
	if _, err := io.ReadFull(conn, make([]byte, int(head[23])+8+1+32)); err != nil {
		return
	}
	var answer []byte
	if challenge {
		answer = append([]byte("TKRC"), 3, 2, byte(len(id)))
		answer = append(answer, id...)
		answer = append(answer, make([]byte, 32)...) // nonce
		answer = append(answer, 1)
		answer = append(answer, make([]byte, 32)...) // a proof of nothing
	} else {
		answer = append([]byte("TKRC"), 3, 0)
		answer = append(answer, cluster[:]...)
		answer = append(answer, hsSettled, byte(len(id)))
		answer = append(answer, id...)
		answer = append(answer, make([]byte, 8+2)...) // incarnation, empty reason
	}
	if _, err := conn.Write(answer); err != nil {
		return
	}
	n, _ := io.Copy(io.Discard, conn)
	leaked <- int(n)
}

// TestLoneServerWithMovedPortsServes: a server started only with its ports
// moved (--listen, --raft-listen, --http-listen) and no peer
// authentication is a server of its own, as with no flags at all: it
// serves, where it used to wait to be added to a cluster (and was refused
// for having no peer authentication).
func TestLoneServerWithMovedPortsServes(t *testing.T) {
	p := newProc(t, "n1", t.TempDir())
	p.noSecret, p.asIs = true, true
	p.start()
	p.mustReady()
	grantKey(t, []string{p.client}, "moved", 1)
}
