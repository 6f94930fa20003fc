package node

import (
	"bytes"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// FuzzReadHandshake: the Raft handshake decoder never panics, and what
// appendHello and appendReply write (version 2 with the incarnation, and
// version 1 as older servers write it) reads back the same.
func FuzzReadHandshake(f *testing.F) {
	me := peerInfo{ID: "n1", Cluster: fsm.ClusterID{1, 2, 3}, State: stateSettled, Incarnation: 0x0123456789abcdef}
	old := me
	old.Version, old.Incarnation = handshakeVersionV1, 0
	f.Add(appendHello(nil, kindRaft, me), false)
	f.Add(appendHello(nil, kindRaft, old), false)
	f.Add(appendHello(nil, kindProbe, peerInfo{ID: "n2"}), false)
	f.Add(appendReply(nil, true, me, "refused: another cluster"), true)
	f.Add(appendReply(nil, true, old, "refused: another cluster"), true)
	f.Add(appendReply(nil, false, peerInfo{}, ""), true)
	f.Add([]byte("TKRC\x02"), false)
	f.Add([]byte("TKRC\x03"), false)
	f.Fuzz(func(t *testing.T, data []byte, reply bool) {
		p, second, reason, err := readHandshake(bytes.NewReader(data), reply)
		if err != nil {
			return
		}
		if p.Version != handshakeVersionV1 && p.Version != handshakeVersion {
			t.Fatalf("read a handshake of version %d", p.Version)
		}
		if p.Version == handshakeVersionV1 && p.Incarnation != 0 {
			t.Fatalf("a version 1 handshake has incarnation %x", p.Incarnation)
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
