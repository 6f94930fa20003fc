package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// go test ./internal/wire -run TestVectors -update
// regenerates testdata/vectors.json, the "## Frames" section of
// docs/protocol.md and the FuzzDecode seed corpus from the table below.
var update = flag.Bool("update", false, "rewrite testdata/vectors.json, the frame tables of docs/protocol.md and the FuzzDecode seed corpus")

const (
	vectorsPath = "../../testdata/vectors.json"
	docPath     = "../../docs/protocol.md"
	corpusDir   = "testdata/fuzz/FuzzDecode"
)

// vector is one element of testdata/vectors.json as read back.
type vector struct {
	Name      string                     `json:"name"`
	Direction string                     `json:"direction"`
	Hex       string                     `json:"hex"`
	Frame     map[string]json.RawMessage `json:"frame"`
	Valid     bool                       `json:"valid"`
	Stage     string                     `json:"stage"`
	ErrorCode *int                       `json:"error_code"`
	Why       string                     `json:"why"`
}

// genVector is one vector as the generator defines it.
type genVector struct {
	name  string
	frame *Frame // valid vectors and stage "validate"; nil for raw ones
	raw   []byte // stage "decode": the whole invalid frame
	dir   string // overrides the type's direction
	code  Code   // invalid vectors
	stage string // "decode" or "validate"
	why   string
}

var (
	owner1 = Owner{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	owner2 = Owner{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
)

// resize returns a copy of a valid frame with delta bytes cut off (delta < 0)
// or zero bytes added (delta > 0), with the length prefix adjusted to match.
func resize(frame []byte, delta int) []byte {
	var b []byte
	if delta < 0 {
		b = append(b, frame[:len(frame)+delta]...)
	} else {
		b = append(append(b, frame...), make([]byte, delta)...)
	}
	be.PutUint32(b, uint32(len(b)-HeaderLen))
	return b
}

func genVectors() []genVector {
	acquire := &Frame{Type: TypeAcquire, ID: 7, Owner: owner1, Wait: 5, Lease: 30, Key: []byte("orders/42")}
	granted := &Frame{Type: TypeGranted, ID: 7, Token: 1, LeaseMs: 30000}
	hello := &Frame{Type: TypeHello, Version: 1, Text: []byte("s3cret-token")}
	ping := &Frame{Type: TypePing, Nonce: 0x0123456789abcdef}
	readyCluster := &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader | ReadySessions | ReadyClusterID, Interval: 500, Count: 1024, Text: []byte("n1"),
		ClusterID: ClusterID{0x9f, 0x86, 0xd0, 0x81, 0x88, 0x4c, 0x7d, 0x65, 0x9a, 0x2f, 0xea, 0xa0, 0xc5, 0x5a, 0xd0, 0x15}}
	readyPlain := &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader | ReadySessions, Interval: 500, Count: 1024, Text: []byte("n1")}
	enc := func(f *Frame) []byte { return Append(nil, f) }
	strOverrun := enc(acquire)
	be.PutUint16(strOverrun[HeaderLen+1+4+OwnerLen+2:], uint16(len(acquire.Key)+1))

	return append([]genVector{
		// Valid frames, client to server.
		{name: "hello", frame: hello},
		{name: "hello-admin-no-token", frame: &Frame{Type: TypeHello, Version: 1, Flags: HelloAdmin}},
		{name: "hello-cluster-id", frame: &Frame{Type: TypeHello, Version: 1, Flags: HelloClusterID, Text: []byte("s3cret-token")}},
		{name: "hello-admin-cluster-id", frame: &Frame{Type: TypeHello, Version: 1, Flags: HelloAdmin | HelloClusterID}},
		{name: "hello-cluster-id-idle-pings", frame: &Frame{Type: TypeHello, Version: 1, Flags: HelloClusterID | HelloIdlePings, Text: []byte("s3cret-token")}},
		{name: "hello-binary-token", frame: &Frame{Type: TypeHello, Version: 1, Text: []byte{0xc3, 0x28, 0x00, 0xff}}},
		{name: "acquire", frame: acquire},
		{name: "acquire-wait-0-lease-1", frame: &Frame{Type: TypeAcquire, ID: 8, Owner: owner2, Wait: 0, Lease: MinLease, Key: []byte("k")}},
		{name: "acquire-wait-255-lease-250", frame: &Frame{Type: TypeAcquire, ID: math.MaxUint32, Owner: owner1, Wait: MaxWait, Lease: MaxLease, Key: []byte("jobs/nightly")}},
		{name: "acquire-non-ascii-key", frame: &Frame{Type: TypeAcquire, ID: 9, Owner: owner2, Wait: 10, Lease: 60, Key: []byte("clé/日本語/🔒")}},
		{name: "acquire-binary-key", frame: &Frame{Type: TypeAcquire, ID: 10, Owner: owner2, Wait: 1, Lease: 5, Key: []byte{0x00, 0xff, 0x80, 0x0a}}},
		{name: "acquire-key-1024-bytes", frame: &Frame{Type: TypeAcquire, ID: 11, Owner: owner1, Wait: 0, Lease: 10, Key: []byte(strings.Repeat("0123456789abcdef", MaxKey/16))}},
		{name: "cancel", frame: &Frame{Type: TypeCancel, ID: 7, Owner: owner1}},
		{name: "release", frame: &Frame{Type: TypeRelease, ID: 12, Token: 1, Key: []byte("orders/42")}},
		{name: "release-max-token", frame: &Frame{Type: TypeRelease, ID: 13, Token: math.MaxUint64, Key: []byte("orders/42")}},
		{name: "release-owner", frame: &Frame{Type: TypeReleaseOwner, ID: 18, Owner: owner1, Key: []byte("orders/42")}},
		{name: "release-owner-max-id-binary-key", frame: &Frame{Type: TypeReleaseOwner, ID: math.MaxUint32, Owner: owner2, Key: []byte{0x00, 0xff}}},
		{name: "describe", frame: &Frame{Type: TypeDescribe, ID: 14, Key: []byte("orders/42")}},
		{name: "describe-id-0", frame: &Frame{Type: TypeDescribe, ID: 0, Key: []byte("orders/42")}},
		{name: "admin-status", frame: &Frame{Type: TypeAdmin, ID: 15, Text: []byte(`{"op":"status"}`)}},
		{name: "admin-members-add", frame: &Frame{Type: TypeAdmin, ID: 16, Text: []byte(`{"op":"members.add","id":"node-4","raft_addr":"10.0.0.4:5226"}`)}},

		// Valid frames, server to client.
		{name: "ready-leader", frame: &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader, Interval: 5000, Count: 1024, Text: []byte("node-1")}},
		{name: "ready-follower", frame: &Frame{Type: TypeReady, Version: 1, Flags: 0, Interval: 5000, Count: 64, Text: []byte("node-2")}},
		{name: "ready-cluster-id", frame: readyCluster},
		{name: "ready-cluster-id-idle-pings", frame: &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader | ReadySessions | ReadyClusterID | ReadyIdlePings, Interval: 500, Count: 1024, Text: []byte("n1"),
			ClusterID: readyCluster.ClusterID, IdleInterval: 20000}},
		{name: "ready-idle-pings", frame: &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader | ReadyIdlePings, Interval: 500, Count: 64, Text: []byte("n2"), IdleInterval: 20000}},
		{name: "ready-no-cluster-id-yet", frame: &Frame{Type: TypeReady, Version: 1, Flags: ReadyLeader | ReadySessions | ReadyClusterID, Interval: 500, Count: 1024, Text: []byte("n1")}},
		{name: "granted", frame: granted},
		{name: "granted-existing-hold", frame: &Frame{Type: TypeGranted, ID: 19, Token: 1, LeaseMs: 12345, QueuedMs: 0}},
		{name: "granted-max-token-after-queue", frame: &Frame{Type: TypeGranted, ID: 8, Token: math.MaxUint64, LeaseMs: 250000, QueuedMs: 1234}},
		{name: "not-acquired", frame: &Frame{Type: TypeNotAcquired, ID: 8, QueuedMs: 0}},
		{name: "not-acquired-after-wait-255", frame: &Frame{Type: TypeNotAcquired, ID: 9, QueuedMs: 255000}},
		{name: "queued", frame: &Frame{Type: TypeQueued, ID: 7, Count: 1}},
		{name: "cancelled", frame: &Frame{Type: TypeCancelled, ID: 7}},
		{name: "capacity-held", frame: &Frame{Type: TypeCapacity, ID: 7, Reason: CapacityHeld}},
		{name: "capacity-key-waiters", frame: &Frame{Type: TypeCapacity, ID: 7, Reason: CapacityKeyWaiters}},
		{name: "capacity-waiters", frame: &Frame{Type: TypeCapacity, ID: 7, Reason: CapacityWaiters}},
		{name: "capacity-in-flight", frame: &Frame{Type: TypeCapacity, ID: 17, Reason: CapacityInFlight}},
		{name: "capacity-connections", frame: &Frame{Type: TypeCapacity, ID: 0, Reason: CapacityConnections}},
		{name: "released", frame: &Frame{Type: TypeReleased, ID: 12}},
		{name: "not-held", frame: &Frame{Type: TypeNotHeld, ID: 13}},
		{name: "not-leader", frame: &Frame{Type: TypeNotLeader, Text: []byte("10.0.0.2:5225")}},
		{name: "not-leader-unknown", frame: &Frame{Type: TypeNotLeader}},
		{name: "error-invalid-argument", frame: &Frame{Type: TypeError, Code: uint16(CodeInvalidArgument), Text: []byte("lease 0 s is outside 1..250 s")}},
		{name: "error-shutting-down", frame: &Frame{Type: TypeError, Code: uint16(CodeShuttingDown), Text: []byte("the server is shutting down; reconnect to another server")}},
		{name: "error-frame-too-large", frame: &Frame{Type: TypeError, Code: uint16(CodeFrameTooLarge), Text: []byte("frame of 65537 bytes exceeds the maximum of 65536")}},
		{name: "error-malformed-frame", frame: &Frame{Type: TypeError, Code: uint16(CodeMalformedFrame), Text: []byte("A frame is too short")}},
		{name: "error-unknown-frame", frame: &Frame{Type: TypeError, Code: uint16(CodeUnknownFrame), Text: []byte("unknown frame type a")}},
		{name: "error-unsupported-version", frame: &Frame{Type: TypeError, Code: uint16(CodeUnsupportedVersion), Text: []byte("protocol version 2 is not supported; this server speaks 1")}},
		{name: "error-unauthenticated", frame: &Frame{Type: TypeError, Code: uint16(CodeUnauthenticated), Text: []byte("the hello's token is missing or wrong")}},
		{name: "error-hello-required", frame: &Frame{Type: TypeError, Code: uint16(CodeHelloRequired), Text: []byte("the first frame must be H")}},
		{name: "error-hello-timeout", frame: &Frame{Type: TypeError, Code: uint16(CodeHelloTimeout), Text: []byte("no hello within 5s")}},
		{name: "error-ping-timeout", frame: &Frame{Type: TypeError, Code: uint16(CodePingTimeout), Text: []byte("no pong within 10s")}},
		{name: "error-slow-consumer", frame: &Frame{Type: TypeError, Code: uint16(CodeSlowConsumer), Text: []byte("the client does not read its answers")}},
		{name: "error-internal", frame: &Frame{Type: TypeError, Code: uint16(CodeInternal), Text: []byte("log write failed; the outcome is unknown")}},
		{name: "error-duplicate-id", frame: &Frame{Type: TypeError, Code: uint16(CodeDuplicateID), Text: []byte("request id 7 is already in flight")}},
		{name: "error-not-allowed", frame: &Frame{Type: TypeError, Code: uint16(CodeNotAllowed), Text: []byte("G is not a request")}},
		{name: "info-held", frame: &Frame{Type: TypeInfo, ID: 14, Flags: InfoHeld, Token: 42, Owner: owner1, Remaining: 29000, LeaseMs: 30000, Count: 2}},
		{name: "info-free", frame: &Frame{Type: TypeInfo, ID: 14}},
		{name: "admin-reply-ok", frame: &Frame{Type: TypeAdminReply, ID: 15, Code: 0, Text: []byte(`{"node_id":"node-1","role":"leader"}`)}},
		{name: "admin-reply-chunk", frame: &Frame{Type: TypeAdminReply, ID: 15, Code: 3, Text: []byte{'T', 'K', 'S', 'N', 0x00, 0x01, 0xff, 0xfe}}},
		{name: "admin-reply-not-leader", frame: &Frame{Type: TypeAdminReply, ID: 16, Code: 1, Text: []byte(`{"leader_addr":"10.0.0.2:5225"}`)}},
		{name: "forbidden-role", frame: &Frame{Type: TypeForbidden, ID: 15, Reason: ForbiddenRole}},
		{name: "forbidden-key", frame: &Frame{Type: TypeForbidden, ID: 7, Reason: ForbiddenKey}},
		{name: "forbidden-owner", frame: &Frame{Type: TypeForbidden, ID: 12, Reason: ForbiddenOwner}},

		// Valid frames, both directions.
		{name: "ping", frame: ping},
		{name: "ping-nonce-0", frame: &Frame{Type: TypePing}},
		{name: "pong-max-nonce", frame: &Frame{Type: TypePong, Nonce: math.MaxUint64}},

		// Frames that do not decode.
		{name: "zero-length", raw: []byte{0, 0, 0, 0}, dir: "both", code: CodeMalformedFrame,
			why: "length 0: a frame has at least its type byte"},
		{name: "oversized-length", raw: []byte{0x00, 0x01, 0x00, 0x01, 'A'}, dir: "both", code: CodeFrameTooLarge,
			why: "length 65537 exceeds MaxFrame (65536); refused right after the length prefix, before any payload is read (the payload is not even present here)"},
		{name: "oversized-length-max-u32", raw: []byte{0xff, 0xff, 0xff, 0xff}, dir: "both", code: CodeFrameTooLarge,
			why: "length 4294967295 exceeds MaxFrame; refused without reading further"},
		{name: "unknown-type-lowercase", raw: []byte{0, 0, 0, 5, 'a', 0, 0, 0, 7}, dir: "both", code: CodeUnknownFrame,
			why: "type 'a' (0x61) is not a frame type; types are case-sensitive"},
		{name: "unknown-type-zero", raw: []byte{0, 0, 0, 1, 0}, dir: "both", code: CodeUnknownFrame,
			why: "type 0x00 is not a frame type"},
		{name: "type-only-hello", raw: []byte{0, 0, 0, 1, 'H'}, code: CodeMalformedFrame,
			why: "H needs version, flags and a str: 5 bytes of payload at least"},
		{name: "truncated-acquire", raw: resize(enc(acquire), -1), code: CodeMalformedFrame,
			why: "the acquire frame above with its last key byte cut off and the length prefix adjusted: key_len says 9, 8 bytes follow"},
		{name: "trailing-acquire", raw: resize(enc(acquire), 1), code: CodeMalformedFrame,
			why: "the acquire frame above with one extra 00 byte after the key and the length prefix adjusted"},
		{name: "acquire-key-len-overrun", raw: strOverrun, code: CodeMalformedFrame,
			why: "key_len says 10 but the frame ends after 9 key bytes (the length prefix is consistent)"},
		{name: "truncated-hello", raw: resize(enc(hello), -1), code: CodeMalformedFrame,
			why: "hello with its last token byte cut off and the length prefix adjusted"},
		{name: "truncated-granted", raw: resize(enc(granted), -1), code: CodeMalformedFrame,
			why: "G has a fixed size of 21 bytes after the prefix; this one has 20"},
		{name: "trailing-granted", raw: resize(enc(granted), 1), code: CodeMalformedFrame,
			why: "G has a fixed size of 21 bytes after the prefix; this one has 22"},
		{name: "trailing-cancelled", raw: resize(enc(&Frame{Type: TypeCancelled, ID: 7}), 1), code: CodeMalformedFrame,
			why: "X is exactly type and id (length 5); this one has length 6"},
		{name: "truncated-release-owner", raw: resize(enc(&Frame{Type: TypeReleaseOwner, ID: 18, Owner: owner1, Key: []byte("k")}), -1), code: CodeMalformedFrame,
			why: "U with its one key byte cut off and the length prefix adjusted: key_len says 1, no byte follows"},
		{name: "truncated-forbidden", raw: resize(enc(&Frame{Type: TypeForbidden, ID: 7, Reason: ForbiddenKey}), -1), code: CodeMalformedFrame,
			why: "F is exactly type, id and reason (length 6); this one has length 5"},
		{name: "truncated-ready-cluster-id", raw: resize(enc(readyCluster), -1), code: CodeMalformedFrame,
			why: "Y with flag bit 2 (ReadyClusterID) ends with a 16-byte cluster ID; this one has 15"},
		{name: "trailing-ready-without-cluster-flag", raw: resize(enc(readyPlain), ClusterIDLen), code: CodeMalformedFrame,
			why: "Y without flag bit 2 ends with its node id: 16 bytes after it are trailing bytes (a server sends the cluster ID only with the flag, and only to a hello that asked)"},
		{name: "truncated-ready-idle-pings", raw: resize(enc(&Frame{Type: TypeReady, Version: 1, Flags: ReadyIdlePings, Interval: 500, Count: 64, Text: []byte("n2"), IdleInterval: 20000}), -1), code: CodeMalformedFrame,
			why: "Y with flag bit 3 (ReadyIdlePings) ends with a 4-byte idle interval; this one has 3"},
		{name: "trailing-ready-without-idle-flag", raw: resize(enc(readyPlain), 4), code: CodeMalformedFrame,
			why: "Y without flag bit 3 ends with its node id: 4 bytes after it are trailing bytes (a server sends the idle interval only with the flag, and only to a hello that asked)"},
		{name: "truncated-ping", raw: resize(enc(ping), -1), code: CodeMalformedFrame,
			why: "P is exactly type and an 8-byte nonce (length 9); this one has length 8"},

		// Frames that decode but that the server refuses (wire.Validate).
		{name: "acquire-lease-0", frame: &Frame{Type: TypeAcquire, ID: 20, Owner: owner1, Wait: 5, Lease: 0, Key: []byte("orders/42")},
			stage: "validate", code: CodeInvalidArgument, why: "lease must be 1..250 s"},
		{name: "acquire-lease-251", frame: &Frame{Type: TypeAcquire, ID: 21, Owner: owner1, Wait: 5, Lease: 251, Key: []byte("orders/42")},
			stage: "validate", code: CodeInvalidArgument, why: "lease must be 1..250 s"},
		{name: "acquire-empty-key", frame: &Frame{Type: TypeAcquire, ID: 22, Owner: owner1, Wait: 5, Lease: 30},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
		{name: "acquire-key-1025-bytes", frame: &Frame{Type: TypeAcquire, ID: 23, Owner: owner1, Wait: 5, Lease: 30, Key: []byte(strings.Repeat("0123456789abcdef", MaxKey/16) + "!")},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
		{name: "release-empty-key", frame: &Frame{Type: TypeRelease, ID: 24, Token: 1},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
		{name: "release-owner-empty-key", frame: &Frame{Type: TypeReleaseOwner, ID: 26, Owner: owner1},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
		{name: "release-owner-key-1025-bytes", frame: &Frame{Type: TypeReleaseOwner, ID: 27, Owner: owner2, Key: []byte(strings.Repeat("0123456789abcdef", MaxKey/16) + "!")},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
		{name: "hello-token-1025-bytes", frame: &Frame{Type: TypeHello, Version: 1, Text: []byte(strings.Repeat("0123456789abcdef", MaxToken/16) + "!")},
			stage: "validate", code: CodeInvalidArgument, why: "a hello token is at most 1024 bytes (E 8 during the hello)"},
		{name: "describe-empty-key", frame: &Frame{Type: TypeDescribe, ID: 25},
			stage: "validate", code: CodeInvalidArgument, why: "a key is 1..1024 bytes"},
	}, coordVectors()...) // coord_vectors_test.go
}

// --- JSON generation -------------------------------------------------------

type kv struct {
	k string
	v any
}

// object is a JSON object that keeps its key order.
type object []kv

func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := marshalPlain(e.k)
		v, err := marshalPlain(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// frameObject renders f field by field in its layout's order. u64 values are
// decimal strings so that JSON readers with float64 numbers keep them exact.
func frameObject(f *Frame) object {
	o := object{{"type", f.Type.String()}}
	for _, fs := range layoutOf(f.Type).fields {
		if !fs.present(f) {
			continue
		}
		switch p := fieldPtr(f, fs.name).(type) {
		case *uint8:
			o = append(o, kv{fs.name, *p})
		case *uint16:
			o = append(o, kv{fs.name, *p})
		case *uint32:
			o = append(o, kv{fs.name, *p})
		case *uint64:
			o = append(o, kv{fs.name, strconv.FormatUint(*p, 10)})
		case *Owner:
			o = append(o, kv{fs.name, hex.EncodeToString(p[:])})
		case *ClusterID:
			o = append(o, kv{fs.name, hex.EncodeToString(p[:])})
		case *[]byte:
			if utf8.Valid(*p) {
				o = append(o, kv{fs.name, string(*p)})
			}
			o = append(o, kv{fs.name + "_hex", hex.EncodeToString(*p)})
		}
	}
	return o
}

func directionOf(t Type) string {
	if l := layoutOf(t); l != nil {
		return l.direction
	}
	return "both"
}

// vectorsJSON is the whole file: the constants section and the vectors.
func vectorsJSON(t testing.TB, gv []genVector) []byte {
	var out []object
	for _, g := range gv {
		raw := g.raw
		if raw == nil {
			raw = Append(nil, g.frame)
		}
		dir := g.dir
		if dir == "" {
			dir = directionOf(Type(raw[HeaderLen]))
		}
		o := object{{"name", g.name}, {"direction", dir}, {"hex", hex.EncodeToString(raw)}}
		if g.frame != nil {
			o = append(o, kv{"frame", frameObject(g.frame)})
		}
		if g.code == 0 {
			o = append(o, kv{"valid", true})
		} else {
			stage := g.stage
			if stage == "" {
				stage = "decode"
			}
			o = append(o, kv{"valid", false}, kv{"stage", stage}, kv{"error_code", int(g.code)}, kv{"why", g.why})
		}
		out = append(out, o)
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(object{{"constants", constantsObject(t)}, {"vectors", out}}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// --- JSON reading ----------------------------------------------------------

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }

// frameFromJSON builds the Frame a vector's "frame" object describes. It
// requires every field of the type's layout and no others.
func frameFromJSON(m map[string]json.RawMessage) (*Frame, error) {
	var ts string
	if err := json.Unmarshal(m["type"], &ts); err != nil || len(ts) != 1 {
		return nil, fmt.Errorf("type %s is not a one-letter string", m["type"])
	}
	f := &Frame{Type: Type(ts[0])}
	l := layoutOf(f.Type)
	if l == nil {
		return nil, fmt.Errorf("no layout for type %q", ts)
	}
	seen := map[string]bool{"type": true}
	for _, fs := range l.fields {
		if !fs.present(f) { // fields come in layout order: flags is read already
			continue
		}
		num := func(max uint64) (uint64, error) {
			var v uint64
			raw, ok := m[fs.name]
			if !ok {
				return 0, fmt.Errorf("field %s missing", fs.name)
			}
			if err := json.Unmarshal(raw, &v); err != nil || v > max {
				return 0, fmt.Errorf("field %s = %s is not a number in 0..%d", fs.name, raw, max)
			}
			return v, nil
		}
		seen[fs.name] = true
		switch p := fieldPtr(f, fs.name).(type) {
		case *uint8:
			v, err := num(math.MaxUint8)
			if err != nil {
				return nil, err
			}
			*p = uint8(v)
		case *uint16:
			v, err := num(math.MaxUint16)
			if err != nil {
				return nil, err
			}
			*p = uint16(v)
		case *uint32:
			v, err := num(math.MaxUint32)
			if err != nil {
				return nil, err
			}
			*p = uint32(v)
		case *uint64:
			var s string
			if err := json.Unmarshal(m[fs.name], &s); err != nil {
				return nil, fmt.Errorf("field %s = %s is not a decimal string", fs.name, m[fs.name])
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("field %s: %v", fs.name, err)
			}
			*p = v
		case *Owner:
			var s string
			if err := json.Unmarshal(m[fs.name], &s); err != nil {
				return nil, fmt.Errorf("field %s = %s is not a string", fs.name, m[fs.name])
			}
			b, err := hex.DecodeString(s)
			if err != nil || len(b) != OwnerLen {
				return nil, fmt.Errorf("field %s = %q is not %d hex bytes", fs.name, s, OwnerLen)
			}
			copy(p[:], b)
		case *ClusterID:
			var s string
			if err := json.Unmarshal(m[fs.name], &s); err != nil {
				return nil, fmt.Errorf("field %s = %s is not a string", fs.name, m[fs.name])
			}
			b, err := hex.DecodeString(s)
			if err != nil || len(b) != ClusterIDLen {
				return nil, fmt.Errorf("field %s = %q is not %d hex bytes", fs.name, s, ClusterIDLen)
			}
			copy(p[:], b)
		case *[]byte:
			seen[fs.name+"_hex"] = true
			var hs string
			if err := json.Unmarshal(m[fs.name+"_hex"], &hs); err != nil {
				return nil, fmt.Errorf("field %s_hex missing or not a string", fs.name)
			}
			b, err := hex.DecodeString(hs)
			if err != nil {
				return nil, fmt.Errorf("field %s_hex: %v", fs.name, err)
			}
			if raw, ok := m[fs.name]; ok {
				var s string
				if err := json.Unmarshal(raw, &s); err != nil || s != string(b) {
					return nil, fmt.Errorf("field %s = %s disagrees with %s_hex", fs.name, raw, fs.name)
				}
			} else if utf8.Valid(b) {
				return nil, fmt.Errorf("field %s missing (only non-UTF-8 values may leave it out)", fs.name)
			}
			*p = b
		}
	}
	for k := range m {
		if !seen[k] {
			return nil, fmt.Errorf("field %s is not in the layout of %s", k, f.Type)
		}
	}
	return f, nil
}

func frameEqual(a, b *Frame) bool {
	x, y := *a, *b
	if !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Text, y.Text) {
		return false
	}
	x.Key, y.Key, x.Text, y.Text = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

// vectorsFile is testdata/vectors.json as read back.
type vectorsFile struct {
	Constants fileConstants `json:"constants"`
	Vectors   []vector      `json:"vectors"`
}

func readFile(t *testing.T) vectorsFile {
	t.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("%v (generate it with go test ./internal/wire -run TestVectors -update)", err)
	}
	var f vectorsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	return f
}

func readVectors(t *testing.T) []vector { return readFile(t).Vectors }

// checkVector checks one vector against the codec: the hex decodes (through a
// Reader, as a stream) to exactly the frame given, the frame encodes to
// exactly the hex, and invalid vectors fail with their code.
func checkVector(t *testing.T, v vector) {
	raw, err := hexDecode(v.Hex)
	if err != nil {
		t.Fatalf("hex: %v", err)
	}
	switch v.Direction {
	case "client->server", "server->client", "both":
	default:
		t.Errorf("direction %q", v.Direction)
	}
	var want *Frame
	if v.Frame != nil {
		if want, err = frameFromJSON(v.Frame); err != nil {
			t.Fatalf("frame: %v", err)
		}
		if d := directionOf(want.Type); d != v.Direction {
			t.Errorf("direction %q, the type's is %q", v.Direction, d)
		}
		if enc := Append(nil, want); !bytes.Equal(enc, raw) {
			t.Errorf("Append(frame) =\n%x\nwant the vector's hex\n%x", enc, raw)
		}
		if enc := layoutEncode(want); !bytes.Equal(enc, raw) {
			t.Errorf("layout table encoding =\n%x\nwant the vector's hex\n%x", enc, raw)
		}
	}
	r := NewReader(bytes.NewReader(raw))
	var got Frame
	err = r.Next(&got)
	if v.Valid || v.Stage == "validate" {
		if want == nil {
			t.Fatal("a decodable vector needs a frame")
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if !frameEqual(&got, want) {
			t.Errorf("decoded %+v\nwant %+v", got, *want)
		}
		if err := r.Next(&got); err != io.EOF {
			t.Errorf("after the frame: %v, want io.EOF", err)
		}
	}
	if v.Valid {
		if v.ErrorCode != nil || v.Why != "" || v.Stage != "" {
			t.Errorf("a valid vector has error_code/stage/why")
		}
		if v.Direction != "server->client" {
			if err := Validate(want); err != nil {
				t.Errorf("Validate: %v", err)
			}
		}
		return
	}
	if v.ErrorCode == nil || v.Why == "" {
		t.Fatal("an invalid vector needs error_code and why")
	}
	var we *Error
	switch v.Stage {
	case "decode":
		if !errors.As(err, &we) {
			t.Fatalf("Next: %v, want *Error", err)
		}
	case "validate":
		if err := Validate(want); !errors.As(err, &we) {
			t.Fatalf("Validate: %v, want *Error", err)
		}
	default:
		t.Fatalf("stage %q, want decode or validate", v.Stage)
	}
	if int(we.Code) != *v.ErrorCode {
		t.Errorf("code %d (%v), want %d", we.Code, we, *v.ErrorCode)
	}
}

func TestVectors(t *testing.T) {
	gen := genVectors()
	want := vectorsJSON(t, gen)
	examples := map[Type]vector{}
	{
		var vf vectorsFile
		if err := json.Unmarshal(want, &vf); err != nil {
			t.Fatal(err)
		}
		for _, v := range vf.Vectors {
			if !v.Valid {
				continue
			}
			raw, _ := hexDecode(v.Hex)
			if _, ok := examples[Type(raw[HeaderLen])]; !ok {
				examples[Type(raw[HeaderLen])] = v // the first valid vector of each type
			}
		}
	}
	docSection := frameTablesMarkdown(examples)
	if *update {
		if err := os.MkdirAll(filepath.Dir(vectorsPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeDocSection(docSection); err != nil {
			t.Fatal(err)
		}
		if err := writeCorpus(gen); err != nil {
			t.Fatal(err)
		}
	}

	vs := readVectors(t)
	t.Run("up-to-date", func(t *testing.T) {
		got, _ := os.ReadFile(vectorsPath)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the vectors in vectors_test.go; run go test ./internal/wire -run TestVectors -update and review the diff", vectorsPath)
		}
	})
	names := map[string]bool{}
	for _, v := range vs {
		if names[v.Name] {
			t.Errorf("duplicate vector name %q", v.Name)
		}
		names[v.Name] = true
		t.Run(v.Name, func(t *testing.T) { checkVector(t, v) })
	}
	t.Run("coverage", func(t *testing.T) { checkCoverage(t, vs) })
	t.Run("docs", func(t *testing.T) {
		doc, err := os.ReadFile(docPath)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := docFramesSection(string(doc))
		if !ok {
			t.Fatalf("%s has no \"## Frames\" section", docPath)
		}
		if got != docSection {
			t.Errorf("the \"## Frames\" section of %s differs from the codec's layout; run go test ./internal/wire -run TestVectors -update", docPath)
		}
	})
	t.Run("corpus", func(t *testing.T) {
		for name, data := range corpusFiles(gen) {
			got, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("seed %s/%s missing or stale; run go test ./internal/wire -run TestVectors -update", corpusDir, name)
			}
		}
	})
}

// checkCoverage requires every frame type, every error code a decoder
// returns, and the edge values the clients most often get wrong.
func checkCoverage(t *testing.T, vs []vector) {
	types := map[Type]bool{}
	codes := map[int]bool{}
	errorFrames := map[Code]bool{}
	var edges = map[string]bool{}
	for _, v := range vs {
		if !v.Valid {
			codes[*v.ErrorCode] = true
			continue
		}
		f, err := frameFromJSON(v.Frame)
		if err != nil {
			continue // reported by the vector's own subtest
		}
		types[f.Type] = true
		if f.Type == TypeError {
			errorFrames[Code(f.Code)] = true
		}
		switch f.Type {
		case TypeAcquire:
			edges["wait 0"] = edges["wait 0"] || f.Wait == 0
			edges["wait 255"] = edges["wait 255"] || f.Wait == 255
			edges["lease 1"] = edges["lease 1"] || f.Lease == 1
			edges["lease 250"] = edges["lease 250"] || f.Lease == 250
			edges["non-ASCII key"] = edges["non-ASCII key"] || (utf8.Valid(f.Key) && bytes.ContainsFunc(f.Key, func(r rune) bool { return r > 0x7f }))
			edges["non-UTF-8 key"] = edges["non-UTF-8 key"] || !utf8.Valid(f.Key)
			edges["1024-byte key"] = edges["1024-byte key"] || len(f.Key) == MaxKey
		case TypeNotLeader:
			edges["empty M address"] = edges["empty M address"] || len(f.Text) == 0
		}
		if f.Type == TypeGranted || f.Type == TypeRelease {
			edges["max u64 token "+f.Type.String()] = edges["max u64 token "+f.Type.String()] || f.Token == math.MaxUint64
		}
	}
	for i := range layouts {
		if !types[layouts[i].typ] {
			t.Errorf("no valid vector of type %s", layouts[i].typ)
		}
	}
	for _, c := range []Code{CodeMalformedFrame, CodeFrameTooLarge, CodeUnknownFrame, CodeInvalidArgument} {
		if !codes[int(c)] {
			t.Errorf("no invalid vector with code %d", c)
		}
	}
	for c := range codeNames {
		if !errorFrames[c] {
			t.Errorf("no E vector with code %d (%s)", c, c)
		}
	}
	for _, e := range []string{"wait 0", "wait 255", "lease 1", "lease 250", "non-ASCII key", "non-UTF-8 key", "1024-byte key", "empty M address", "max u64 token G", "max u64 token L"} {
		if !edges[e] {
			t.Errorf("no vector with %s", e)
		}
	}
}

// --- docs/protocol.md ------------------------------------------------------

var nextH2 = regexp.MustCompile(`(?m)^## `)

// docFramesSection returns the "## Frames" section, up to the next "## ".
func docFramesSection(doc string) (string, bool) {
	i := strings.Index(doc, "\n## Frames\n")
	if i < 0 {
		return "", false
	}
	s := doc[i+1:]
	if loc := nextH2.FindStringIndex(s[3:]); loc != nil {
		s = s[:3+loc[0]]
	}
	return strings.TrimRight(s, "\n") + "\n", true
}

// writeDocSection replaces the "## Frames" section of docs/protocol.md, or
// inserts it before "## Error codes" or "## Semantics".
func writeDocSection(section string) error {
	data, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	doc := string(data)
	if old, ok := docFramesSection(doc); ok {
		i := strings.Index(doc, "\n## Frames\n") + 1
		j := i + len(strings.TrimRight(old, "\n"))
		doc = doc[:i] + strings.TrimRight(section, "\n") + doc[j:]
	} else {
		i := -1
		for _, h := range []string{"\n## Error codes\n", "\n## Semantics\n"} {
			if i = strings.Index(doc, h); i >= 0 {
				break
			}
		}
		if i < 0 {
			return fmt.Errorf("%s: no place for the frames section", docPath)
		}
		doc = doc[:i+1] + section + "\n" + doc[i+1:]
	}
	return os.WriteFile(docPath, []byte(doc), 0o644)
}

// --- FuzzDecode seed corpus ------------------------------------------------

func corpusFiles(gen []genVector) map[string][]byte {
	files := map[string][]byte{}
	put := func(name string, data []byte) {
		files[name] = fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
	}
	var stream []byte
	for _, g := range gen {
		raw := g.raw
		if raw == nil {
			raw = Append(nil, g.frame)
		}
		put("vector-"+g.name, raw)
		if g.code == 0 && len(raw) < 512 {
			stream = append(stream, raw...)
		}
	}
	put("stream-all-valid", stream)
	put("stream-valid-then-truncated", append(append([]byte(nil), stream[:64]...), 0, 0, 0, 9, 'G'))
	return files
}

func writeCorpus(gen []genVector) error {
	if err := os.MkdirAll(corpusDir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(corpusDir, "vector-*"))
	for _, p := range old {
		os.Remove(p)
	}
	for name, data := range corpusFiles(gen) {
		if err := os.WriteFile(filepath.Join(corpusDir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
