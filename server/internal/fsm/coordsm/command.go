package coordsm

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Kind is a coordination op's kind: its number is the kind byte of the op in
// a log entry, so it never changes. Each command's file defines its kind;
// the fsm dispatcher owns the numbering of all kinds and checks that these
// do not collide with the ticket ones (docs/design.md lists them all).
type Kind uint8

// A command is one kind of coordination op: the fields of Op its log entry
// carries, how it changes the state, and the client request that asks for
// it. Each lives in its own file.
type command struct {
	kind   Kind
	name   string
	fields fieldSet
	apply  func(a *applier, o *Op) Status
	doc    string // one sentence: what the op does (docs/design.md lists it)

	// request is the wire sub-op with which a client asks for the op (its
	// answer carries the same); 0 for the ops only the leader proposes.
	request uint8
	// inSession: the request acts for a session its connection attached,
	// so the op's Session and SeqNo are that attach's, which the leader
	// fills in, never the request's.
	inSession bool
	// build makes the op from a decoded request, Session and SeqNo aside
	// when inSession. It sets only fields the kind encodes.
	build func(b *wire.Coord) Op
}

// The registry: every command registers itself from its own file (its
// kind constant, its command and an init calling register), so that adding
// one touches no list here.
var (
	commands  []*command // in kind order
	byKind    = map[Kind]*command{}
	byRequest = map[uint8]*command{}
)

// register adds c; a kind or a request sub-op taken twice is a programming
// error, found when the package loads.
func register(c *command) {
	if byKind[c.kind] != nil {
		panic(fmt.Sprintf("coordsm: kind %d is both %s and %s", c.kind, byKind[c.kind].name, c.name))
	}
	if c.request != 0 {
		if byRequest[c.request] != nil {
			panic(fmt.Sprintf("coordsm: request sub-op %d asks for %s and %s", c.request, byRequest[c.request].name, c.name))
		}
		byRequest[c.request] = c
	}
	byKind[c.kind] = c
	i, _ := slices.BinarySearchFunc(commands, c.kind, func(x *command, k Kind) int { return cmp.Compare(x.kind, k) })
	commands = slices.Insert(commands, i, c)
}

// Request is how a client's request becomes an op: the leader looks it up
// by the request's sub-op (ForRequest) instead of knowing every command.
type Request struct {
	Kind Kind
	// InSession: the request acts for a session its connection attached;
	// the op's Session and SeqNo are that attach's, set by the caller.
	InSession bool
	build     func(b *wire.Coord) Op
}

// Build makes the op of decoded request b (Session and SeqNo left zero when
// InSession).
func (r Request) Build(b *wire.Coord) Op { return r.build(b) }

// ForRequest returns the command that request sub-op op asks for; false
// when op asks for no command (a read, or not a request).
func ForRequest(op uint8) (Request, bool) {
	c := byRequest[op]
	if c == nil {
		return Request{}, false
	}
	return Request{Kind: c.kind, InSession: c.inSession, build: c.build}, true
}

// RequestOf is the sub-op of the request that asks for kind, which its
// answer carries; 0 for the ops only the leader proposes (detach, expire,
// timeout).
func RequestOf(kind Kind) uint8 {
	if c := byKind[kind]; c != nil {
		return c.request
	}
	return 0
}

// configOf is the node configuration a create or alter request carries.
func configOf(b *wire.Coord) NodeConfig {
	return NodeConfig{SelfCheckMs: b.SelfCheckMs, GraceMs: b.GraceMs, ReadMode: b.ReadMode, AttachMode: b.AttachMode,
		MaxSessions: b.MaxSessions, MaxSemaphores: b.MaxSemaphores, MaxWaiters: b.MaxWaiters}
}

// KindInfo describes one op kind, for the dispatcher's registry and the docs.
type KindInfo struct {
	Kind Kind
	Name string // as in the docs, e.g. "attach"
	Doc  string // one sentence
}

// Kinds lists every coordination op kind, in kind order.
func Kinds() []KindInfo {
	out := make([]KindInfo, 0, len(commands))
	for _, c := range commands {
		out = append(out, KindInfo{Kind: c.kind, Name: c.name, Doc: c.doc})
	}
	return out
}

// IsKind reports whether k is a coordination op kind.
func IsKind(k uint8) bool { return byKind[Kind(k)] != nil }

// applier is one op being applied: the state, the leader-stamped time, the
// token counter shared with tickets and the result being built.
type applier struct {
	c   *State
	now int64
	// tokens is the fencing-token counter the dispatcher owns: tickets and
	// coordination draw from it, so an order id is a fencing token too.
	tokens *uint64
	r      *Result
}

// nextToken draws the next fencing token.
func (a *applier) nextToken() uint64 {
	*a.tokens++
	return *a.tokens
}

// Apply applies one coordination op of kind at batch time now. tokens is
// the fencing-token counter shared with tickets: an acquire that grants or
// queues draws its order id from it. An unknown kind is BadRequest.
func (c *State) Apply(now int64, kind Kind, o *Op, tokens *uint64) *Result {
	r := &Result{}
	cmd := byKind[kind]
	if cmd == nil {
		r.Status = BadRequest
		return r
	}
	r.Status = cmd.apply(&applier{c: c, now: now, tokens: tokens, r: r}, o)
	return r
}

// onSemaphore runs fn for a semaphore operation, which acts for a session
// through its current attach: the session must exist at its seq_no, and the
// name and data must be valid. sem is nil when the node has no such
// semaphore.
func onSemaphore(fn func(a *applier, n *node, ss *session, sem *semaphore, o *Op) Status) func(a *applier, o *Op) Status {
	return func(a *applier, o *Op) Status {
		ss := a.c.sessions[o.Session]
		if ss == nil {
			return SessionExpired
		}
		if ss.seqNo != o.SeqNo {
			return BadSession
		}
		if !validName(o.Name) || len(o.Data) > MaxData {
			return BadRequest
		}
		n := a.c.nodes[ss.node]
		return fn(a, n, ss, n.sems[o.Name], o)
	}
}
