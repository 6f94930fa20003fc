package node

import (
	"bytes"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// FuzzReadHandshake: the Raft handshake decoder never panics, and what
// appendHello and appendReply write (version 4 with the admission index
// and the release, version 3 with the nonce, version 2 with the
// incarnation, and version 1 as older servers write it) reads back the
// same.
func FuzzReadHandshake(f *testing.F) {
	me := peerInfo{ID: "n1", Cluster: fsm.ClusterID{1, 2, 3}, State: stateSettled, Incarnation: 0x0123456789abcdef, Admitted: 0x2a, Release: "v1.4.0", Auth: authSecret, Nonce: [nonceSize]byte{9, 8, 7}}
	v3 := me
	v3.Version, v3.Admitted, v3.Release = handshakeVersionV3, 0, ""
	v2 := v3
	v2.Version, v2.Auth, v2.Nonce = handshakeVersionV2, 0, [nonceSize]byte{}
	old := v2
	old.Version, old.Incarnation = handshakeVersionV1, 0
	f.Add(appendHello(nil, kindRaft, me), false)
	f.Add(appendHello(nil, kindRaft, v3), false)
	f.Add(appendHello(nil, kindRaft, v2), false)
	f.Add(appendHello(nil, kindRaft, old), false)
	f.Add(appendHello(nil, kindProbe, peerInfo{ID: "n2"}), false)
	f.Add(appendReply(nil, true, me, "refused: another cluster"), true)
	f.Add(appendReply(nil, true, v3, "refused: another cluster"), true)
	f.Add(appendReply(nil, false, v3, ""), true)
	f.Add(appendReply(nil, true, v2, "refused: another cluster"), true)
	f.Add(appendReply(nil, true, old, "refused: another cluster"), true)
	f.Add(appendReply(nil, false, peerInfo{}, ""), true)
	f.Add([]byte("TKRC\x02"), false)
	f.Add([]byte("TKRC\x05"), false)
	f.Fuzz(func(t *testing.T, data []byte, reply bool) {
		p, second, reason, err := readHandshake(bytes.NewReader(data), reply)
		if err != nil {
			return
		}
		if p.Version < handshakeVersionV1 || p.Version > handshakeVersion {
			t.Fatalf("read a handshake of version %d", p.Version)
		}
		if p.Version == handshakeVersionV1 && p.Incarnation != 0 {
			t.Fatalf("a version 1 handshake has incarnation %x", p.Incarnation)
		}
		if p.Version < 4 && p.Admitted != 0 {
			t.Fatalf("a version %d handshake has admission index %d", p.Version, p.Admitted)
		}
		if p.Version < 4 && p.Release != "" {
			t.Fatalf("a version %d handshake has release %q", p.Version, p.Release)
		}
		if (reply || p.Version < 3) && (p.Auth != authNone || p.Nonce != [nonceSize]byte{}) {
			t.Fatalf("a version %d %s has auth %d and a nonce", p.Version, map[bool]string{true: "reply", false: "hello"}[reply], p.Auth)
		}
		if p.Auth > authSecret {
			t.Fatalf("read auth %d", p.Auth)
		}
		var again []byte
		if reply {
			again = appendReply(nil, second != 0, p, reason)
		} else {
			again = appendHello(nil, second, p)
		}
		if second <= 1 && !bytes.HasPrefix(data, again) {
			t.Fatalf("round trip differs: %x, re-encoded %x", data, again)
		}
	})
}

// FuzzReadAnswer: the decoder of the acceptor's first answer (a reply, or
// the challenge of the cluster secret) and of the dialer's proof never
// panics, reads at most MaxRaftSecrets proofs, and a challenge reads back
// the same.
func FuzzReadAnswer(f *testing.F) {
	me := peerInfo{ID: "n1", Cluster: fsm.ClusterID{1, 2, 3}, State: stateSettled, Incarnation: 7}
	head := appendChallengeHead(nil, handshakeVersion, "n2", [nonceSize]byte{1, 2, 3})
	one := [][proofSize]byte{{4, 5, 6}}
	two := [][proofSize]byte{{4, 5, 6}, {7, 8, 9}}
	f.Add(appendProofs(append([]byte(nil), head...), one))
	f.Add(appendProofs(append([]byte(nil), head...), two))
	f.Add(appendProofs(append([]byte(nil), head...), [][proofSize]byte{{}, {}, {}}))
	f.Add(appendReply(nil, false, me, ""))
	f.Add(appendReply(nil, true, peerInfo{Version: 2}, "the peer did not prove the cluster secret"))
	f.Add(appendProofs(nil, one))
	f.Add([]byte("TKRC\x03\x02\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if proofs, err := readProofs(bytes.NewReader(data)); err == nil {
			if len(proofs) < 1 || len(proofs) > MaxRaftSecrets {
				t.Fatalf("read %d proofs", len(proofs))
			}
			if again := appendProofs(nil, proofs); !bytes.HasPrefix(data, again) {
				t.Fatalf("proofs differ: %x, re-encoded %x", data, again)
			}
		}
		p, verdict, _, ch, err := readAnswer(bytes.NewReader(data))
		if err != nil {
			return
		}
		if ch == nil {
			if verdict == verdictChallenge && p.Version >= 3 {
				t.Fatalf("a version %d challenge read as a reply", p.Version)
			}
			return
		}
		if len(ch.Proofs) < 1 || len(ch.Proofs) > MaxRaftSecrets || ch.ID != p.ID {
			t.Fatalf("challenge %+v, peer %+v", ch, p)
		}
		again := appendProofs(appendChallengeHead(nil, p.Version, ch.ID, ch.Nonce), ch.Proofs)
		if !bytes.HasPrefix(data, again) || !bytes.HasPrefix(again, ch.head) {
			t.Fatalf("challenge differs: %x, re-encoded %x", data, again)
		}
	})
}
