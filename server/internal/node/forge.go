package node

import (
	"crypto/rand"
	"io"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// What a peer without the cluster secret can send, for harnesses that play
// one against real servers (the nemesis's forged peers): the frames are
// written by the same code as a server's own, so the harness forges
// exactly the protocol the servers speak.

// ForgeHello is the hello of a dialer claiming to be id, a settled member
// of cluster with incarnation, in handshake version (1 to 4). claimSecret
// announces a proof of the cluster secret (version 3 on), which the forger
// cannot make.
func ForgeHello(id string, cluster fsm.ClusterID, incarnation uint64, version byte, claimSecret bool) []byte {
	p := peerInfo{ID: id, Cluster: cluster, State: stateSettled, Incarnation: incarnation, Version: version}
	if claimSecret {
		p.Auth = authSecret
		p.Nonce = newNonce()
	}
	return appendHello(nil, kindRaft, p)
}

// ForgeProofs is a proof frame of n random proofs (n may be out of range).
func ForgeProofs(n byte) []byte {
	b := make([]byte, 1+int(n)*proofSize)
	_, _ = rand.Read(b[1:]) // crypto/rand does not fail; any bytes make a wrong proof
	b[0] = n
	return b
}

// ReadForgedAnswer reads an acceptor's answer to a forged hello: a
// challenge (challenged), or a reply that accepted or refused the
// connection.
func ReadForgedAnswer(r io.Reader) (challenged, accepted bool, reason string, err error) {
	_, verdict, reason, ch, err := readAnswer(r)
	if err != nil {
		return false, false, "", err
	}
	return ch != nil, ch == nil && verdict == 0, reason, nil
}
