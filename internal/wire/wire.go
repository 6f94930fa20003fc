package wire

import (
	"encoding/binary"
	"fmt"
)

// Version is the protocol version this package speaks. A hello with another
// version is refused with CodeUnsupportedVersion.
const Version uint16 = 1

const (
	// HeaderLen is the size of the length prefix.
	HeaderLen = 4
	// MaxFrame is the hard upper bound of the length prefix (type + payload).
	// A longer frame is rejected before its payload is read.
	MaxFrame = 64 << 10
	// MaxKey is the longest key in bytes. Keys are 1..MaxKey bytes of any value.
	MaxKey = 1024
	// MaxToken is the longest client token accepted in a hello.
	MaxToken = 1024
	// MaxWait is the longest wait in seconds (wait 0 is one immediate attempt).
	MaxWait = 255
	// MinLease and MaxLease bound the lease in seconds.
	MinLease = 1
	MaxLease = 250
	// OwnerLen is the size of an acquire's owner: random bytes chosen by the
	// client for each acquire attempt.
	OwnerLen = 16
	// ClusterIDLen is the size of a cluster ID in Y (ReadyClusterID).
	ClusterIDLen = 16
)

// Type is a frame's one-letter type code.
type Type byte

// Client to server.
const (
	TypeHello    Type = 'H' // first frame of every connection
	TypeAcquire  Type = 'A' // ask for a ticket
	TypeCancel   Type = 'C' // withdraw one queued acquire
	TypeRelease  Type = 'L' // let go of a ticket by its exact token
	TypeDescribe Type = 'D' // read the state of one key
	TypeAdmin    Type = 'J' // status and membership, JSON body
	// TypeReleaseOwner ends the hold of a key by its owner rather than its
	// token: a client whose acquire is indeterminate knows the owner it sent,
	// not the token, and frees an orphaned grant with it.
	TypeReleaseOwner Type = 'U'
)

// Server to client.
const (
	TypeReady       Type = 'Y' // hello accepted
	TypeGranted     Type = 'G' // final: ticket granted
	TypeNotAcquired Type = 'W' // final: not acquired within wait
	TypeQueued      Type = 'Q' // not final: the acquire waits in the key's queue
	TypeCancelled   Type = 'X' // final: the acquire was withdrawn by a cancel
	TypeCapacity    Type = 'B' // final: capacity reject
	TypeReleased    Type = 'R' // final: released
	TypeNotHeld     Type = 'N' // final: the token is not the key's current holder
	TypeNotLeader   Type = 'M' // connection-fatal: this server is not the leader
	TypeError       Type = 'E' // connection-fatal: error with a stable code
	TypeInfo        Type = 'I' // answer to a describe
	TypeAdminReply  Type = 'V' // answer to an admin request, JSON body
	// TypeForbidden is the final answer to a request the connection's
	// principal may not make (reason: Forbidden*). Unlike E it does not end
	// the connection: other requests go on.
	TypeForbidden Type = 'F'
)

// Both directions.
const (
	TypePing Type = 'P'
	TypePong Type = 'O'
)

func (t Type) String() string {
	if t >= 0x21 && t <= 0x7e {
		return string(rune(t))
	}
	return fmt.Sprintf("0x%02x", byte(t))
}

// Hello flags.
const (
	// HelloAdmin asks for an administrative session. A follower accepts it
	// (instead of answering M) and serves TypeAdmin status requests on it, so
	// an operator can ask any node for its own view of the cluster.
	HelloAdmin uint8 = 1 << 0
	// HelloClusterID says the client reads a cluster ID in Y: the server
	// then sets ReadyClusterID and appends it. A client without it gets Y
	// in its original layout (older decoders refuse trailing bytes).
	HelloClusterID uint8 = 1 << 1
	// HelloIdlePings says the client follows an idle ping interval: while
	// its connection is idle it waits 3 idle intervals, not 3 ping
	// intervals, for a byte from the server. A server that has one then
	// sets ReadyIdlePings and appends it to Y.
	HelloIdlePings uint8 = 1 << 2
)

// Ready flags.
const (
	// ReadyLeader is set when the answering server is the leader.
	ReadyLeader uint8 = 1 << 0
	// ReadySessions is set by a server that carries any number of
	// coordination sessions on one connection: session requests sent with
	// CoordForSession name their session (docs/protocol.md, "Sessions on a
	// shared connection"). A client of a server without it uses one
	// connection per session.
	ReadySessions uint8 = 1 << 1
	// ReadyClusterID is set when Y ends with the server's cluster ID (sent
	// only to a hello with HelloClusterID). All zero: the server has no
	// cluster ID yet (a cluster that has not finished forming).
	ReadyClusterID uint8 = 1 << 2
	// ReadyIdlePings is set when Y ends with the idle ping interval (sent
	// only to a hello with HelloIdlePings): the server pings this
	// connection every idle interval while it is idle (no request awaiting
	// its final answer, never a coordination frame), and every ping
	// interval otherwise.
	ReadyIdlePings uint8 = 1 << 3
)

// Info flags (TypeInfo).
const (
	// InfoHeld is set when the described key is held; the holder fields
	// (owner, token, lease) are meaningful only then.
	InfoHeld uint8 = 1 << 0
)

// Capacity reject reasons carried by TypeCapacity.
const (
	CapacityHeld        uint8 = 1 // too many held tickets on the server
	CapacityKeyWaiters  uint8 = 2 // too many waiters on this key
	CapacityWaiters     uint8 = 3 // too many waiters on the server
	CapacityInFlight    uint8 = 4 // too many requests in flight on this connection
	CapacityConnections uint8 = 5 // too many connections (hello answered with B, then closed)
	// Quotas of the connection's principal ([auth] configuration): the
	// principal has reached its own limit; other principals are unaffected.
	CapacityPrincipalConnections uint8 = 6  // its connections (hello answered with B, then closed)
	CapacityPrincipalHeld        uint8 = 7  // its held tickets
	CapacityPrincipalWaiters     uint8 = 8  // its queued acquires
	CapacityPrincipalInFlight    uint8 = 9  // its requests in flight, over all its connections
	CapacityPrincipalRate        uint8 = 10 // its request rate
)

// Refusal reasons carried by TypeForbidden. They are stable: a client maps
// every one of them to "permission denied" and may show which it was.
const (
	// ForbiddenRole: the principal's role does not allow this request (an
	// application asking for an admin operation, a monitor acquiring).
	ForbiddenRole uint8 = 1
	// ForbiddenKey: the key is outside the principal's key prefixes. Given
	// before the key is looked at, so it says nothing about the key's state.
	ForbiddenKey uint8 = 2
	// ForbiddenOwner: a release of a ticket that was granted to another
	// principal (the token or owner matched, the principal did not).
	ForbiddenOwner uint8 = 3
)

// Owner identifies one acquire attempt.
type Owner [OwnerLen]byte

// ClusterID identifies one cluster's history; the zero value means none yet.
type ClusterID [ClusterIDLen]byte

// Frame is one decoded frame. Only the fields of its Type are meaningful;
// Key and Text alias the Reader's buffer and are valid until the next call to
// Next. The layout of each type is in docs/protocol.md.
type Frame struct {
	Type Type
	ID   uint32 // request id chosen by the client, echoed in the answer

	Owner Owner  // A, C, U, I
	Wait  uint8  // A: seconds to wait in the queue, 0 = one immediate attempt
	Lease uint8  // A: lease in seconds
	Token uint64 // G, L, I

	LeaseMs   uint32 // G: granted lease; I: lease of the holder
	QueuedMs  uint32 // G, W: time spent in the queue
	Remaining uint32 // I: remaining lease in ms as the leader sees it
	Count     uint32 // Q: position in the queue (1 = next); I: waiters; Y: max in-flight

	Version  uint16 // H, Y
	Flags    uint8  // H, Y; I: 1 when held
	Interval uint32 // Y: ping interval in ms
	Code     uint16 // E: error code; V: admin status (0 = ok)
	Reason   uint8  // B: which limit; F: why refused
	Nonce    uint64 // P, O

	Key  []byte // A, L, D, U
	Text []byte // H: token; Y: node id; M: leader address; E: message; J, V: JSON

	// Y with ReadyClusterID: the server's cluster ID (zero: none yet).
	ClusterID ClusterID
	// Y with ReadyIdlePings: the ping interval in ms while the connection
	// is idle.
	IdleInterval uint32

	// K, T (coordination, coord.go): the sub-op; Code carries T's status
	// and Text the sub-op's body.
	Op uint8
}

var be = binary.BigEndian

func putU16(b []byte, v uint16) []byte { return be.AppendUint16(b, v) }
func putU32(b []byte, v uint32) []byte { return be.AppendUint32(b, v) }
func putU64(b []byte, v uint64) []byte { return be.AppendUint64(b, v) }
func putStr(b []byte, s []byte) []byte {
	b = be.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// Coordination nodes (docs/coordination.md): one frame type each way, with a
// sub-op byte, instead of a letter per operation.
const (
	TypeCoord      Type = 'K' // client->server: coordination request
	TypeCoordReply Type = 'T' // server->client: coordination answer or notification

	// MaxCoordFrame bounds the length prefix of K and T frames, which carry
	// semaphore data of up to MaxCoordData bytes; other frames keep MaxFrame.
	MaxCoordFrame = MaxCoordData + 8<<10
)
