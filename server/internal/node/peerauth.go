package node

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Peer authentication with a cluster secret.
//
// Every server of a cluster holds the same secret (raft_secret_file; two
// while it is being replaced). Before any Raft message, both ends of a
// connection prove that they hold it, without sending it: each sends a
// fresh random nonce, and each answers with an HMAC-SHA256, keyed by the
// secret, over both nonces and both identities (the dialer's whole hello
// and the acceptor's challenge), labelled with its role so that one side's
// proof is never the other's. A proof is made with every secret the
// prover holds, and accepted when it matches any secret the verifier
// holds: during a rotation, servers with the new and the previous secret
// and servers with only the previous one still accept each other.
//
// The secret authenticates who connects, not the bytes that follow: it
// does not encrypt or protect Raft traffic against someone who can read or
// change it on the way (raft_tls does).

const (
	authNone   = 0 // the hello's sender proves no secret
	authSecret = 1 // the hello's sender proves the cluster secret

	// verdictChallenge: the acceptor's first answer is a challenge (the
	// verdicts of a reply are 0, accepted, and 1, refused).
	verdictChallenge = 2

	nonceSize = 32
	proofSize = sha256.Size
	// MaxRaftSecrets is how many secrets a server holds at once: the
	// current one and, while it is being replaced, the previous one.
	MaxRaftSecrets = 2

	roleAcceptor = "acceptor"
	roleDialer   = "dialer"
)

// ErrNoRaftListener: a server without Raft peer authentication runs alone
// and has no Raft connections at all.
var ErrNoRaftListener = errors.New("this server runs alone: no Raft peer authentication is configured, so it has no Raft listener and no peers")

// peerAuth is what this server requires of, and proves to, its peers.
type peerAuth struct {
	secrets [][]byte
	// insecure (raft_insecure) accepts peers that prove nothing; a server
	// that holds a secret still proves it to peers that ask.
	insecure bool
}

// fallBack reports whether a hello in a version older than 3 (which cannot
// prove a secret) may be tried.
func (a peerAuth) fallBack() bool { return len(a.secrets) == 0 || a.insecure }

func (a peerAuth) auth() byte {
	if len(a.secrets) > 0 {
		return authSecret
	}
	return authNone
}

// proofs returns the proof of role with every secret held.
func (a peerAuth) proofs(role string, hello, challengeHead []byte) [][proofSize]byte {
	out := make([][proofSize]byte, len(a.secrets))
	for i, s := range a.secrets {
		out[i] = peerProof(s, role, hello, challengeHead)
	}
	return out
}

// verify reports whether one of proofs is role's proof under a secret held.
func (a peerAuth) verify(proofs [][proofSize]byte, role string, hello, challengeHead []byte) bool {
	ok := false
	for _, s := range a.secrets {
		want := peerProof(s, role, hello, challengeHead)
		for _, p := range proofs {
			if hmac.Equal(p[:], want[:]) {
				ok = true // no early return: the time taken says nothing about which matched
			}
		}
	}
	return ok
}

// peerProof is HMAC-SHA256 keyed by secret over the role, the dialer's hello
// (its identity and nonce) and the acceptor's challenge head (its identity
// and nonce).
func peerProof(secret []byte, role string, hello, challengeHead []byte) [proofSize]byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ticketing raft peer proof\x00"))
	h.Write([]byte(role))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hello))))
	h.Write(hello)
	h.Write(challengeHead)
	var out [proofSize]byte
	h.Sum(out[:0])
	return out
}

func newNonce() [nonceSize]byte {
	var n [nonceSize]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic(fmt.Sprintf("ticketd: no randomness for a Raft handshake nonce: %v", err))
	}
	return n
}

// appendChallengeHead writes the challenge up to its proofs: what the
// proofs cover of it.
func appendChallengeHead(b []byte, id string, nonce [nonceSize]byte) []byte {
	b = append(b, handshakeMagic[:]...)
	// Version 3 whatever the hello's: the challenge's form did not change,
	// and a version 3 dialer reads it.
	b = append(b, handshakeVersionV3, verdictChallenge, byte(len(id)))
	b = append(b, id...)
	return append(b, nonce[:]...)
}

// appendProofs writes n:u8 and the proofs (a challenge's tail, or the
// dialer's proof frame).
func appendProofs(b []byte, proofs [][proofSize]byte) []byte {
	b = append(b, byte(len(proofs)))
	for _, p := range proofs {
		b = append(b, p[:]...)
	}
	return b
}

// readProofs reads n:u8 and n proofs, 1 ≤ n ≤ MaxRaftSecrets.
func readProofs(r io.Reader) ([][proofSize]byte, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("read the secret's proof: %w", err)
	}
	if n[0] < 1 || n[0] > MaxRaftSecrets {
		return nil, fmt.Errorf("the peer sent %d proofs of the cluster secret, want 1 to %d", n[0], MaxRaftSecrets)
	}
	out := make([][proofSize]byte, n[0])
	for i := range out {
		if _, err := io.ReadFull(r, out[i][:]); err != nil {
			return nil, fmt.Errorf("read the secret's proof: %w", err)
		}
	}
	return out, nil
}

// challenge is the acceptor's first answer to a hello with auth 1.
type challenge struct {
	ID     string
	Nonce  [nonceSize]byte
	head   []byte // the bytes the proofs cover (appendChallengeHead)
	Proofs [][proofSize]byte
}

// readChallengeBody reads a challenge after its magic, version and verdict.
func readChallengeBody(r io.Reader) (challenge, error) {
	var ch challenge
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return ch, fmt.Errorf("read the challenge: %w", err)
	}
	rest := make([]byte, int(n[0])+nonceSize)
	if _, err := io.ReadFull(r, rest); err != nil {
		return ch, fmt.Errorf("read the challenge: %w", err)
	}
	ch.ID = string(rest[:n[0]])
	copy(ch.Nonce[:], rest[n[0]:])
	ch.head = appendChallengeHead(nil, ch.ID, ch.Nonce)
	var err error
	ch.Proofs, err = readProofs(r)
	return ch, err
}

// readAnswer reads the acceptor's first answer to a hello: a reply, or (a
// version 3 hello with auth 1) a challenge.
func readAnswer(r io.Reader) (p peerInfo, verdict byte, reason string, ch *challenge, err error) {
	version, verdict, err := readHead(r)
	if err != nil {
		return p, 0, "", nil, err
	}
	if version >= 3 && verdict == verdictChallenge {
		c, err := readChallengeBody(r)
		if err != nil {
			return p, 0, "", nil, err
		}
		return peerInfo{ID: c.ID, Version: version}, verdict, "", &c, nil
	}
	p, reason, err = readBody(r, version, true)
	return p, verdict, reason, nil, err
}

// accept runs the acceptor's side of peer authentication on c, after the
// hello (p, whose bytes are hello) was read. It returns "" when the peer
// may go on to the identity check, else why not.
func (a peerAuth) accept(c net.Conn, myID string, p peerInfo, hello []byte) string {
	if len(a.secrets) == 0 {
		if p.Auth == authSecret && !a.insecure {
			return "the peer proves a cluster secret (raft_secret_file) and this server has none: give every server the same raft_secret_file"
		}
		return ""
	}
	if p.Auth != authSecret {
		if a.insecure {
			return ""
		}
		if p.Version < 3 {
			return fmt.Sprintf("the peer speaks Raft handshake version %d, which cannot prove the cluster secret: upgrade it to this ticketd version, with the cluster's raft_secret_file", p.Version)
		}
		return "the peer did not prove the cluster secret: it has no raft_secret_file; give every server the same one (ticketd new-raft-secret FILE makes one)"
	}
	head := appendChallengeHead(nil, myID, newNonce())
	if _, err := c.Write(appendProofs(head, a.proofs(roleAcceptor, hello, head))); err != nil {
		return "writing the challenge failed: " + err.Error()
	}
	proofs, err := readProofs(c)
	if err != nil {
		return "the peer did not answer the challenge of the cluster secret: " + err.Error()
	}
	if !a.verify(proofs, roleDialer, hello, head) {
		return wrongSecret
	}
	return ""
}

// wrongSecret is the refusal of a proof made with another secret.
const wrongSecret = "the peer's proof does not match the cluster secret: its raft_secret_file holds another secret " +
	"(while a secret is replaced, each server's file holds the new one and the previous one; see docs/deployment.md)"

// dialed runs the dialer's side of peer authentication after the
// acceptor's first answer (ch, nil when it replied at once) to hello. It
// returns the acceptor's reply, or why the connection must not be used.
func (a peerAuth) dialed(c net.Conn, hello []byte, p peerInfo, verdict byte, reason string, ch *challenge) (peerInfo, byte, string, error) {
	if ch == nil {
		if verdict == 0 && len(a.secrets) > 0 && !a.insecure {
			return p, 0, "", fmt.Errorf("%w: %s accepted the connection without proving the cluster secret: it has no raft_secret_file (or runs an older ticketd); give every server the same one", ErrRefused, p.ID)
		}
		return p, verdict, reason, nil
	}
	if len(a.secrets) == 0 {
		return p, 0, "", fmt.Errorf("%w: %s asks for a proof of the cluster secret and this server has no raft_secret_file: give every server the same one", ErrRefused, ch.ID)
	}
	if !a.verify(ch.Proofs, roleAcceptor, hello, ch.head) {
		return p, 0, "", fmt.Errorf("%w: the server claiming to be %s did not prove the cluster secret: %s", ErrRefused, ch.ID, wrongSecret)
	}
	if _, err := c.Write(appendProofs(nil, a.proofs(roleDialer, hello, ch.head))); err != nil {
		return p, 0, "", err
	}
	p, verdict, reason, err := readHandshake(c, true)
	if err != nil {
		return p, 0, "", err
	}
	if verdict == 0 && p.ID != ch.ID {
		return p, 0, "", fmt.Errorf("%w: the server proved the cluster secret as %s but replied as %s", ErrRefused, ch.ID, p.ID)
	}
	return p, verdict, reason, nil
}

// checkAlone refuses to run a data directory whose Raft configuration lists
// other servers without a Raft listener: this server could never reach
// them, and they could never reach it.
func (n *Node) checkAlone() error {
	if !n.cfg.NoRaftListener {
		return nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("read the Raft configuration: %w", err)
	}
	var others []string
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != n.cfg.ID {
			others = append(others, string(s.ID))
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("%w: the data directory %s belongs to a cluster with %v as well; give every server the same raft_secret_file "+
			"(ticketd new-raft-secret FILE makes one; chmod 600) or [raft_tls]", ErrNoRaftListener, n.cfg.Dir, others)
	}
	return nil
}

// checkMayGrow refuses to add a member to a server that runs alone.
func (n *Node) checkMayGrow() error {
	if n.cfg.NoRaftListener {
		return fmt.Errorf("%w: %w. To grow it, give it and every new server the same raft_secret_file "+
			"(ticketd new-raft-secret FILE makes one; chmod 600) or [raft_tls], and restart it", ErrJoinRefused, ErrNoRaftListener)
	}
	return nil
}
