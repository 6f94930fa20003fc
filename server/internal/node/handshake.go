package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// ErrRefused reports a Raft handshake that the other end refused.
var ErrRefused = errors.New("raft connection refused")

// Handshake frames. The dialer sends a hello, the acceptor a reply; both
// then run the check below and close the connection when it fails. Raft's
// own bytes follow only on an accepted connection.
//
//	hello:     "TKRC" ver:u8 kind:u8 cluster:[16] state:u8 id:str8 [incarnation:u64] [admitted:u64 release:str8] [auth:u8 nonce:[32]]
//	reply:     "TKRC" ver:u8 verdict:u8 cluster:[16] state:u8 id:str8 [incarnation:u64] [admitted:u64 release:str8] reason:str16
//	challenge: "TKRC" ver:u8 2 id:str8 nonce:[32] n:u8 proof:[32]*n   (acceptor, when the hello has auth 1)
//	proof:     n:u8 proof:[32]*n                                        (dialer, answering the challenge)
//
// Version 2 adds the incarnation; version 1 (older ticketd) is read with
// incarnation 0 (unknown). Version 3 adds the cluster secret's
// challenge-response (peerauth.go): a hello with auth 1 is answered with a
// challenge instead of a reply, the dialer sends its proof, and only then
// the acceptor runs its checks and replies. Version 4 adds the log index of
// the sender's own admission (peerInfo.Admitted) and its release (ticketd's
// version, which the console's cluster page shows for each member); older
// versions are read with 0 and "" (unknown). The acceptor answers in the
// version of the hello, so an older dialer reads the answer. An older
// acceptor refuses a newer hello by closing the connection unanswered; the
// dialer then says hello once more in the older versions (see hello),
// unless it requires the cluster secret, which versions before 3 cannot
// prove.
var handshakeMagic = [4]byte{'T', 'K', 'R', 'C'}

const (
	handshakeVersion   = 4
	handshakeVersionV3 = 3
	handshakeVersionV2 = 2
	handshakeVersionV1 = 1
	kindRaft           = 1 // a Raft connection
	kindProbe          = 2 // members add asks who is there; no Raft traffic follows

	stateEmpty       = 0
	stateProvisional = 1
	stateSettled     = 2

	handshakeTimeout = 5 * time.Second

	// maxTracked bounds what a server keeps about the peers it met (the
	// refusals it logged, the peers seen while it has no cluster ID):
	// anyone who reaches the Raft port can make up node ids.
	maxTracked = 256
)

func stateName(s byte) string {
	switch s {
	case stateEmpty:
		return "empty (waiting to be added)"
	case stateProvisional:
		return "without a cluster ID yet"
	case stateSettled:
		return "settled"
	}
	return fmt.Sprintf("state %d", s)
}

// peerInfo is what the other end said about itself.
type peerInfo struct {
	ID          string
	Cluster     fsm.ClusterID
	State       byte
	Incarnation uint64 // of its data directory; 0 if unknown (version 1)
	// Admitted is the log index of the admission that recorded this
	// incarnation for this node id, as the sender has applied it (committed
	// entries only); 0 if unknown (not applied yet, recorded before indexes
	// were, or version 3 and older). Of two directories of one node id, the
	// one admitted later is the current one (identity.check).
	Admitted uint64
	// Release is the sender's ticketd version ("" before version 4).
	Release string
	// Version is the handshake version the frame was read in, or is to be
	// written in (0 means the current one).
	Version byte
	// Auth (hello, version 3): authSecret when the sender proves the
	// cluster secret; Nonce is its half of the challenge.
	Auth  byte
	Nonce [nonceSize]byte
}

func (p peerInfo) version() byte {
	if p.Version == 0 {
		return handshakeVersion
	}
	return p.Version
}

func appendIdentity(b []byte, p peerInfo) []byte {
	b = append(b, p.Cluster[:]...)
	b = append(b, p.State, byte(len(p.ID)))
	b = append(b, p.ID...)
	if p.version() >= 2 {
		b = binary.BigEndian.AppendUint64(b, p.Incarnation)
	}
	if p.version() >= 4 {
		b = binary.BigEndian.AppendUint64(b, p.Admitted)
		r := p.Release[:min(len(p.Release), 255)]
		b = append(b, byte(len(r)))
		b = append(b, r...)
	}
	return b
}

// appendHello writes me's hello in me.Version (0: the current one).
func appendHello(b []byte, kind byte, me peerInfo) []byte {
	b = append(b, handshakeMagic[:]...)
	b = append(b, me.version(), kind)
	b = appendIdentity(b, me)
	if me.version() >= 3 {
		b = append(b, me.Auth)
		b = append(b, me.Nonce[:]...)
	}
	return b
}

// appendReply writes me's reply in me.Version (0: the current one).
func appendReply(b []byte, refused bool, me peerInfo, reason string) []byte {
	b = append(b, handshakeMagic[:]...)
	v := byte(0)
	if refused {
		v = 1
	}
	b = append(b, me.version(), v)
	b = appendIdentity(b, me)
	if len(reason) > 60000 {
		reason = reason[:60000]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
	return append(b, reason...)
}

// errNoHandshake: the other end closed the connection before sending a byte
// of its handshake (an older ticketd refusing a version it does not speak,
// or a server going away).
var errNoHandshake = errors.New("the peer closed the connection without a handshake")

// readHandshake reads a hello (reply=false) or a reply: the byte after the
// version is the kind or the verdict. p.Version is the frame's version.
func readHandshake(r io.Reader, reply bool) (p peerInfo, second byte, reason string, err error) {
	if p.Version, second, err = readHead(r); err != nil {
		return p, 0, "", err
	}
	p, reason, err = readBody(r, p.Version, reply)
	return p, second, reason, err
}

// readHead reads the magic, the version and the byte after it.
func readHead(r io.Reader) (version, second byte, err error) {
	var head [6]byte
	// The magic first, on its own: something that is not a ticketd (a
	// client dialling the Raft port by mistake) is cut off at once rather
	// than left waiting for bytes it will never send.
	if n, err := io.ReadFull(r, head[:4]); err != nil {
		if n == 0 && !isTimeout(err) {
			return 0, 0, fmt.Errorf("read handshake: %w (%w)", errNoHandshake, err)
		}
		return 0, 0, fmt.Errorf("read handshake: %w", err)
	}
	if [4]byte(head[:4]) != handshakeMagic {
		return 0, 0, fmt.Errorf("the peer did not start with a Ticketing Raft handshake (an older ticketd, or not ticketd at all)")
	}
	if _, err = io.ReadFull(r, head[4:]); err != nil {
		return 0, 0, fmt.Errorf("read handshake: %w", err)
	}
	if head[4] < handshakeVersionV1 || head[4] > handshakeVersion {
		return 0, 0, fmt.Errorf("the peer speaks Raft handshake version %d, this ticketd versions %d to %d: run the same ticketd version on every server", head[4], handshakeVersionV1, handshakeVersion)
	}
	return head[4], head[5], nil
}

// readBody reads the rest of a hello or a reply of the given version.
func readBody(r io.Reader, version byte, reply bool) (p peerInfo, reason string, err error) {
	p.Version = version
	var head [16 + 1 + 1]byte
	if _, err = io.ReadFull(r, head[:]); err != nil {
		return p, "", fmt.Errorf("read handshake: %w", err)
	}
	copy(p.Cluster[:], head[:16])
	p.State = head[16]
	id := make([]byte, head[17])
	if _, err = io.ReadFull(r, id); err != nil {
		return p, "", fmt.Errorf("read handshake: %w", err)
	}
	p.ID = string(id)
	if p.Version >= 2 {
		var inc [8]byte
		if _, err = io.ReadFull(r, inc[:]); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		p.Incarnation = binary.BigEndian.Uint64(inc[:])
	}
	if p.Version >= 4 {
		var adm [8]byte
		if _, err = io.ReadFull(r, adm[:]); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		p.Admitted = binary.BigEndian.Uint64(adm[:])
		var n [1]byte
		if _, err = io.ReadFull(r, n[:]); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		rel := make([]byte, n[0])
		if _, err = io.ReadFull(r, rel); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		p.Release = string(rel)
	}
	if !reply && p.Version >= 3 {
		var auth [1 + nonceSize]byte
		if _, err = io.ReadFull(r, auth[:]); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		if auth[0] > authSecret {
			return p, "", fmt.Errorf("the peer's handshake names an unknown authentication %d: run the same ticketd version on every server", auth[0])
		}
		p.Auth = auth[0]
		copy(p.Nonce[:], auth[1:])
	}
	if reply {
		var n [2]byte
		if _, err = io.ReadFull(r, n[:]); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		txt := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err = io.ReadFull(r, txt); err != nil {
			return p, "", fmt.Errorf("read handshake: %w", err)
		}
		reason = string(txt)
	}
	return p, reason, nil
}
