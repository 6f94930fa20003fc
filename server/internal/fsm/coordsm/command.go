package coordsm

import "fmt"

// Kind is a coordination op's kind: its number is the kind byte of the op in
// a log entry, so it never changes. The fsm dispatcher owns the numbering of
// all kinds and checks that these do not collide with the ticket ones.
type Kind uint8

// The coordination op kinds and the fields of Op each one uses.
const (
	CreateNode Kind = 32 // Path, Config
	AlterNode  Kind = 33 // Path, Config (0 fields unchanged)
	DropNode   Kind = 34 // Path
	Attach     Kind = 35 // Path, Session (0 = start), SeqNo, Key, TimeoutMs, Desc
	Detach     Kind = 36 // Session, SeqNo: the attaching connection ended
	Expire     Kind = 37 // Session: leader-proposed, checked against ExpiresAt
	Stop       Kind = 38 // Session, SeqNo: ended by its client
	CreateSem  Kind = 39 // Session, SeqNo, Name, Limit, Data
	UpdateSem  Kind = 40 // Session, SeqNo, Name, Data
	DeleteSem  Kind = 41 // Session, SeqNo, Name, Force
	Acquire    Kind = 42 // Session, SeqNo, Name, Count, TimeoutMs, Data, Ephemeral
	Release    Kind = 43 // Session, SeqNo, Name
	Timeout    Kind = 44 // Session, Name, OrderID: leader-proposed, checked against the deadline
)

// A command is one kind of coordination op: the fields of Op its log entry
// carries and how it changes the state. Each lives in its own file.
type command struct {
	kind   Kind
	name   string
	fields fieldSet
	apply  func(a *applier, o *Op) Status
	doc    string // one sentence: what the op does (docs/design.md lists it)
}

// commands is every coordination op kind.
var commands = []*command{
	&cmdCreateNode, &cmdAlterNode, &cmdDropNode,
	&cmdAttach, &cmdDetach, &cmdExpire, &cmdStop,
	&cmdCreateSem, &cmdUpdateSem, &cmdDeleteSem, &cmdAcquire, &cmdRelease, &cmdTimeout,
}

var byKind = func() map[Kind]*command {
	m := make(map[Kind]*command, len(commands))
	for _, c := range commands {
		if m[c.kind] != nil {
			panic(fmt.Sprintf("coordsm: kind %d defined twice", c.kind))
		}
		m[c.kind] = c
	}
	return m
}()

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
