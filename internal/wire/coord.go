package wire

import (
	"fmt"
	"math"
)

// Coordination frames (docs/coordination.md, docs/protocol.md "Coordination
// frames"): K carries `id:u32 op:u8 body`, T carries `id:u32 op:u8
// status:u16 body`. Decode leaves the body in Frame.Text; DecodeCoord parses
// it by the sub-op, and AppendCoordBody writes it. One table, coordLayouts,
// drives both and the docs.

// Sub-ops of K (requests) and of T (their answers, same number).
const (
	CoordCreateNode        uint8 = 1
	CoordAlterNode         uint8 = 2
	CoordDropNode          uint8 = 3
	CoordDescribeNode      uint8 = 4
	CoordAttach            uint8 = 5 // start (session 0) or restore a session
	CoordStop              uint8 = 6 // end this connection's session
	CoordCreateSemaphore   uint8 = 7
	CoordUpdateSemaphore   uint8 = 8
	CoordDeleteSemaphore   uint8 = 9
	CoordAcquire           uint8 = 10
	CoordRelease           uint8 = 11
	CoordDescribeSemaphore uint8 = 12
	CoordListSessions      uint8 = 13 // a node's sessions, a page at a time
)

// CoordForSession, set in the sub-op of a session request (Attach, Stop,
// CreateSemaphore, UpdateSemaphore, DeleteSemaphore, Acquire, Release,
// DescribeSemaphore), says that the connection carries several sessions:
// the body of Attach is unchanged and adds its session to the connection's;
// every other body starts with `session:u64`, the session it acts for,
// followed by the sub-op's own body. The answer's sub-op is the plain one.
// Only a server that announced wire.ReadySessions in its Y accepts it.
const CoordForSession uint8 = 0x80

// Sub-ops of T that answer no request of their own (notifications).
const (
	CoordQueued       uint8 = 64 // not final: the acquire (id) waits, with its order id
	CoordChanged      uint8 = 65 // the watch of the describe (id) fired
	CoordLost         uint8 = 66 // id 0: this session lost a hold (force delete)
	CoordSessionEnded uint8 = 67 // id 0: this connection's session ended
)

// Per-operation statuses carried by T; the state machine's results carry
// them too (coordsm.Status is this numbering, not a copy of it).
const (
	CoordSuccess            uint16 = 0
	CoordNotFound           uint16 = 1
	CoordAlreadyExists      uint16 = 2
	CoordBadRequest         uint16 = 3
	CoordPreconditionFailed uint16 = 4
	CoordAborted            uint16 = 5
	CoordSessionExpired     uint16 = 6
	CoordBadSession         uint16 = 7
	CoordUnauthorized       uint16 = 8
	CoordLimitExceeded      uint16 = 9
)

// Flag bits, by sub-op.
const (
	CoordFlagForce          uint8 = 1  // K delete semaphore
	CoordFlagEphemeral      uint8 = 1  // K acquire; T describe semaphore
	CoordFlagAcquired       uint8 = 1  // T acquire
	CoordFlagReleased       uint8 = 1  // T release: a hold or wait ended
	CoordFlagOwners         uint8 = 1  // K describe semaphore: include owners
	CoordFlagWaiters        uint8 = 2  // K describe semaphore: include waiters
	CoordFlagWatchData      uint8 = 4  // K describe semaphore
	CoordFlagWatchOwners    uint8 = 8  // K describe semaphore
	CoordFlagNoData         uint8 = 16 // K describe semaphore: leave the semaphore's data out (pages after the first)
	CoordFlagMoreHolders    uint8 = 2  // T describe semaphore: more owners or waiters follow; ask again after the last order id
	CoordFlagChangedData    uint8 = 1  // T changed
	CoordFlagChangedOwners  uint8 = 2  // T changed
	CoordFlagMore           uint8 = 1  // T list sessions: more sessions follow; ask again after the last id
	CoordFlagAttached       uint8 = 1  // a session of a T list sessions: attached now
	coordDescribeFlagsValid       = CoordFlagOwners | CoordFlagWaiters | CoordFlagWatchData | CoordFlagWatchOwners | CoordFlagNoData
)

// Sizes of coordination fields (docs/coordination.md, Limits). The server
// refuses a larger one with BAD_REQUEST; the Go SDK checks them before
// sending.
const (
	MaxCoordData = 1 << 20 // semaphore or owner data
	MaxCoordPath = 1024    // a node's path
	MaxCoordName = 1024    // a semaphore's name
	MaxCoordDesc = 1024    // a session's description
	MaxCoordKey  = 16      // a session's protection key
	// MaxCoordSkip is the longest K request a receiver reads past to
	// refuse it alone (BAD_REQUEST) instead of ending the connection.
	MaxCoordSkip = 64 << 20
)

// Coord is the decoded body of a K or T frame; only the fields of its
// sub-op's layout are meaningful. Byte slices alias the frame.
type Coord struct {
	Path, Name, Key, Desc, Data, Message []byte

	Session, SeqNo, TimeoutMs, Limit, Count, OrderID uint64

	SelfCheckMs, GraceMs, MaxSessions, MaxSemaphores, MaxWaiters uint32
	ReadMode, AttachMode                                         uint8

	Flags  uint8
	Reason uint8 // session ended: 1 expired, 2 stopped, 3 node dropped

	Sessions, Semaphores, Waiters uint32 // describe node

	Owners, Queue []CoordHolder // describe semaphore
	Version       uint64        // describe semaphore: changes whenever its data, owners or waiters change

	After       uint64         // list sessions: only ids above it; describe semaphore: only order ids above it
	SessionList []CoordSession // list sessions
}

// CoordSession is one session in a list-sessions answer.
type CoordSession struct {
	Session, SeqNo, TimeoutMs uint64
	Flags                     uint8 // CoordFlagAttached
	Desc                      []byte
}

// CoordSessionSize is the encoded size of s in a list-sessions answer.
func CoordSessionSize(s *CoordSession) int { return sessionMin + len(s.Desc) }

// CoordHolder is an owner or waiter in a describe-semaphore answer.
type CoordHolder struct {
	OrderID, Session, Count, TimeoutMs uint64
	Data                               []byte
}

// CoordHolderSize is the encoded size of h in a describe-semaphore answer.
func CoordHolderSize(h *CoordHolder) int { return holderMin + len(h.Data) }

type coordKind uint8

const (
	ckU8 coordKind = iota
	ckU32
	ckU64
	ckStr      // len:u16 then bytes
	ckData     // len:u32 then bytes
	ckHolders  // n:u32 then n holders
	ckSessions // n:u32 then n sessions
)

// holderMin is the smallest encoded holder: four u64 and an empty data.
const holderMin = 4*8 + 4

// sessionMin is the smallest encoded session: three u64, a u8 and an empty str.
const sessionMin = 3*8 + 1 + 2

func (k coordKind) String() string {
	return [...]string{"u8", "u32", "u64", "str", "data", "holders", "sessions"}[k]
}

type coordField struct {
	name    string
	kind    coordKind
	meaning string
}

type coordLayout struct {
	op      uint8
	name    string
	request []coordField // K body; nil for notifications
	answer  []coordField // T body when the status is 0
	summary string
}

var nodeConfigFields = []coordField{
	{"self_check_ms", ckU32, "self-check period in ms; 0 = default (1000) in a create, unchanged in an alter"},
	{"grace_ms", ckU32, "session grace period in ms, > self_check_ms; 0 = default (10000) / unchanged"},
	{"read_mode", ckU8, "1 RELAXED, 2 STRICT; 0 = default (RELAXED) / unchanged"},
	{"attach_mode", ckU8, "1 STRICT, 2 RELAXED; 0 = default (STRICT) / unchanged"},
	{"max_sessions", ckU32, "0 = default (10000) / unchanged"},
	{"max_semaphores", ckU32, "0 = default (10000) / unchanged"},
	{"max_waiters", ckU32, "0 = default (10000) / unchanged"},
}

var (
	fPath = coordField{"path", ckStr, "node path, `/` and non-empty components, at most 1024 bytes"}
	fName = coordField{"name", ckStr, "semaphore name, 1..1024 bytes"}
)

// coordLayouts is the body of every sub-op. A T frame whose status is not 0
// has the body `message:str` instead of its answer.
var coordLayouts = []coordLayout{
	{CoordCreateNode, "CreateNode", append([]coordField{fPath}, nodeConfigFields...), nil, "create a coordination node"},
	{CoordAlterNode, "AlterNode", append([]coordField{fPath}, nodeConfigFields...), nil, "change the given (non-zero) fields of a node's configuration"},
	{CoordDropNode, "DropNode", []coordField{fPath}, nil, "drop a node; its sessions end (told `SessionEnded`)"},
	{CoordDescribeNode, "DescribeNode", []coordField{fPath}, append(append([]coordField{}, nodeConfigFields...),
		coordField{"sessions", ckU32, "sessions of the node"},
		coordField{"semaphores", ckU32, "semaphores of the node"},
		coordField{"waiters", ckU32, "queued acquires over the node's semaphores"}), "a node's configuration and sizes"},
	{CoordAttach, "Attach", []coordField{
		fPath,
		{"session", ckU64, "0 to start a new session, or the id of the session to restore"},
		{"seq_no", ckU64, "attach sequence number; the highest wins, a lower one is BAD_SESSION"},
		{"timeout_ms", ckU64, "session timeout, 1..1800000 ms"},
		{"key", ckStr, "protection key, 0..16 bytes; a restore must give the start's"},
		{"desc", ckStr, "description, 0..1024 bytes"},
	}, []coordField{
		{"session", ckU64, "the session id"},
		{"seq_no", ckU64, "the session's seq_no now"},
	}, "start or restore this connection's session"},
	{CoordStop, "Stop", []coordField{}, nil, "end this connection's session now"},
	{CoordCreateSemaphore, "CreateSemaphore", []coordField{
		fName,
		{"limit", ckU64, "limit, > 0"},
		{"data", ckData, "data, 0..1048576 bytes"},
	}, nil, "create a persistent semaphore"},
	{CoordUpdateSemaphore, "UpdateSemaphore", []coordField{fName, {"data", ckData, "new data, 0..1048576 bytes"}}, nil, "replace a semaphore's data (no ownership needed)"},
	{CoordDeleteSemaphore, "DeleteSemaphore", []coordField{fName, {"flags", ckU8, "bit 0 (`1`): force (waiters ABORTED, owners told `Lost`); other bits 0"}}, nil, "delete a semaphore"},
	{CoordAcquire, "Acquire", []coordField{
		fName,
		{"count", ckU64, "1..limit, or 2^64-1 for exclusive"},
		{"timeout_ms", ckU64, "queue time allowed; 0 = try once, 2^64-1 = forever"},
		{"flags", ckU8, "bit 0 (`1`): ephemeral (create the semaphore if missing); other bits 0"},
		{"data", ckData, "owner data, 0..1048576 bytes"},
	}, []coordField{
		{"flags", ckU8, "bit 0 (`1`): acquired; clear: not acquired (timeout 0 or timed out)"},
		{"order_id", ckU64, "the hold's order id (fencing token); 0 when not acquired"},
		{"count", ckU64, "the count held (exclusive: the limit)"},
	}, "acquire (or replace this session's earlier acquire); may be preceded by `Queued`"},
	{CoordRelease, "Release", []coordField{fName}, []coordField{{"flags", ckU8, "bit 0 (`1`): a hold or wait ended"}}, "end this session's hold or wait"},
	{CoordDescribeSemaphore, "DescribeSemaphore", []coordField{fName,
		{"flags", ckU8, "bit 0 include owners, bit 1 include waiters, bit 2 watch data, bit 3 watch owners, bit 4 (`16`) leave the semaphore's data out (pages after the first)"},
		{"after", ckU64, "list only owners and waiters with a larger order id; 0 from the start"},
	}, []coordField{
		{"limit", ckU64, "the limit (2^64-1 for ephemeral)"},
		{"count", ckU64, "the sum of the owners' counts"},
		{"flags", ckU8, "bit 0 (`1`): ephemeral; bit 1 (`2`): more owners or waiters follow (the answer stopped at 1 MiB): ask again with `after` = the last order id listed so far (0 if none yet: a page with 1 MiB of data may list nobody) and bit 4 set"},
		{"data", ckData, "the semaphore's data (empty when bit 4 was set)"},
		{"owners", ckHolders, "owners by order id (empty unless asked)"},
		{"queue", ckHolders, "waiters in queue order, which is order-id order, after every owner (empty unless asked)"},
		{"version", ckU64, "the semaphore's version: it changes whenever its data, owners or waiters change, and never repeats; pages with equal versions come from one state"},
	}, "describe a semaphore (a page at a time), optionally setting a watch"},
	{CoordListSessions, "ListSessions", []coordField{fPath, {"after", ckU64, "list only sessions with a larger id; 0 from the start"}}, []coordField{
		{"flags", ckU8, "bit 0 (`1`): more sessions follow (the answer stopped at 1 MiB): ask again with `after` = the last id"},
		{"list", ckSessions, "the node's sessions by id"},
	}, "list a node's sessions, a page at a time"},
	{CoordQueued, "Queued", nil, []coordField{{"order_id", ckU64, "the waiter's order id"}}, "not final: the acquire `id` waits in the queue"},
	{CoordChanged, "Changed", nil, []coordField{{"flags", ckU8, "bit 0 data changed, bit 1 owners changed; 0 = a notification may have been lost: describe again"}}, "the watch set by the describe `id` fired (once)"},
	{CoordLost, "Lost", nil, []coordField{fName, {"order_id", ckU64, "the hold that ended"}}, "id 0: this session's hold was ended by a force delete"},
	{CoordSessionEnded, "SessionEnded", nil, []coordField{
		{"session", ckU64, "the session"},
		{"reason", ckU8, "1 expired, 2 stopped, 3 node dropped"},
	}, "id 0: this connection's session ended"},
}

var coordMessage = []coordField{{"message", ckStr, "what happened and what to do"}}

// CoordOpName is one sub-op and its name in docs/protocol.md ("CreateNode";
// its constant is Coord followed by the name).
type CoordOpName struct {
	Op   uint8
	Name string
}

// CoordRequestHas reports whether the request body of sub-op op has the
// field named field ("path", "name": the names of docs/protocol.md), so
// that a receiver checks a field in every request that carries it.
func CoordRequestHas(op uint8, field string) bool {
	if l := coordLayoutOf(op); l != nil {
		for _, f := range l.request {
			if f.name == field {
				return true
			}
		}
	}
	return false
}

// CoordRequests lists the request sub-ops (K), in number order: a server
// and an SDK check against it that they serve and send every one.
func CoordRequests() []CoordOpName {
	var out []CoordOpName
	for _, l := range coordLayouts {
		if l.request != nil {
			out = append(out, CoordOpName{Op: l.op, Name: l.name})
		}
	}
	return out
}

func coordLayoutOf(op uint8) *coordLayout {
	for i := range coordLayouts {
		if coordLayouts[i].op == op {
			return &coordLayouts[i]
		}
	}
	return nil
}

// fSessionPrefix is the first field of a session request sent with
// CoordForSession (other than Attach).
var fSessionPrefix = coordField{"session", ckU64, "the session the request acts for"}

// coordBody returns the body layout of a K (reply false) or T frame.
func coordBody(reply bool, op uint8, status uint16) ([]coordField, bool) {
	if !reply && op&CoordForSession != 0 {
		base := op &^ CoordForSession
		fields, ok := coordBody(false, base, status)
		if !ok || !coordSessionOp(base) {
			return nil, false
		}
		if base == CoordAttach {
			return fields, true
		}
		return append([]coordField{fSessionPrefix}, fields...), true
	}
	l := coordLayoutOf(op)
	if l == nil {
		return nil, false
	}
	if !reply {
		return l.request, l.request != nil
	}
	if status != CoordSuccess {
		return coordMessage, true
	}
	return l.answer, true
}

func (c *Coord) ptr(name string) any {
	switch name {
	case "path":
		return &c.Path
	case "name":
		return &c.Name
	case "key":
		return &c.Key
	case "desc":
		return &c.Desc
	case "data":
		return &c.Data
	case "message":
		return &c.Message
	case "session":
		return &c.Session
	case "seq_no":
		return &c.SeqNo
	case "timeout_ms":
		return &c.TimeoutMs
	case "limit":
		return &c.Limit
	case "count":
		return &c.Count
	case "order_id":
		return &c.OrderID
	case "self_check_ms":
		return &c.SelfCheckMs
	case "grace_ms":
		return &c.GraceMs
	case "max_sessions":
		return &c.MaxSessions
	case "max_semaphores":
		return &c.MaxSemaphores
	case "max_waiters":
		return &c.MaxWaiters
	case "read_mode":
		return &c.ReadMode
	case "attach_mode":
		return &c.AttachMode
	case "flags":
		return &c.Flags
	case "reason":
		return &c.Reason
	case "sessions":
		return &c.Sessions
	case "semaphores":
		return &c.Semaphores
	case "waiters":
		return &c.Waiters
	case "owners":
		return &c.Owners
	case "queue":
		return &c.Queue
	case "after":
		return &c.After
	case "version":
		return &c.Version
	case "list":
		return &c.SessionList
	}
	panic("no coordination field " + name)
}

func appendData(b, s []byte) []byte {
	b = be.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendCoordBody appends the body of a K frame (reply false) or a T frame
// with op and status, taken from c, to dst. An unknown op appends nothing.
func AppendCoordBody(dst []byte, reply bool, op uint8, status uint16, c *Coord) []byte {
	fields, _ := coordBody(reply, op, status)
	for _, fd := range fields {
		switch p := c.ptr(fd.name).(type) {
		case *uint8:
			dst = append(dst, *p)
		case *uint32:
			dst = putU32(dst, *p)
		case *uint64:
			dst = putU64(dst, *p)
		case *[]byte:
			if fd.kind == ckData {
				dst = appendData(dst, *p)
			} else {
				dst = putStr(dst, *p)
			}
		case *[]CoordHolder:
			dst = putU32(dst, uint32(len(*p)))
			for _, h := range *p {
				dst = putU64(dst, h.OrderID)
				dst = putU64(dst, h.Session)
				dst = putU64(dst, h.Count)
				dst = putU64(dst, h.TimeoutMs)
				dst = appendData(dst, h.Data)
			}
		case *[]CoordSession:
			dst = putU32(dst, uint32(len(*p)))
			for _, x := range *p {
				dst = putU64(dst, x.Session)
				dst = putU64(dst, x.SeqNo)
				dst = putU64(dst, x.TimeoutMs)
				dst = append(dst, x.Flags)
				dst = putStr(dst, x.Desc)
			}
		}
	}
	return dst
}

// CoordFrame returns a K (reply false) or T frame with its body encoded from c.
func CoordFrame(reply bool, id uint32, op uint8, status uint16, c *Coord) *Frame {
	f := &Frame{Type: TypeCoord, ID: id, Op: op, Text: AppendCoordBody(nil, reply, op, status, c)}
	if reply {
		f.Type, f.Code = TypeCoordReply, status
	}
	return f
}

func (d *decoder) data() []byte {
	n := d.u32()
	if uint64(len(d.b)) < uint64(n) {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// DecodeCoord parses the body of a K or T frame into c. Byte slices in c
// alias the frame. Errors are *Error: CodeUnknownFrame for an unknown
// sub-op, CodeMalformedFrame for a body that does not match its layout or
// sets flag bits the sub-op does not define.
func DecodeCoord(f *Frame, c *Coord) error {
	*c = Coord{}
	if f.Type != TypeCoord && f.Type != TypeCoordReply {
		return errorf(CodeMalformedFrame, "frame %s is not a coordination frame", f.Type)
	}
	reply := f.Type == TypeCoordReply
	fields, ok := coordBody(reply, f.Op, f.Code)
	if !ok {
		return errorf(CodeUnknownFrame, "unknown coordination sub-op %d in %s", f.Op, f.Type)
	}
	d := decoder{b: f.Text}
	var undefined uint8 // flag bits of listed sessions that are not defined
	for _, fd := range fields {
		switch p := c.ptr(fd.name).(type) {
		case *uint8:
			*p = d.u8()
		case *uint32:
			*p = d.u32()
		case *uint64:
			*p = d.u64()
		case *[]byte:
			if fd.kind == ckData {
				*p = d.data()
			} else {
				*p = d.str()
			}
		case *[]CoordHolder:
			n := d.u32()
			if uint64(n) > uint64(len(d.b)/holderMin) {
				d.bad = true
				break
			}
			hs := make([]CoordHolder, 0, n)
			for i := uint32(0); i < n && !d.bad; i++ {
				hs = append(hs, CoordHolder{OrderID: d.u64(), Session: d.u64(), Count: d.u64(), TimeoutMs: d.u64(), Data: d.data()})
			}
			if n > 0 {
				*p = hs
			}
		case *[]CoordSession:
			n := d.u32()
			if uint64(n) > uint64(len(d.b)/sessionMin) {
				d.bad = true
				break
			}
			ss := make([]CoordSession, 0, n)
			for i := uint32(0); i < n && !d.bad; i++ {
				x := CoordSession{Session: d.u64(), SeqNo: d.u64(), TimeoutMs: d.u64(), Flags: d.u8(), Desc: d.str()}
				undefined |= x.Flags &^ CoordFlagAttached
				ss = append(ss, x)
			}
			if n > 0 {
				*p = ss
			}
		}
	}
	if d.bad {
		return errorf(CodeMalformedFrame, "%s sub-op %d body is shorter than its layout", f.Type, f.Op)
	}
	if len(d.b) != 0 {
		return errorf(CodeMalformedFrame, "%s sub-op %d body has %d trailing bytes", f.Type, f.Op, len(d.b))
	}
	if undefined != 0 {
		return errorf(CodeMalformedFrame, "%s sub-op %d: a listed session sets undefined flag bits %#x", f.Type, f.Op, undefined)
	}
	if mask, ok := coordFlagMask(reply, f.Op, f.Code); ok && c.Flags&^mask != 0 {
		return errorf(CodeMalformedFrame, "%s sub-op %d sets undefined flag bits %#x", f.Type, f.Op, c.Flags&^mask)
	}
	return nil
}

// coordSessionOp reports whether op is a session request, which may be
// sent with CoordForSession.
func coordSessionOp(op uint8) bool {
	return op >= CoordAttach && op <= CoordDescribeSemaphore
}

// coordFlagMask is the defined flag bits of a body that has flags.
func coordFlagMask(reply bool, op uint8, status uint16) (uint8, bool) {
	if reply && status != CoordSuccess {
		return 0, false
	}
	if !reply {
		op &^= CoordForSession
	}
	switch {
	case !reply && op == CoordDeleteSemaphore:
		return CoordFlagForce, true
	case !reply && op == CoordAcquire:
		return CoordFlagEphemeral, true
	case !reply && op == CoordDescribeSemaphore:
		return coordDescribeFlagsValid, true
	case reply && (op == CoordAcquire || op == CoordRelease):
		return 1, true
	case reply && op == CoordDescribeSemaphore:
		return CoordFlagEphemeral | CoordFlagMoreHolders, true
	case reply && op == CoordListSessions:
		return CoordFlagMore, true
	case reply && op == CoordChanged:
		return CoordFlagChangedData | CoordFlagChangedOwners, true
	}
	return 0, false
}

// CoordStatusName names a T status for messages ("NOT_FOUND").
func CoordStatusName(s uint16) string {
	names := [...]string{"SUCCESS", "NOT_FOUND", "ALREADY_EXISTS", "BAD_REQUEST", "PRECONDITION_FAILED",
		"ABORTED", "SESSION_EXPIRED", "BAD_SESSION", "UNAUTHORIZED", "LIMIT_EXCEEDED"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status %d", s)
}

// CoordConfirmsSession reports whether a final T answer with status moves
// its session's deadline (docs/protocol.md, "A coordination session's
// deadline"). Only statuses that a server sends after the request's commit
// (for a read, the commit of the entry it was read after) count: that
// commit proves the session's leader had the request. BAD_REQUEST,
// UNAUTHORIZED and LIMIT_EXCEEDED may be answered by a connection's reader
// or by the leader before any commit, so also by a leader that was deposed
// meanwhile; SESSION_EXPIRED and BAD_SESSION say that the session is not
// this connection's.
func CoordConfirmsSession(status uint16) bool {
	switch status {
	case CoordSuccess, CoordNotFound, CoordAlreadyExists, CoordPreconditionFailed, CoordAborted:
		return true
	}
	return false
}

// Exclusive and forever, as the u64 values of count and timeout_ms.
const (
	CoordExclusive   = math.MaxUint64
	CoordWaitForever = math.MaxUint64
)

// Why a session ended: the reason of a SessionEnded notification.
const (
	CoordEndExpired uint8 = 1 // timed out while detached
	CoordEndStopped uint8 = 2 // its client stopped it
	CoordEndDropped uint8 = 3 // its node was dropped
)
