package node

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// TestForgedHelloIsAServersHello: what the harness forges reads back as the
// identity it claims, in every handshake version.
func TestForgedHelloIsAServersHello(t *testing.T) {
	cluster := fsm.ClusterID{1, 2, 3}
	for v := byte(handshakeVersionV1); v <= handshakeVersion; v++ {
		p, kind, _, err := readHandshake(bytes.NewReader(ForgeHello("n2", cluster, 7, v, v >= 3)), false)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		wantInc := uint64(7)
		if v < 2 {
			wantInc = 0
		}
		if kind != kindRaft || p.ID != "n2" || p.Cluster != cluster || p.State != stateSettled || p.Version != v || p.Incarnation != wantInc || (v >= 3) != (p.Auth == authSecret) {
			t.Errorf("version %d: read back %+v (kind %d)", v, p, kind)
		}
	}
}

// TestForgedProofIsRefused: an acceptor with the secret challenges a
// forged hello that announces a proof, and refuses the random proof, or an
// out-of-range count of them, that follows.
func TestForgedProofIsRefused(t *testing.T) {
	auth := peerAuth{secrets: [][]byte{[]byte(strings.Repeat("s", 32))}}
	for n, want := range map[byte]string{1: wrongSecret, 9: "9 proofs"} {
		hello := ForgeHello("n2", fsm.ClusterID{1}, 0, 3, true)
		p, _, _, err := readHandshake(bytes.NewReader(hello), false)
		if err != nil {
			t.Fatal(err)
		}
		acceptor, forger := net.Pipe()
		reason := make(chan string, 1)
		go func() {
			reason <- auth.accept(acceptor, "n1", p, hello)
			acceptor.Close()
		}()
		challenged, accepted, _, err := ReadForgedAnswer(forger)
		if err != nil || !challenged || accepted {
			t.Fatalf("%d proofs: the acceptor's first answer: challenged %v, accepted %v, %v", n, challenged, accepted, err)
		}
		// The acceptor may hang up before reading it all (9 proofs).
		_, _ = forger.Write(ForgeProofs(n))
		if got := <-reason; !strings.Contains(got, want) {
			t.Errorf("%d forged proofs: the acceptor said %q, want %q", n, got, want)
		}
		forger.Close()
	}
}
