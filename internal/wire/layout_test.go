package wire

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// This file restates every frame layout as data, independently of Append and
// Decode. The tests check the codec against it, the frame tables of
// docs/protocol.md are generated from it, and the JSON field names of
// testdata/vectors.json are its field names.

type fieldKind int

const (
	kU8 fieldKind = iota
	kU16
	kU32
	kU64
	kOwner
	kCluster // a cluster ID, ClusterIDLen bytes, present only with the ReadyClusterID flag
	kStr     // len:u16 then len bytes
	kRest    // every byte to the end of the frame
	kIdleMs  // a u32, present only with the ReadyIdlePings flag
)

func (k fieldKind) size() int {
	switch k {
	case kU8:
		return 1
	case kU16:
		return 2
	case kU32:
		return 4
	case kU64:
		return 8
	case kOwner:
		return OwnerLen
	case kCluster:
		return ClusterIDLen
	case kIdleMs:
		return 4
	}
	return -1
}

func (k fieldKind) String() string {
	return [...]string{"u8", "u16", "u32", "u64", "bytes", "bytes", "str", "bytes", "u32"}[k]
}

type fieldSpec struct {
	name    string // JSON name in vectors.json and field name in the docs
	kind    fieldKind
	meaning string
}

// when is the flag bit without which the field is absent (a trailing
// extension that a client asks for in its hello), 0 for a field always
// present.
func (fs fieldSpec) when() uint8 {
	switch fs.kind {
	case kCluster:
		return ReadyClusterID
	case kIdleMs:
		return ReadyIdlePings
	}
	return 0
}

// present reports whether fs is part of f's encoding.
func (fs fieldSpec) present(f *Frame) bool { return fs.when() == 0 || f.Flags&fs.when() != 0 }

type layout struct {
	typ       Type
	name      string // Go constant without the "Type" prefix
	direction string // client->server, server->client, both
	fields    []fieldSpec
	summary   string
}

func fID(m string) fieldSpec { return fieldSpec{"id", kU32, m} }

const reqID = "request id chosen by the client, unique among its requests still waiting for a final answer; not 0 (see [Order, frames and request ids](#order-frames-and-request-ids))"
const echoID = "the request id of the request answered"

var layouts = []layout{
	{TypeHello, "Hello", "client->server", []fieldSpec{
		{"version", kU16, "protocol version the client speaks: 1"},
		{"flags", kU8, "bit 0 (`1`, `HelloAdmin`): administrative session (a follower accepts it instead of answering `M`); bit 1 (`2`, `HelloClusterID`): the client reads the server's cluster ID in `Y` (see [Cluster ID](#cluster-id)); bit 2 (`4`, `HelloIdlePings`): the client follows an idle ping interval (see [Idle connections](#idle-connections)); other bits 0"},
		{"text", kStr, "client token, 0..1024 bytes of any value; checked only by a server configured with tokens (one without ignores it)"},
	}, "first frame of every connection"},
	{TypeAcquire, "Acquire", "client->server", []fieldSpec{
		fID(reqID),
		{"owner", kOwner, "16 random bytes chosen by the client for this acquire attempt"},
		{"wait", kU8, "seconds to wait in the key's queue, 0..255; 0 = one immediate attempt"},
		{"lease", kU8, "lease in seconds, 1..250"},
		{"key", kStr, "the key, 1..1024 bytes of any value"},
	}, "ask for a ticket"},
	{TypeCancel, "Cancel", "client->server", []fieldSpec{
		fID("request id of the acquire to withdraw"),
		{"owner", kOwner, "owner of that acquire"},
	}, "withdraw one queued acquire; no answer of its own"},
	{TypeRelease, "Release", "client->server", []fieldSpec{
		fID(reqID),
		{"token", kU64, "the exact fencing token being released"},
		{"key", kStr, "the key, 1..1024 bytes"},
	}, "let go of a ticket"},
	{TypeDescribe, "Describe", "client->server", []fieldSpec{
		fID(reqID),
		{"key", kStr, "the key, 1..1024 bytes"},
	}, "read the state of one key"},
	{TypeReleaseOwner, "ReleaseOwner", "client->server", []fieldSpec{
		fID(reqID),
		{"owner", kOwner, "the owner whose hold (or queued acquire) of the key is to end"},
		{"key", kStr, "the key, 1..1024 bytes"},
	}, "let go of a ticket by its owner (after an indeterminate acquire)"},
	{TypeAdmin, "Admin", "client->server", []fieldSpec{
		fID(reqID),
		{"text", kRest, "UTF-8 JSON object with an `op` field; runs to the end of the frame (no length field)"},
	}, "status and membership request"},
	{TypeReady, "Ready", "server->client", []fieldSpec{
		{"version", kU16, "protocol version the server speaks: 1"},
		{"flags", kU8, "bit 0 (`1`, `ReadyLeader`): this server is the leader; bit 1 (`2`, `ReadySessions`): it carries any number of coordination sessions on one connection (Coordination frames); bit 2 (`4`, `ReadyClusterID`): `cluster_id` follows `text`; bit 3 (`8`, `ReadyIdlePings`): `idle_interval_ms` ends the frame; other bits 0"},
		{"interval_ms", kU32, "ping interval in ms"},
		{"count", kU32, "in-flight limit per class: at most this many acquires (`A`, and `K` acquires) and, separately, this many other requests (`L`, `U`, `D`, `J`, other `K`) may await a final answer on this connection"},
		{"text", kStr, "the server's node id"},
		{"cluster_id", kCluster, "only with flag bit 2 (sent only to a hello with `HelloClusterID`): the server's cluster ID, all zero when it has none yet (see [Cluster ID](#cluster-id))"},
		{"idle_interval_ms", kIdleMs, "only with flag bit 3 (sent only to a hello with `HelloIdlePings`): the ping interval in ms while the connection is idle, longer than `interval_ms` (see [Idle connections](#idle-connections))"},
	}, "hello accepted"},
	{TypeGranted, "Granted", "server->client", []fieldSpec{
		fID(echoID),
		{"token", kU64, "fencing token, larger than every token granted before"},
		{"lease_ms", kU32, "lease in ms as the leader will enforce it, counted from the end of `queued_ms` (see [What `G` reports](#what-g-reports))"},
		{"queued_ms", kU32, "ms from the server's receipt of this request to the start of the leader's lease clock (or earlier); 0 for `wait` 0 and for an owner that already holds the key"},
	}, "final: ticket granted"},
	{TypeNotAcquired, "NotAcquired", "server->client", []fieldSpec{
		fID(echoID),
		{"queued_ms", kU32, "time the acquire spent queued in ms"},
	}, "final: not acquired within wait"},
	{TypeQueued, "Queued", "server->client", []fieldSpec{
		fID(echoID),
		{"count", kU32, "position in the key's queue, 1 = next"},
	}, "not final: the acquire waits in the key's queue"},
	{TypeCancelled, "Cancelled", "server->client", []fieldSpec{
		fID(echoID + " (the acquire)"),
	}, "final: the acquire was withdrawn by a cancel"},
	{TypeCapacity, "Capacity", "server->client", []fieldSpec{
		fID(echoID + "; 0 when the connection itself is refused"),
		{"reason", kU8, "which limit, see [capacity reasons](#capacity-reasons-of-b)"},
	}, "final: capacity reject"},
	{TypeReleased, "Released", "server->client", []fieldSpec{
		fID(echoID + " (the release)"),
	}, "final: released (answer to `L` or `U`)"},
	{TypeNotHeld, "NotHeld", "server->client", []fieldSpec{
		fID(echoID + " (the release)"),
	}, "final: the token (`L`) or owner (`U`) is not the key's current holder"},
	{TypeNotLeader, "NotLeader", "server->client", []fieldSpec{
		{"text", kStr, "client address (`host:port`) of the leader, empty when unknown"},
	}, "connection-fatal: this server is not the leader"},
	{TypeError, "Error", "server->client", []fieldSpec{
		{"code", kU16, "error code, see [Error codes](#error-codes)"},
		{"text", kStr, "human-readable message"},
	}, "connection-fatal: error with a stable code"},
	{TypeInfo, "Info", "server->client", []fieldSpec{
		fID(echoID + " (the describe)"),
		{"flags", kU8, "bit 0 (`1`, `InfoHeld`): the key is held; when it is clear, `token`, `owner`, `remaining_ms` and `lease_ms` are 0"},
		{"token", kU64, "the holder's fencing token"},
		{"owner", kOwner, "the holder's owner"},
		{"remaining_ms", kU32, "remaining lease in ms as the leader sees it"},
		{"lease_ms", kU32, "the holder's lease in ms"},
		{"count", kU32, "number of acquires waiting in the key's queue; the holder is not counted"},
	}, "answer to a describe"},
	{TypeAdminReply, "AdminReply", "server->client", []fieldSpec{
		fID(echoID + " (the admin request)"),
		{"code", kU16, "status: 0 ok, 1 not the leader, 2 failed (all final), 3 one chunk of a streamed answer (not final)"},
		{"text", kRest, "status 0, 1, 2: UTF-8 JSON object; status 3: raw bytes of the stream; runs to the end of the frame (no length field)"},
	}, "answer to an admin request"},
	{TypeForbidden, "Forbidden", "server->client", []fieldSpec{
		fID(echoID),
		{"reason", kU8, "why, see [refusal reasons](#refusal-reasons-of-f)"},
	}, "final: the principal may not make this request; the connection stays open"},
	{TypePing, "Ping", "both", []fieldSpec{
		{"nonce", kU64, "any value; the peer echoes it in `O`"},
	}, "liveness check"},
	{TypePong, "Pong", "both", []fieldSpec{
		{"nonce", kU64, "the nonce of the `P` answered"},
	}, "answer to a ping"},
	{TypeCoord, "Coord", "client->server", []fieldSpec{
		fID(reqID),
		{"op", kU8, "sub-op, see [Coordination frames](#coordination-frames)"},
		{"body", kRest, "the sub-op's body; runs to the end of the frame"},
	}, "coordination request (docs/coordination.md)"},
	{TypeCoordReply, "CoordReply", "server->client", []fieldSpec{
		fID(echoID + "; 0 for notifications of the session"),
		{"op", kU8, "the request's sub-op, or a notification's"},
		{"status", kU16, "per-operation status, see [Coordination frames](#coordination-frames); not 0: the body is `message:str`"},
		{"body", kRest, "the sub-op's answer; runs to the end of the frame"},
	}, "coordination answer or notification"},
}

func layoutOf(t Type) *layout {
	for i := range layouts {
		if layouts[i].typ == t {
			return &layouts[i]
		}
	}
	return nil
}

// fixedLen is the smallest body (type byte and payload) of the type.
func (l *layout) fixedLen() int {
	n := 1
	for _, fs := range l.fields {
		if fs.when() != 0 {
			continue
		}
		switch fs.kind {
		case kStr:
			n += 2
		case kRest:
		default:
			n += fs.kind.size()
		}
	}
	return n
}

// fieldPtr returns a pointer to the Frame field that carries the named
// layout field.
func fieldPtr(f *Frame, name string) any {
	switch name {
	case "id":
		return &f.ID
	case "owner":
		return &f.Owner
	case "cluster_id":
		return &f.ClusterID
	case "idle_interval_ms":
		return &f.IdleInterval
	case "wait":
		return &f.Wait
	case "lease":
		return &f.Lease
	case "token":
		return &f.Token
	case "lease_ms":
		return &f.LeaseMs
	case "queued_ms":
		return &f.QueuedMs
	case "remaining_ms":
		return &f.Remaining
	case "count":
		return &f.Count
	case "version":
		return &f.Version
	case "flags":
		return &f.Flags
	case "interval_ms":
		return &f.Interval
	case "code":
		return &f.Code
	case "reason":
		return &f.Reason
	case "nonce":
		return &f.Nonce
	case "key":
		return &f.Key
	case "text", "body":
		return &f.Text
	case "op":
		return &f.Op
	case "status":
		return &f.Code
	}
	panic("no frame field " + name)
}

// layoutEncode encodes f by walking its layout table, not using Append.
func layoutEncode(f *Frame) []byte {
	l := layoutOf(f.Type)
	if l == nil {
		panic(fmt.Sprintf("no layout for %s", f.Type))
	}
	b := []byte{0, 0, 0, 0, byte(f.Type)}
	for _, fs := range l.fields {
		if !fs.present(f) {
			continue
		}
		switch p := fieldPtr(f, fs.name).(type) {
		case *uint8:
			b = append(b, *p)
		case *uint16:
			b = binary.BigEndian.AppendUint16(b, *p)
		case *uint32:
			b = binary.BigEndian.AppendUint32(b, *p)
		case *uint64:
			b = binary.BigEndian.AppendUint64(b, *p)
		case *Owner:
			b = append(b, p[:]...)
		case *ClusterID:
			b = append(b, p[:]...)
		case *[]byte:
			if fs.kind == kStr {
				b = binary.BigEndian.AppendUint16(b, uint16(len(*p)))
			}
			b = append(b, *p...)
		}
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-HeaderLen))
	return b
}

// splitFields splits a whole valid frame into its fields, for the grouped hex
// examples of the docs: length, type, then one group per field (a str gives
// two: its length and its bytes; empty groups are left out).
func splitFields(frame []byte) []string {
	l := layoutOf(Type(frame[4]))
	var f Frame
	if err := Decode(frame[HeaderLen:], &f); err != nil {
		panic(err)
	}
	groups := []string{fmt.Sprintf("%x", frame[:4]), fmt.Sprintf("%x", frame[4:5])}
	b := frame[5:]
	take := func(n int) {
		if n > 0 {
			groups = append(groups, fmt.Sprintf("%x", b[:n]))
		}
		b = b[n:]
	}
	for _, fs := range l.fields {
		if !fs.present(&f) {
			continue
		}
		switch fs.kind {
		case kStr:
			n := int(binary.BigEndian.Uint16(b))
			take(2)
			take(n)
		case kRest:
			take(len(b))
		default:
			take(fs.kind.size())
		}
	}
	return groups
}

// frameTablesMarkdown renders the "## Frames" section of docs/protocol.md.
func frameTablesMarkdown(examples map[Type]vector) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("## Frames\n\n")
	w("<!-- Generated by `go test ./internal/wire -run TestVectors -update` from the layout\n")
	w("tables in internal/wire/layout_test.go; TestVectors fails when this section and the\n")
	w("codec disagree. Do not edit by hand. -->\n\n")
	w("Every frame starts with the same 5 bytes: `length:u32` (type byte plus payload)\n")
	w("and `type:u8`, an ASCII letter. The payload follows at offset 5. Offsets below\n")
	w("count from the first byte of the length prefix. `str` is `len:u16` followed by\n")
	w("`len` bytes; a `bytes` field without a length runs to the end of the frame.\n")
	w("Every variable-length field is the last field of its frame, so all offsets are\n")
	w("fixed, except for the optional cluster ID and idle interval that end `Y` (each present\n")
	w("with a flag bit, after the node id). A frame that is one byte shorter or longer than its layout is malformed\n")
	w("(`E` 1), except that the JSON of `J` and `V` simply becomes shorter or longer,\n")
	w("and the body of `K` and `T` has the layout of its sub-op ([Coordination frames](#coordination-frames)).\n\n")
	w("Field names are the names used in `testdata/vectors.json`.\n\n")
	w("| type | hex | name | direction | smallest length | meaning |\n")
	w("|---|---|---|---|---|---|\n")
	for i := range layouts {
		l := &layouts[i]
		w("| `%s` | `%02x` | %s | %s | %d | %s |\n", l.typ, byte(l.typ), l.name, l.direction, l.fixedLen(), l.summary)
	}
	w("\n")
	w("The *smallest length* is the value of the length prefix with every variable\n")
	w("field empty; frames without a variable field always have exactly that length.\n")
	for i := range layouts {
		l := &layouts[i]
		w("\n### `%s` %s (%s)\n\n", l.typ, l.name, l.direction)
		w("| offset | size | field | type | meaning |\n")
		w("|---|---|---|---|---|\n")
		// The optional trailing fields (present with a flag bit) add to
		// the length; the last field always present decides its form.
		last, optional := l.fields[0], ""
		for _, fs := range l.fields {
			if fs.when() == 0 {
				last = fs
			} else {
				optional += fmt.Sprintf(" (+ %d with `%s`)", fs.kind.size(), fs.name)
			}
		}
		switch last.kind {
		case kStr:
			w("| 0 | 4 | length | u32 | %d + %s_len%s |\n", l.fixedLen(), last.name, optional)
		case kRest:
			w("| 0 | 4 | length | u32 | %d + the size of `%s` |\n", l.fixedLen(), last.name)
		default:
			w("| 0 | 4 | length | u32 | always %d%s |\n", l.fixedLen(), optional)
		}
		w("| 4 | 1 | type | u8 | `%s` (0x%02x) |\n", l.typ, byte(l.typ))
		off, after := 5, "" // after: the str length a later field's offset adds
		for _, fs := range l.fields {
			switch fs.kind {
			case kStr:
				w("| %d | 2 | %s_len | u16 | length of `%s` |\n", off, fs.name, fs.name)
				w("| %d | %s_len | %s | bytes | %s |\n", off+2, fs.name, fs.name, fs.meaning)
				off += 2
				after = " + " + fs.name + "_len"
			case kRest:
				w("| %d | length − %d | %s | bytes | %s |\n", off, off-HeaderLen, fs.name, fs.meaning)
			default:
				w("| %d%s | %d | %s | %s | %s |\n", off, after, fs.kind.size(), fs.name, fs.kind, fs.meaning)
				off += fs.kind.size()
			}
		}
		v, ok := examples[l.typ]
		if !ok {
			panic(fmt.Sprintf("no vector for %s", l.typ))
		}
		frame, err := hexDecode(v.Hex)
		if err != nil {
			panic(err)
		}
		w("\nExample (vector `%s`, spaces between fields):\n\n", v.Name)
		w("```\n%s\n```\n", strings.Join(splitFields(frame), " "))
	}
	return sb.String()
}
