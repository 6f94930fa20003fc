package node

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPeerProofs: a proof holds for one role, one hello and one challenge;
// a verifier accepts a proof under any secret it holds (a rotation), and
// nothing under a secret it does not hold.
func TestPeerProofs(t *testing.T) {
	oldS, newS, other := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32)), []byte(strings.Repeat("x", 32))
	hello := appendHello(nil, kindRaft, peerInfo{ID: "n1", Auth: authSecret, Nonce: newNonce()})
	head := appendChallengeHead(nil, handshakeVersion, "n2", newNonce())
	rotating := peerAuth{secrets: [][]byte{newS, oldS}}
	old := peerAuth{secrets: [][]byte{oldS}}
	if !rotating.verify(old.proofs(roleDialer, hello, head), roleDialer, hello, head) ||
		!old.verify(rotating.proofs(roleDialer, hello, head), roleDialer, hello, head) {
		t.Fatal("a server holding the new and the old secret and one holding the old one refuse each other")
	}
	stranger := peerAuth{secrets: [][]byte{other}}
	for name, proofs := range map[string][][proofSize]byte{
		"another secret":    stranger.proofs(roleDialer, hello, head),
		"the other role":    old.proofs(roleAcceptor, hello, head),
		"another challenge": old.proofs(roleDialer, hello, appendChallengeHead(nil, handshakeVersion, "n2", newNonce())),
		"another hello":     old.proofs(roleDialer, appendHello(nil, kindRaft, peerInfo{ID: "n3", Auth: authSecret}), head),
	} {
		if rotating.verify(proofs, roleDialer, hello, head) {
			t.Errorf("a proof made for %s was accepted", name)
		}
	}
}

// TestHandshakeProvesBothWays: over a real connection, a dialer and an
// acceptor with the same secret accept each other; with different secrets
// the dialer refuses the acceptor's proof and never sends its own; a
// dialer without a secret is refused by the acceptor.
func TestHandshakeProvesBothWays(t *testing.T) {
	s1, s2 := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	for _, tc := range []struct {
		name             string
		dialer, acceptor peerAuth
		want             string // the acceptor's refusal; "" to accept
		dialerWant       string // the dialer's refusal
		dialerVersion    byte   // the dialer's handshake version (0: the current one)
	}{
		{"same secret", peerAuth{secrets: [][]byte{s1}}, peerAuth{secrets: [][]byte{s1}}, "", "", 0},
		{"rotating", peerAuth{secrets: [][]byte{s2, s1}}, peerAuth{secrets: [][]byte{s1}}, "", "", 0},
		{"wrong secret", peerAuth{secrets: [][]byte{s2}}, peerAuth{secrets: [][]byte{s1}}, "did not answer the challenge", "does not match", 0},
		{"no secret", peerAuth{}, peerAuth{secrets: [][]byte{s1}}, "did not prove", "", 0},
		{"no secret, insecure", peerAuth{}, peerAuth{secrets: [][]byte{s1}, insecure: true}, "", "", 0},
		{"acceptor without a secret", peerAuth{secrets: [][]byte{s1}}, peerAuth{insecure: true}, "", "without proving the cluster secret", 0},
		// An older ticketd during a rolling upgrade: challenged in its version.
		{"version 3 dialer", peerAuth{secrets: [][]byte{s1}}, peerAuth{secrets: [][]byte{s1}}, "", "", handshakeVersionV3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, a := net.Pipe()
			defer d.Close()
			d.SetDeadline(time.Now().Add(5 * time.Second))
			a.SetDeadline(time.Now().Add(5 * time.Second))
			refusal := make(chan string, 1)
			go func() {
				defer a.Close()
				var hello bytes.Buffer
				p, _, _, err := readHandshake(io.TeeReader(a, &hello), false)
				if err != nil {
					refusal <- err.Error()
					return
				}
				why := tc.acceptor.accept(a, "n2", p, hello.Bytes())
				a.Write(appendReply(nil, why != "", peerInfo{ID: "n2", Version: p.Version}, why))
				refusal <- why
			}()
			me := peerInfo{ID: "n1", Auth: tc.dialer.auth(), Nonce: newNonce(), Version: tc.dialerVersion}
			hello := appendHello(nil, kindRaft, me)
			if _, err := d.Write(hello); err != nil {
				t.Fatal(err)
			}
			p, verdict, reason, ch, err := readAnswer(d)
			if ch != nil && tc.dialerVersion != 0 && ch.head[4] != tc.dialerVersion {
				t.Fatalf("a version %d hello was challenged in version %d, which that dialer cannot read", tc.dialerVersion, ch.head[4])
			}
			if err == nil {
				p, verdict, reason, err = tc.dialer.dialed(d, hello, p, verdict, reason, ch)
			}
			if err != nil {
				d.Close()
			}
			got := <-refusal
			if tc.dialerWant != "" {
				if err == nil || !strings.Contains(err.Error(), tc.dialerWant) {
					t.Fatalf("dialer: %v; want a refusal saying %q", err, tc.dialerWant)
				}
				if tc.want != "" && !strings.Contains(got, tc.want) {
					t.Fatalf("acceptor's refusal %q; want it to say %q", got, tc.want)
				}
				return
			}
			if tc.want == "" {
				if got != "" || err != nil || verdict != 0 || p.ID != "n2" {
					t.Fatalf("refused: acceptor %q, dialer %v, verdict %d %q", got, err, verdict, reason)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("acceptor's refusal %q; want it to say %q", got, tc.want)
			}
			if err == nil && verdict == 0 {
				t.Fatal("the dialer took a refused connection")
			}
		})
	}
}
