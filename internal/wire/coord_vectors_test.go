package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Coordination frames: their K/T frames are in testdata/vectors.json like
// every frame (body as bytes); testdata/coordination_vectors.json gives the
// same frames with their bodies field by field, and the "## Coordination
// frames" section of docs/protocol.md is generated from coordLayouts. All
// three are rewritten by go test ./internal/wire -run TestVectors -update
// (the flag of vectors_test.go) and checked without it.

const (
	coordVectorsPath = "../../testdata/coordination_vectors.json"
	coordDocHeading  = "## Coordination frames"
)

// coordVector is one coordination frame with its body's fields.
type coordVector struct {
	name   string
	reply  bool
	id     uint32
	op     uint8
	status uint16
	c      Coord
}

func coordVectorList() []coordVector {
	big := strings.Repeat("x", 300)
	return []coordVector{
		{name: "coord-create-node-defaults", id: 30, op: CoordCreateNode, c: Coord{Path: []byte("/path/to/mynode")}},
		{name: "coord-create-node-config", id: 31, op: CoordCreateNode, c: Coord{Path: []byte("/svc/locks"), SelfCheckMs: 500, GraceMs: 5000,
			ReadMode: 2, AttachMode: 1, MaxSessions: 100, MaxSemaphores: 200, MaxWaiters: 300}},
		{name: "coord-alter-node-grace", id: 32, op: CoordAlterNode, c: Coord{Path: []byte("/svc/locks"), GraceMs: 20000}},
		{name: "coord-drop-node", id: 33, op: CoordDropNode, c: Coord{Path: []byte("/svc/locks")}},
		{name: "coord-describe-node", id: 34, op: CoordDescribeNode, c: Coord{Path: []byte("/svc/locks")}},
		{name: "coord-attach-start", id: 35, op: CoordAttach, c: Coord{Path: []byte("/svc/locks"), SeqNo: 1, TimeoutMs: 30000,
			Key: []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Desc: []byte("worker-1")}},
		{name: "coord-attach-restore", id: 36, op: CoordAttach, c: Coord{Path: []byte("/svc/locks"), Session: 7, SeqNo: 2, TimeoutMs: 1800000,
			Key: []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}},
		{name: "coord-stop", id: 37, op: CoordStop},
		{name: "coord-create-semaphore", id: 38, op: CoordCreateSemaphore, c: Coord{Name: []byte("workers"), Limit: 10, Data: []byte(`{"pool":"a"}`)}},
		{name: "coord-update-semaphore", id: 39, op: CoordUpdateSemaphore, c: Coord{Name: []byte("config"), Data: []byte(big)}},
		{name: "coord-delete-semaphore-force", id: 40, op: CoordDeleteSemaphore, c: Coord{Name: []byte("workers"), Flags: CoordFlagForce}},
		{name: "coord-acquire-shared-try-once", id: 41, op: CoordAcquire, c: Coord{Name: []byte("workers"), Count: 1}},
		{name: "coord-acquire-exclusive-ephemeral-forever", id: 42, op: CoordAcquire, c: Coord{Name: []byte("leader"), Count: CoordExclusive,
			TimeoutMs: CoordWaitForever, Flags: CoordFlagEphemeral, Data: []byte("10.0.0.7:8080")}},
		{name: "coord-release", id: 43, op: CoordRelease, c: Coord{Name: []byte("leader")}},
		{name: "coord-describe-semaphore-watch", id: 44, op: CoordDescribeSemaphore, c: Coord{Name: []byte("leader"),
			Flags: CoordFlagOwners | CoordFlagWaiters | CoordFlagWatchData | CoordFlagWatchOwners}},
		{name: "coord-describe-semaphore-next-page", id: 47, op: CoordDescribeSemaphore, c: Coord{Name: []byte("leader"),
			Flags: CoordFlagOwners | CoordFlagWaiters | CoordFlagNoData, After: 10}},

		{name: "coord-for-session-attach-start", id: 48, op: CoordAttach | CoordForSession, c: Coord{Path: []byte("/svc/locks"), SeqNo: 1, TimeoutMs: 30000,
			Key: []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Desc: []byte("worker-2")}},
		{name: "coord-for-session-acquire", id: 49, op: CoordAcquire | CoordForSession, c: Coord{Session: 7, Name: []byte("workers"), Count: 1,
			TimeoutMs: 5000}},
		{name: "coord-for-session-stop", id: 50, op: CoordStop | CoordForSession, c: Coord{Session: 7}},

		{name: "coord-list-sessions", id: 45, op: CoordListSessions, c: Coord{Path: []byte("/svc/locks")}},
		{name: "coord-list-sessions-next-page", id: 46, op: CoordListSessions, c: Coord{Path: []byte("/svc/locks"), After: 7}},

		{name: "coord-reply-ok", reply: true, id: 30, op: CoordCreateNode},
		{name: "coord-reply-already-exists", reply: true, id: 30, op: CoordCreateNode, status: CoordAlreadyExists,
			c: Coord{Message: []byte("node /path/to/mynode exists: describe it, or drop it first")}},
		{name: "coord-reply-describe-node", reply: true, id: 34, op: CoordDescribeNode, c: Coord{SelfCheckMs: 1000, GraceMs: 10000,
			ReadMode: 1, AttachMode: 1, MaxSessions: 10000, MaxSemaphores: 10000, MaxWaiters: 10000, Sessions: 3, Semaphores: 2, Waiters: 1}},
		{name: "coord-reply-attach", reply: true, id: 35, op: CoordAttach, c: Coord{Session: 7, SeqNo: 1}},
		{name: "coord-reply-bad-session", reply: true, id: 36, op: CoordAttach, status: CoordBadSession,
			c: Coord{Message: []byte("seq_no 2 is lower than the session's 3: another client restored it")}},
		{name: "coord-reply-acquired", reply: true, id: 42, op: CoordAcquire, c: Coord{Flags: CoordFlagAcquired, OrderID: 1234, Count: math.MaxUint64}},
		{name: "coord-reply-not-acquired", reply: true, id: 41, op: CoordAcquire},
		{name: "coord-reply-aborted", reply: true, id: 41, op: CoordAcquire, status: CoordAborted, c: Coord{Message: []byte("replaced by a later acquire of this session")}},
		{name: "coord-reply-released", reply: true, id: 43, op: CoordRelease, c: Coord{Flags: CoordFlagReleased}},
		{name: "coord-reply-describe-semaphore", reply: true, id: 44, op: CoordDescribeSemaphore, c: Coord{Limit: 3, Count: 2, Data: []byte("cfg"),
			Owners: []CoordHolder{{OrderID: 10, Session: 7, Count: 2, TimeoutMs: 0, Data: []byte("a")}},
			Queue:  []CoordHolder{{OrderID: 12, Session: 8, Count: 2, TimeoutMs: 5000}}, Version: 17}},
		{name: "coord-reply-describe-semaphore-more", reply: true, id: 44, op: CoordDescribeSemaphore, c: Coord{Limit: 3, Count: 2, Data: []byte("cfg"),
			Flags: CoordFlagMoreHolders, Owners: []CoordHolder{{OrderID: 10, Session: 7, Count: 2, TimeoutMs: 0, Data: []byte("a")}}, Version: 17}},
		{name: "coord-reply-describe-semaphore-next-page", reply: true, id: 47, op: CoordDescribeSemaphore, c: Coord{Limit: 3, Count: 2,
			Queue: []CoordHolder{{OrderID: 12, Session: 8, Count: 2, TimeoutMs: 5000}}, Version: 17}},
		{name: "coord-reply-describe-ephemeral-empty-lists", reply: true, id: 44, op: CoordDescribeSemaphore, c: Coord{Limit: math.MaxUint64, Count: 1, Flags: CoordFlagEphemeral, Version: 3}},
		{name: "coord-reply-list-sessions", reply: true, id: 45, op: CoordListSessions, c: Coord{SessionList: []CoordSession{
			{Session: 7, SeqNo: 3, TimeoutMs: 30000, Flags: CoordFlagAttached, Desc: []byte("worker-1")},
			{Session: 9, SeqNo: 1, TimeoutMs: 5000}}}},
		{name: "coord-reply-list-sessions-more", reply: true, id: 45, op: CoordListSessions, c: Coord{Flags: CoordFlagMore,
			SessionList: []CoordSession{{Session: 7, SeqNo: 3, TimeoutMs: 30000, Flags: CoordFlagAttached, Desc: []byte("worker-1")}}}},
		{name: "coord-reply-list-sessions-empty", reply: true, id: 46, op: CoordListSessions},
		{name: "coord-queued", reply: true, id: 42, op: CoordQueued, c: Coord{OrderID: 1235}},
		{name: "coord-changed-owners", reply: true, id: 44, op: CoordChanged, c: Coord{Flags: CoordFlagChangedOwners}},
		{name: "coord-changed-maybe-lost", reply: true, id: 44, op: CoordChanged},
		{name: "coord-lost", reply: true, id: 0, op: CoordLost, c: Coord{Name: []byte("workers"), OrderID: 1234}},
		{name: "coord-session-ended", reply: true, id: 0, op: CoordSessionEnded, c: Coord{Session: 7, Reason: 1}},
	}
}

func (v *coordVector) frame() *Frame { return CoordFrame(v.reply, v.id, v.op, v.status, &v.c) }

// coordVectors are the coordination entries of testdata/vectors.json.
func coordVectors() []genVector {
	var out []genVector
	for _, v := range coordVectorList() {
		out = append(out, genVector{name: v.name, frame: v.frame()})
	}
	create := Append(nil, CoordFrame(false, 30, CoordCreateNode, 0, &Coord{Path: []byte("/n")}))
	return append(out,
		genVector{name: "coord-unknown-op", frame: &Frame{Type: TypeCoord, ID: 50, Op: 99}, stage: "validate", code: CodeUnknownFrame,
			why: "K sub-op 99 is not defined"},
		genVector{name: "coord-notification-op-in-request", frame: &Frame{Type: TypeCoord, ID: 51, Op: CoordQueued, Text: make([]byte, 8)},
			stage: "validate", code: CodeUnknownFrame, why: "sub-op 64 (Queued) is a notification, server->client only"},
		genVector{name: "coord-create-node-truncated", frame: &Frame{Type: TypeCoord, ID: 52, Op: CoordCreateNode, Text: create[HeaderLen+6 : len(create)-1]},
			stage: "validate", code: CodeMalformedFrame, why: "create node body with its last byte (of max_waiters) cut off"},
		genVector{name: "coord-release-trailing", frame: &Frame{Type: TypeCoord, ID: 53, Op: CoordRelease, Text: []byte{0, 1, 's', 0}},
			stage: "validate", code: CodeMalformedFrame, why: "release body is name:str only; one trailing byte"},
		genVector{name: "coord-acquire-undefined-flag", frame: CoordFrame(false, 54, CoordAcquire, 0, &Coord{Name: []byte("s"), Count: 1, Flags: 2}),
			stage: "validate", code: CodeMalformedFrame, why: "acquire flags define bit 0 only"},
		genVector{name: "coord-type-and-id-only", raw: []byte{0, 0, 0, 5, 'K', 0, 0, 0, 1}, code: CodeMalformedFrame,
			why: "K needs id:u32 and op:u8 at least"},
		genVector{name: "coord-oversized", raw: []byte{0x00, 0x10, 0x20, 0x01, 'K'}, code: CodeFrameTooLarge,
			why: "length 1056769 exceeds every bound, even that of K and T frames (1 MiB + 8 KiB = 1056768); refused right after the length prefix"},
	)
}

// --- structured JSON --------------------------------------------------------

func coordValue(c *Coord, fd coordField) any {
	bytesVal := func(b []byte) object {
		o := object{}
		if utf8.Valid(b) {
			o = append(o, kv{"text", string(b)})
		}
		return append(o, kv{"hex", hex.EncodeToString(b)})
	}
	switch p := c.ptr(fd.name).(type) {
	case *uint8:
		return *p
	case *uint32:
		return *p
	case *uint64:
		return strconv.FormatUint(*p, 10)
	case *[]byte:
		return bytesVal(*p)
	case *[]CoordHolder:
		hs := []object{}
		for _, h := range *p {
			hs = append(hs, object{{"order_id", strconv.FormatUint(h.OrderID, 10)}, {"session", strconv.FormatUint(h.Session, 10)},
				{"count", strconv.FormatUint(h.Count, 10)}, {"timeout_ms", strconv.FormatUint(h.TimeoutMs, 10)}, {"data", bytesVal(h.Data)}})
		}
		return hs
	case *[]CoordSession:
		ss := []object{}
		for _, x := range *p {
			ss = append(ss, object{{"session", strconv.FormatUint(x.Session, 10)}, {"seq_no", strconv.FormatUint(x.SeqNo, 10)},
				{"timeout_ms", strconv.FormatUint(x.TimeoutMs, 10)}, {"flags", x.Flags}, {"desc", bytesVal(x.Desc)}})
		}
		return ss
	}
	panic(fd.name)
}

func coordVectorsJSON() []byte {
	var out []object
	for _, v := range coordVectorList() {
		f := v.frame()
		fields, _ := coordBody(v.reply, v.op, v.status)
		body := object{}
		for _, fd := range fields {
			body = append(body, kv{fd.name, coordValue(&v.c, fd)})
		}
		o := object{{"name", v.name}, {"hex", hex.EncodeToString(Append(nil, f))}, {"type", f.Type.String()},
			{"id", v.id}, {"op", v.op}}
		if v.reply {
			o = append(o, kv{"status", v.status})
		}
		out = append(out, append(o, kv{"body", body}))
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(out); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// coordFromJSON builds a Coord from a structured vector's body, requiring
// every field of the layout and no other.
func coordFromJSON(reply bool, op uint8, status uint16, body map[string]json.RawMessage) (*Coord, error) {
	fields, ok := coordBody(reply, op, status)
	if !ok {
		return nil, fmt.Errorf("no layout for op %d", op)
	}
	if len(body) != len(fields) {
		return nil, fmt.Errorf("body has %d fields, the layout %d", len(body), len(fields))
	}
	parseBytes := func(raw json.RawMessage) ([]byte, error) {
		var b struct {
			Text *string `json:"text"`
			Hex  string  `json:"hex"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, err
		}
		v, err := hex.DecodeString(b.Hex)
		if err != nil || (b.Text != nil && *b.Text != string(v)) || (b.Text == nil && utf8.Valid(v)) {
			return nil, fmt.Errorf("bytes %s: text and hex disagree", raw)
		}
		return v, nil
	}
	parseU64 := func(raw json.RawMessage) (uint64, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return strconv.ParseUint(s, 10, 64)
	}
	c := &Coord{}
	for _, fd := range fields {
		raw, ok := body[fd.name]
		if !ok {
			return nil, fmt.Errorf("field %s missing", fd.name)
		}
		var err error
		switch p := c.ptr(fd.name).(type) {
		case *uint8:
			err = json.Unmarshal(raw, p)
		case *uint32:
			err = json.Unmarshal(raw, p)
		case *uint64:
			*p, err = parseU64(raw)
		case *[]byte:
			*p, err = parseBytes(raw)
		case *[]CoordHolder:
			var hs []map[string]json.RawMessage
			if err = json.Unmarshal(raw, &hs); err != nil {
				break
			}
			for _, h := range hs {
				var x CoordHolder
				for name, dst := range map[string]*uint64{"order_id": &x.OrderID, "session": &x.Session, "count": &x.Count, "timeout_ms": &x.TimeoutMs} {
					if *dst, err = parseU64(h[name]); err != nil {
						return nil, fmt.Errorf("holder %s: %v", name, err)
					}
				}
				if x.Data, err = parseBytes(h["data"]); err != nil {
					return nil, err
				}
				*p = append(*p, x)
			}
		case *[]CoordSession:
			var ss []map[string]json.RawMessage
			if err = json.Unmarshal(raw, &ss); err != nil {
				break
			}
			for _, h := range ss {
				var x CoordSession
				for name, dst := range map[string]*uint64{"session": &x.Session, "seq_no": &x.SeqNo, "timeout_ms": &x.TimeoutMs} {
					if *dst, err = parseU64(h[name]); err != nil {
						return nil, fmt.Errorf("session %s: %v", name, err)
					}
				}
				if err = json.Unmarshal(h["flags"], &x.Flags); err != nil {
					return nil, fmt.Errorf("session flags: %v", err)
				}
				if x.Desc, err = parseBytes(h["desc"]); err != nil {
					return nil, err
				}
				*p = append(*p, x)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("field %s: %v", fd.name, err)
		}
	}
	return c, nil
}

// coordEqual compares two decoded bodies, treating nil and empty alike.
func coordEqual(a, b *Coord) bool {
	return fmt.Sprintf("%v", normCoord(a)) == fmt.Sprintf("%v", normCoord(b))
}

func normCoord(c *Coord) Coord {
	n := *c
	for _, p := range []*[]byte{&n.Path, &n.Name, &n.Key, &n.Desc, &n.Data, &n.Message} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	if len(n.Owners) == 0 {
		n.Owners = nil
	}
	if len(n.Queue) == 0 {
		n.Queue = nil
	}
	if len(n.SessionList) == 0 {
		n.SessionList = nil
	}
	for i := range n.SessionList {
		if len(n.SessionList[i].Desc) == 0 {
			n.SessionList[i].Desc = nil
		}
	}
	for _, hs := range [][]CoordHolder{n.Owners, n.Queue} {
		for i := range hs {
			if len(hs[i].Data) == 0 {
				hs[i].Data = nil
			}
		}
	}
	return n
}

// --- docs -------------------------------------------------------------------

func coordDocSection() string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("%s\n\n", coordDocHeading)
	w("<!-- Generated by `go test ./internal/wire -run TestVectors -update` from coordLayouts\n")
	w("in internal/wire/coord.go; TestVectors fails when this section and the codec\n")
	w("disagree. Do not edit by hand. -->\n\n")
	w("The leader serves `K` after the hello, like ticket requests (a follower answers the\n")
	w("hello with `M`; an admin session on a follower gets `E` 14 for `K`). A coordination\n")
	w("acquire counts against the acquire in-flight limit of the connection, every other `K`\n")
	w("against the other one.\n\n")
	w("**Sessions on a shared connection.** A connection carries one session unless both\n")
	w("sides agree otherwise: its Attach binds it, and Stop, the semaphore requests and the\n")
	w("notifications with id 0 are that session's. A server whose `Y` sets flag bit 1 (`2`,\n")
	w("`ReadySessions`) also carries any number of sessions on one connection, so that a\n")
	w("client's sessions share the connection of its tickets: the client sets bit 7 (`0x80`,\n")
	w("`CoordForSession`) in the sub-op of a session request (Attach, Stop, CreateSemaphore,\n")
	w("UpdateSemaphore, DeleteSemaphore, Acquire, Release, DescribeSemaphore). Attach with it\n")
	w("adds its session to the connection's (its body is Attach's, which names the session;\n")
	w("an Attach of a session the connection already carries replaces that binding, with the\n")
	w("higher seq_no). Every other request with it starts its body with `session:u64`, the\n")
	w("session it acts for, then its sub-op's body; a session this connection has not\n")
	w("attached is BAD_SESSION. The answer `T` carries the plain sub-op. When the connection\n")
	w("ends, each of its sessions is detached on its own (its expiry clock starts), exactly as\n")
	w("if it had had a connection of its own; pending acquires and watches belong to their\n")
	w("(connection, session). `Lost` names the hold by its order id, which is unique, and\n")
	w("`SessionEnded` names its session. The two forms do not mix on one connection: a plain\n")
	w("session request on a connection that attached sessions with bit 7 (or the reverse) is\n")
	w("BAD_SESSION. The protocol version stays 1: the `Y` flag is the negotiation. A server\n")
	w("without `ReadySessions` knows no sub-op with bit 7 (`E` 3 ends the connection), so a\n")
	w("client sends it only to a server that announced the flag, and otherwise uses one\n")
	w("connection per session (the Go SDK does so by itself).\n\n")
	w("`K` (client->server) and `T` (server->client) carry coordination nodes\n")
	w("(docs/coordination.md). Their body, after `op` (and `status` in `T`), depends on\n")
	w("the sub-op. Body fields follow each other without padding: `u8`, `u32`, `u64`\n")
	w("are big-endian integers, `str` is `len:u16` then `len` bytes, `data` is `len:u32`\n")
	w("then `len` bytes, `holders` is `n:u32` then `n` holders, each `order_id:u64\n")
	w("session:u64 count:u64 timeout_ms:u64 data:data`, `sessions` is `n:u32` then `n`\n")
	w("sessions, each `session:u64 seq_no:u64 timeout_ms:u64 flags:u8 desc:str` (flags bit 0:\n")
	w("attached now). A body shorter or longer than its\n")
	w("layout, an unknown sub-op, or a flag bit the sub-op does not define is `E` 1 (3\n")
	w("for an unknown sub-op). Where coordination is served, `K` and `T` frames may be up to\n")
	w("1 MiB + 8 KiB long: the receiver reads the type byte after a length prefix over 65536\n")
	w("and accepts it only for `K` and `T` (`wire.Reader.AllowCoordFrames`). Until then, and\n")
	w("for every other type, the 65536 bound of the transport applies. A `K` longer than\n")
	w("1 MiB + 8 KiB (up to 64 MiB, `wire.MaxCoordSkip`) is read past whole and answered `T`\n")
	w("BAD_REQUEST with its id and sub-op, naming the limit; the connection and its session\n")
	w("go on. Longer frames, and oversized frames of other types, end the connection with\n")
	w("`E` 2.\n\n")
	w("A `T` whose `status` is not 0 has the body `message:str` (what happened and what\n")
	w("to do) instead of the answer below. Statuses:\n\n")
	w("| status | name |\n|---|---|\n")
	for s := uint16(0); s <= CoordLimitExceeded; s++ {
		w("| %d | %s |\n", s, CoordStatusName(s))
	}
	w("\nThe meaning of each status is in docs/coordination.md.\n")
	table := func(fields []coordField) {
		if len(fields) == 0 {
			w("empty\n")
			return
		}
		w("| field | type | meaning |\n|---|---|---|\n")
		for _, fd := range fields {
			w("| %s | %s | %s |\n", fd.name, fd.kind, fd.meaning)
		}
	}
	for i := range coordLayouts {
		l := &coordLayouts[i]
		w("\n### Sub-op %d %s\n\n%s.\n\n", l.op, l.name, l.summary)
		if l.request != nil {
			w("`K` body: ")
			table(l.request)
			w("\n`T` body (status 0): ")
		} else {
			w("`T` only (notification), status 0. Body: ")
		}
		table(l.answer)
	}
	return sb.String()
}

// docCoordSection returns the section, up to the next "## ", or false.
func docCoordSection(doc string) (string, bool) {
	i := strings.Index(doc, "\n"+coordDocHeading+"\n")
	if i < 0 {
		return "", false
	}
	s := doc[i+1:]
	if loc := nextH2.FindStringIndex(s[3:]); loc != nil {
		s = s[:3+loc[0]]
	}
	return strings.TrimRight(s, "\n") + "\n", true
}

// writeCoordDocSection replaces the section, or inserts it before "## Error codes".
func writeCoordDocSection(section string) error {
	data, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	doc := string(data)
	if old, ok := docCoordSection(doc); ok {
		i := strings.Index(doc, "\n"+coordDocHeading+"\n") + 1
		doc = doc[:i] + strings.TrimRight(section, "\n") + doc[i+len(strings.TrimRight(old, "\n")):]
	} else {
		i := strings.Index(doc, "\n## Error codes\n")
		if i < 0 {
			return fmt.Errorf("%s: no \"## Error codes\" section to insert before", docPath)
		}
		doc = doc[:i+1] + section + "\n" + doc[i+1:]
	}
	return os.WriteFile(docPath, []byte(doc), 0o644)
}

func TestVectorsCoord(t *testing.T) {
	want := coordVectorsJSON()
	section := coordDocSection()
	if *update {
		if err := os.WriteFile(coordVectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeCoordDocSection(section); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(coordVectorsPath)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s missing or stale (%v); run go test ./internal/wire -run TestVectors -update", coordVectorsPath, err)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := docCoordSection(string(doc)); !ok || s != section {
		t.Errorf("the %q section of %s differs from coordLayouts; run go test ./internal/wire -run TestVectors -update", coordDocHeading, docPath)
	}
	// Read the file back as a client in another language would: build each
	// body from its fields, encode, compare with the hex, decode the hex.
	var vs []struct {
		Name   string                     `json:"name"`
		Hex    string                     `json:"hex"`
		Type   string                     `json:"type"`
		ID     uint32                     `json:"id"`
		Op     uint8                      `json:"op"`
		Status *uint16                    `json:"status"`
		Body   map[string]json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(got, &vs); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, v := range vs {
		reply := v.Type == "T"
		var status uint16
		if v.Status != nil {
			status = *v.Status
		}
		c, err := coordFromJSON(reply, v.Op, status, v.Body)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		raw, _ := hex.DecodeString(v.Hex)
		if enc := Append(nil, CoordFrame(reply, v.ID, v.Op, status, c)); !bytes.Equal(enc, raw) {
			t.Errorf("%s: fields encode to\n%x\nnot the hex\n%x", v.Name, enc, raw)
		}
		var f Frame
		var d Coord
		if err := NewReader(bytes.NewReader(raw)).Next(&f); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if err := DecodeCoord(&f, &d); err != nil || !coordEqual(&d, c) || f.ID != v.ID || f.Op != v.Op || f.Code != status {
			t.Errorf("%s: decodes to %+v (%v), want %+v", v.Name, d, err, *c)
		}
		ops[fmt.Sprint(v.Type, v.Op, status != 0)] = true
	}
	for _, l := range coordLayouts {
		if l.request != nil && !ops[fmt.Sprint("K", l.op, false)] {
			t.Errorf("no vector of K sub-op %d", l.op)
		}
		if len(l.answer) > 0 && !ops[fmt.Sprint("T", l.op, false)] {
			t.Errorf("no vector of T sub-op %d with status 0", l.op)
		}
	}
}
