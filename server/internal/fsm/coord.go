package fsm

import (
	"math"

	"github.com/ticketing-io/ticketing/internal/wire"
	"slices"
	"sort"
	"strings"
)

// Coordination nodes (docs/coordination.md): nodes addressed by path, each
// with sessions and counting semaphores. The rules are those of the ticket
// state: pure, deterministic, time stamped by the leader. Unlike ticket
// waiters, semaphore waiters are replicated, so a session keeps its queue
// position across a dropped connection and a leader change.
//
// Coordination op kinds start at 32, apart from the ticket operations and the
// cluster identity operations (16 on), and stay below 0x80, which the
// authorization branch uses as a flag bit in the encoded kind byte.
const (
	OpCoordCreateNode OpKind = 32 // Path, Config
	OpCoordAlterNode  OpKind = 33 // Path, Config (0 fields unchanged)
	OpCoordDropNode   OpKind = 34 // Path
	OpCoordAttach     OpKind = 35 // Path, Session (0 = start), SeqNo, Key, TimeoutMs, Desc
	OpCoordDetach     OpKind = 36 // Session, SeqNo: the attaching connection ended
	OpCoordExpire     OpKind = 37 // Session: leader-proposed, checked against ExpiresAt
	OpCoordStop       OpKind = 38 // Session, SeqNo: ended by its client
	OpCoordCreateSem  OpKind = 39 // Session, SeqNo, Name, Limit, Data
	OpCoordUpdateSem  OpKind = 40 // Session, SeqNo, Name, Data
	OpCoordDeleteSem  OpKind = 41 // Session, SeqNo, Name, Force
	OpCoordAcquire    OpKind = 42 // Session, SeqNo, Name, Count, TimeoutMs, Data, Ephemeral
	OpCoordRelease    OpKind = 43 // Session, SeqNo, Name
	OpCoordTimeout    OpKind = 44 // Session, Name, OrderID: leader-proposed, checked against the deadline

	opCoordFirst = OpCoordCreateNode
	opCoordLast  = OpCoordTimeout
)

func isCoordKind(k OpKind) bool { return k >= opCoordFirst && k <= opCoordLast }

// Limits that are not part of a node's configuration (the sizes are the
// wire's, defined once there).
const (
	MaxCoordPath      = wire.MaxCoordPath
	MaxCoordName      = wire.MaxCoordName
	MaxCoordData      = wire.MaxCoordData
	MaxCoordDesc      = wire.MaxCoordDesc
	MaxCoordKey       = wire.MaxCoordKey
	MaxSessionTimeout = 30 * 60 * 1000 // ms
)

// Exclusive is the acquire count that takes a semaphore's whole limit; it is
// granted only when nothing is held. Shared holds use count 1.
const Exclusive = math.MaxUint64

// WaitForever as an acquire's TimeoutMs queues without a deadline.
const WaitForever = math.MaxUint64

// CoordStatus is the per-operation status of a coordination operation; the
// numbers are the wire's.
type CoordStatus uint16

const (
	CoordSuccess            CoordStatus = 0
	CoordNotFound           CoordStatus = 1
	CoordAlreadyExists      CoordStatus = 2
	CoordBadRequest         CoordStatus = 3
	CoordPreconditionFailed CoordStatus = 4
	CoordAborted            CoordStatus = 5
	CoordSessionExpired     CoordStatus = 6
	CoordBadSession         CoordStatus = 7
	CoordUnauthorized       CoordStatus = 8
	CoordLimitExceeded      CoordStatus = 9
)

func (c CoordStatus) String() string {
	switch c {
	case CoordSuccess:
		return "SUCCESS"
	case CoordNotFound:
		return "NOT_FOUND"
	case CoordAlreadyExists:
		return "ALREADY_EXISTS"
	case CoordBadRequest:
		return "BAD_REQUEST"
	case CoordPreconditionFailed:
		return "PRECONDITION_FAILED"
	case CoordAborted:
		return "ABORTED"
	case CoordSessionExpired:
		return "SESSION_EXPIRED"
	case CoordBadSession:
		return "BAD_SESSION"
	case CoordUnauthorized:
		return "UNAUTHORIZED"
	case CoordLimitExceeded:
		return "LIMIT_EXCEEDED"
	}
	return "UNKNOWN"
}

// Consistency modes of a node's configuration (0 = default in a create,
// unchanged in an alter).
const (
	ReadRelaxed   uint8 = 1
	ReadStrict    uint8 = 2
	AttachStrict  uint8 = 1
	AttachRelaxed uint8 = 2
)

// NodeConfig is a coordination node's configuration. In a create, a zero
// field takes its default; in an alter, a zero field is left unchanged.
type NodeConfig struct {
	SelfCheckMs   uint32 // default 1000
	GraceMs       uint32 // session grace period, default 10000, > SelfCheckMs
	ReadMode      uint8  // ReadRelaxed (default) or ReadStrict
	AttachMode    uint8  // AttachStrict (default) or AttachRelaxed
	MaxSessions   uint32 // default 10000
	MaxSemaphores uint32 // default 10000, persistent and ephemeral
	MaxWaiters    uint32 // default 10000, over all semaphores of the node
}

// DefaultNodeConfig is what a create with an all-zero config gets.
var DefaultNodeConfig = NodeConfig{SelfCheckMs: 1000, GraceMs: 10000, ReadMode: ReadRelaxed,
	AttachMode: AttachStrict, MaxSessions: 10000, MaxSemaphores: 10000, MaxWaiters: 10000}

// merge returns c with every non-zero field of o.
func (c NodeConfig) merge(o NodeConfig) NodeConfig {
	set32 := func(dst *uint32, v uint32) {
		if v != 0 {
			*dst = v
		}
	}
	set32(&c.SelfCheckMs, o.SelfCheckMs)
	set32(&c.GraceMs, o.GraceMs)
	set32(&c.MaxSessions, o.MaxSessions)
	set32(&c.MaxSemaphores, o.MaxSemaphores)
	set32(&c.MaxWaiters, o.MaxWaiters)
	if o.ReadMode != 0 {
		c.ReadMode = o.ReadMode
	}
	if o.AttachMode != 0 {
		c.AttachMode = o.AttachMode
	}
	return c
}

func (c NodeConfig) valid() bool {
	return c.SelfCheckMs > 0 && c.GraceMs > c.SelfCheckMs &&
		(c.ReadMode == ReadRelaxed || c.ReadMode == ReadStrict) &&
		(c.AttachMode == AttachStrict || c.AttachMode == AttachRelaxed) &&
		c.MaxSessions > 0 && c.MaxSemaphores > 0 && c.MaxWaiters > 0
}

// CoordOp is the payload of a coordination op. Only the fields of its kind
// (listed at the OpCoord* constants) are encoded; the others must be zero.
type CoordOp struct {
	Path      string
	Config    NodeConfig
	Session   uint64
	SeqNo     uint64
	Key       string // protection key, up to MaxCoordKey bytes
	TimeoutMs uint64 // attach: session timeout; acquire: queue timeout (0 = try once)
	Desc      string
	Name      string
	Limit     uint64
	Count     uint64
	Data      string
	Ephemeral bool
	Force     bool
	OrderID   uint64
}

// CoordEventKind says what happened to a party other than the op's requester.
type CoordEventKind uint8

const (
	EventGranted      CoordEventKind = 1 // a queued acquire was granted (OrderID, Count)
	EventAborted      CoordEventKind = 2 // a queued acquire ended ABORTED (replaced, released, force delete)
	EventTimedOut     CoordEventKind = 3 // a queued acquire's timeout passed (acquired = false)
	EventLost         CoordEventKind = 4 // an owner lost its hold (force delete)
	EventSessionEnded CoordEventKind = 5 // Reason: why
	EventChanged      CoordEventKind = 6 // a semaphore's Data and/or Owners changed (both when deleted)
)

// Why a session ended (EventSessionEnded.Reason).
const (
	EndExpired uint8 = 1 // timed out while detached
	EndStopped uint8 = 2 // its client stopped it
	EndDropped uint8 = 3 // its node was dropped (reported to clients as EXPIRED)
)

// CoordEvent is one consequence of an op for someone other than its
// requester. The leader turns them into answers and notifications.
type CoordEvent struct {
	Kind    CoordEventKind
	Path    string
	Session uint64
	Name    string
	OrderID uint64
	Count   uint64
	Reason  uint8 // EventSessionEnded
	Data    bool  // EventChanged
	Owners  bool  // EventChanged
}

// CoordResult is the outcome of a coordination op.
type CoordResult struct {
	Status   CoordStatus
	Session  uint64 // attach: the session id
	SeqNo    uint64 // attach: the session's seq_no now
	Acquired bool   // acquire: held now
	Queued   bool   // acquire: waiting in the queue
	OrderID  uint64 // acquire: the hold's or waiter's order id
	Count    uint64 // acquire: the count held (Exclusive taken as the limit)
	Changed  bool   // release: a hold or wait ended
	Events   []CoordEvent
}

// Holder is an owner or a waiter of a semaphore.
type Holder struct {
	OrderID   uint64
	Session   uint64
	Count     uint64 // owners: the count held; waiters: as asked (Exclusive possible)
	TimeoutMs uint64 // the acquire's timeout
	Data      string
	Deadline  int64 // waiters: batch time at which the leader may time it out
}

type coordSession struct {
	id        uint64
	node      string
	timeoutMs uint64
	desc      string
	key       string
	seqNo     uint64
	attached  bool
	expiresAt int64 // when detached: earliest batch time an expire may end it
	// detachedAt is the batch time of the detach (or of the takeover that
	// detached it): a later takeover counts the grace period from it, so
	// leader changes do not push the expiry further out.
	detachedAt int64
	sems       map[string]bool // semaphores it owns or waits on
}

type coordSem struct {
	name      string
	limit     uint64
	count     uint64 // sum of the owners' counts
	data      string
	ephemeral bool
	owners    []Holder // by order id
	waiters   []Holder // queue order (increasing order id)
	// version changes whenever data, owners or waiters change: it is drawn
	// from coordState.lastVersion, so it never repeats, even for a
	// semaphore deleted and created again. Paged describes compare it.
	version uint64
}

type coordNode struct {
	path     string
	cfg      NodeConfig
	sessions map[uint64]*coordSession
	sems     map[string]*coordSem
	waiters  int // over all semaphores
}

type coordState struct {
	lastSession uint64
	lastVersion uint64 // the last semaphore version drawn
	nodes       map[string]*coordNode
	sessions    map[uint64]*coordSession
}

func newCoordState() *coordState {
	return &coordState{nodes: make(map[string]*coordNode), sessions: make(map[uint64]*coordSession)}
}

func (c *coordState) empty() bool { return c.lastSession == 0 && len(c.nodes) == 0 }

// touch gives sem a new version: its data, owners or waiters changed.
func (c *coordState) touch(sem *coordSem) {
	c.lastVersion++
	sem.version = c.lastVersion
}

func (c *coordState) clone() *coordState {
	n := &coordState{lastSession: c.lastSession, lastVersion: c.lastVersion, nodes: make(map[string]*coordNode, len(c.nodes)),
		sessions: make(map[uint64]*coordSession, len(c.sessions))}
	for p, node := range c.nodes {
		cn := &coordNode{path: node.path, cfg: node.cfg, waiters: node.waiters,
			sessions: make(map[uint64]*coordSession, len(node.sessions)), sems: make(map[string]*coordSem, len(node.sems))}
		for id, s := range node.sessions {
			cs := *s
			cs.sems = make(map[string]bool, len(s.sems))
			for k := range s.sems {
				cs.sems[k] = true
			}
			cn.sessions[id] = &cs
			n.sessions[id] = &cs
		}
		for name, sem := range node.sems {
			cp := *sem
			cp.owners = slices.Clone(sem.owners)
			cp.waiters = slices.Clone(sem.waiters)
			cn.sems[name] = &cp
		}
		n.nodes[p] = cn
	}
	return n
}

func validPath(p string) bool {
	if len(p) < 2 || len(p) > MaxCoordPath || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	return !strings.Contains(p, "//")
}

// ValidCoordPath reports whether p is a node path: '/' and non-empty
// components separated by single '/', at most MaxCoordPath bytes.
func ValidCoordPath(p string) bool { return validPath(p) }

func validName(n string) bool { return len(n) >= 1 && len(n) <= MaxCoordName }

// applyCoord applies one coordination op. The returned Result is Done with
// the per-operation status in Coord, or Invalid when the op has no payload.
func (s *State) applyCoord(now int64, op *Op) Result {
	if op.Coord == nil {
		return Result{Status: Invalid}
	}
	r := &CoordResult{}
	r.Status = s.coordOp(now, op.Kind, op.Coord, r)
	return Result{Status: Done, Coord: r}
}

func (s *State) coordOp(now int64, kind OpKind, o *CoordOp, r *CoordResult) CoordStatus {
	c := s.coord
	switch kind {
	case OpCoordCreateNode:
		if !validPath(o.Path) {
			return CoordBadRequest
		}
		if c.nodes[o.Path] != nil {
			return CoordAlreadyExists
		}
		cfg := DefaultNodeConfig.merge(o.Config)
		if !cfg.valid() {
			return CoordBadRequest
		}
		c.nodes[o.Path] = &coordNode{path: o.Path, cfg: cfg,
			sessions: make(map[uint64]*coordSession), sems: make(map[string]*coordSem)}
		return CoordSuccess
	case OpCoordAlterNode:
		n := c.nodes[o.Path]
		if n == nil {
			return CoordNotFound
		}
		cfg := n.cfg.merge(o.Config)
		if !cfg.valid() {
			return CoordBadRequest
		}
		n.cfg = cfg
		return CoordSuccess
	case OpCoordDropNode:
		n := c.nodes[o.Path]
		if n == nil {
			return CoordNotFound
		}
		c.dropNode(n, r)
		return CoordSuccess
	case OpCoordAttach:
		return c.attach(o, r)
	case OpCoordDetach, OpCoordStop:
		ss := c.sessions[o.Session]
		if ss == nil {
			return CoordSessionExpired
		}
		if ss.seqNo != o.SeqNo {
			return CoordBadSession
		}
		if kind == OpCoordStop {
			s.endSession(ss, EndStopped, r)
		} else if ss.attached {
			ss.attached = false
			ss.expiresAt = addMs(now, ss.timeoutMs)
			ss.detachedAt = now
		}
		return CoordSuccess
	case OpCoordExpire:
		ss := c.sessions[o.Session]
		if ss == nil {
			return CoordSessionExpired
		}
		if ss.attached || now < ss.expiresAt {
			return CoordPreconditionFailed
		}
		s.endSession(ss, EndExpired, r)
		return CoordSuccess
	case OpCoordTimeout:
		return s.timeoutWaiter(now, o, r)
	}
	// Semaphore operations act for a session through its current attach.
	ss := c.sessions[o.Session]
	if ss == nil {
		return CoordSessionExpired
	}
	if ss.seqNo != o.SeqNo {
		return CoordBadSession
	}
	if !validName(o.Name) || len(o.Data) > MaxCoordData {
		return CoordBadRequest
	}
	n := c.nodes[ss.node]
	sem := n.sems[o.Name]
	switch kind {
	case OpCoordCreateSem:
		if o.Limit == 0 {
			return CoordBadRequest
		}
		if sem != nil {
			return CoordAlreadyExists
		}
		if len(n.sems) >= int(n.cfg.MaxSemaphores) {
			return CoordLimitExceeded
		}
		sem = &coordSem{name: o.Name, limit: o.Limit, data: o.Data}
		c.touch(sem)
		n.sems[o.Name] = sem
		return CoordSuccess
	case OpCoordUpdateSem:
		if sem == nil {
			return CoordNotFound
		}
		sem.data = o.Data
		c.touch(sem)
		r.changed(n.path, sem.name, true, false)
		return CoordSuccess
	case OpCoordDeleteSem:
		if sem == nil {
			return CoordNotFound
		}
		if (len(sem.owners) > 0 || len(sem.waiters) > 0) && !o.Force {
			return CoordPreconditionFailed
		}
		for _, w := range sem.waiters {
			r.event(CoordEvent{Kind: EventAborted, Path: n.path, Session: w.Session, Name: sem.name, OrderID: w.OrderID})
			delete(c.sessions[w.Session].sems, sem.name)
		}
		for _, h := range sem.owners {
			r.event(CoordEvent{Kind: EventLost, Path: n.path, Session: h.Session, Name: sem.name, OrderID: h.OrderID, Count: h.Count})
			delete(c.sessions[h.Session].sems, sem.name)
		}
		n.waiters -= len(sem.waiters)
		delete(n.sems, sem.name)
		r.changed(n.path, sem.name, true, true)
		return CoordSuccess
	case OpCoordAcquire:
		return s.acquire(now, n, ss, sem, o, r)
	case OpCoordRelease:
		if sem == nil {
			return CoordSuccess // nothing to release: Changed stays false
		}
		if i := holderIndex(sem.owners, ss.id); i >= 0 {
			sem.count -= sem.owners[i].Count
			sem.owners = slices.Delete(sem.owners, i, i+1)
			r.changed(n.path, sem.name, false, true)
		} else if i := holderIndex(sem.waiters, ss.id); i >= 0 {
			r.event(CoordEvent{Kind: EventAborted, Path: n.path, Session: ss.id, Name: sem.name, OrderID: sem.waiters[i].OrderID})
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
		} else {
			return CoordSuccess
		}
		r.Changed = true
		c.touch(sem)
		delete(ss.sems, sem.name)
		s.pump(n, sem, 0, r)
		return CoordSuccess
	}
	return CoordBadRequest
}

func (c *coordState) attach(o *CoordOp, r *CoordResult) CoordStatus {
	if !validPath(o.Path) || o.TimeoutMs == 0 || o.TimeoutMs > MaxSessionTimeout ||
		len(o.Desc) > MaxCoordDesc || len(o.Key) > MaxCoordKey {
		return CoordBadRequest
	}
	n := c.nodes[o.Path]
	if n == nil {
		return CoordNotFound
	}
	var ss *coordSession
	if o.Session == 0 {
		if len(n.sessions) >= int(n.cfg.MaxSessions) {
			return CoordLimitExceeded
		}
		c.lastSession++
		ss = &coordSession{id: c.lastSession, node: n.path, key: o.Key, sems: make(map[string]bool)}
		n.sessions[ss.id] = ss
		c.sessions[ss.id] = ss
	} else {
		ss = n.sessions[o.Session]
		if ss == nil {
			return CoordSessionExpired
		}
		if ss.key != o.Key || o.SeqNo < ss.seqNo {
			return CoordBadSession
		}
	}
	ss.seqNo = o.SeqNo
	ss.timeoutMs = o.TimeoutMs
	ss.desc = o.Desc
	ss.attached = true
	ss.expiresAt, ss.detachedAt = 0, 0
	r.Session, r.SeqNo = ss.id, ss.seqNo
	return CoordSuccess
}

// takeover runs in the new leader's takeover entry: the connections that
// attached sessions were to the old leader, so every attached session is
// detached now. No session may expire before its timeout plus the node's
// grace period from its detach (the grace covers the leaders' clock
// differences and an old leader still answering for a moment): an attached
// one from now, a detached one from its recorded detach, so that however
// many leader changes follow, a detached session expires within timeout +
// grace of its detach.
func (c *coordState) takeover(now int64) {
	for _, ss := range c.sessions {
		if ss.attached {
			ss.attached = false
			ss.detachedAt = now
		}
		if e := addMs(ss.detachedAt, ss.timeoutMs+uint64(c.nodes[ss.node].cfg.GraceMs)); e > ss.expiresAt {
			ss.expiresAt = e
		}
	}
}

func holderIndex(hs []Holder, session uint64) int {
	for i := range hs {
		if hs[i].Session == session {
			return i
		}
	}
	return -1
}

func effective(count, limit uint64) uint64 {
	if count == Exclusive {
		return limit
	}
	return count
}

func fits(sem *coordSem, count uint64) bool {
	if count == Exclusive {
		return sem.count == 0
	}
	return count <= sem.limit-sem.count
}

// addMs is now + ms, saturating (WaitForever never comes due).
func addMs(now int64, ms uint64) int64 {
	if ms > math.MaxInt64 || now > math.MaxInt64-int64(ms) {
		return math.MaxInt64
	}
	return now + int64(ms)
}

func (s *State) acquire(now int64, n *coordNode, ss *coordSession, sem *coordSem, o *CoordOp, r *CoordResult) CoordStatus {
	if o.Count == 0 {
		return CoordBadRequest
	}
	if sem == nil {
		if !o.Ephemeral {
			return CoordNotFound
		}
		if len(n.sems) >= int(n.cfg.MaxSemaphores) {
			return CoordLimitExceeded
		}
		// An empty new semaphore grants any count: it is never left empty.
		sem = &coordSem{name: o.Name, limit: math.MaxUint64, ephemeral: true}
		s.coord.touch(sem)
		n.sems[o.Name] = sem
	}
	if o.Count != Exclusive && o.Count > sem.limit {
		return CoordBadRequest
	}
	eff := effective(o.Count, sem.limit)
	if i := holderIndex(sem.owners, ss.id); i >= 0 {
		h := &sem.owners[i]
		if eff > h.Count {
			return CoordBadRequest
		}
		lowered := eff < h.Count
		sem.count -= h.Count - eff
		h.Count, h.Data, h.TimeoutMs = eff, o.Data, o.TimeoutMs
		s.coord.touch(sem)
		r.Acquired, r.OrderID, r.Count = true, h.OrderID, eff
		r.changed(n.path, sem.name, false, true)
		if lowered {
			s.pump(n, sem, 0, r)
		}
		return CoordSuccess
	}
	if i := holderIndex(sem.waiters, ss.id); i >= 0 {
		w := &sem.waiters[i]
		r.event(CoordEvent{Kind: EventAborted, Path: n.path, Session: ss.id, Name: sem.name, OrderID: w.OrderID})
		w.Count, w.Data, w.TimeoutMs, w.Deadline = o.Count, o.Data, o.TimeoutMs, addMs(now, o.TimeoutMs)
		s.coord.touch(sem)
		r.OrderID = w.OrderID
		s.pump(n, sem, w.OrderID, r)
		if j := holderIndex(sem.owners, ss.id); j >= 0 {
			r.Acquired, r.Count = true, sem.owners[j].Count
			return CoordSuccess
		}
		if o.TimeoutMs == 0 {
			i = holderIndex(sem.waiters, ss.id)
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
			delete(ss.sems, sem.name)
			s.pump(n, sem, 0, r) // it may have been blocking the head
			s.dropIfUnused(n, sem, r)
			return CoordSuccess
		}
		r.Queued = true
		return CoordSuccess
	}
	if len(sem.waiters) == 0 && fits(sem, o.Count) {
		s.lastToken++
		sem.owners = append(sem.owners, Holder{OrderID: s.lastToken, Session: ss.id, Count: eff, TimeoutMs: o.TimeoutMs, Data: o.Data})
		s.coord.touch(sem)
		sem.count += eff
		ss.sems[sem.name] = true
		r.Acquired, r.OrderID, r.Count = true, s.lastToken, eff
		r.changed(n.path, sem.name, false, true)
		return CoordSuccess
	}
	if o.TimeoutMs == 0 {
		return CoordSuccess // tried once: not acquired, not queued
	}
	if n.waiters >= int(n.cfg.MaxWaiters) {
		return CoordLimitExceeded
	}
	s.lastToken++
	sem.waiters = append(sem.waiters, Holder{OrderID: s.lastToken, Session: ss.id, Count: o.Count,
		TimeoutMs: o.TimeoutMs, Data: o.Data, Deadline: addMs(now, o.TimeoutMs)})
	n.waiters++
	s.coord.touch(sem)
	ss.sems[sem.name] = true
	r.Queued, r.OrderID = true, s.lastToken
	return CoordSuccess
}

// pump grants waiters from the head of the queue while the head fits: strict
// FIFO with head-of-line blocking. A grant to order id self (the requester of
// this op, answered directly) is not reported as an event.
func (s *State) pump(n *coordNode, sem *coordSem, self uint64, r *CoordResult) {
	granted := false
	for len(sem.waiters) > 0 && fits(sem, sem.waiters[0].Count) {
		w := sem.waiters[0]
		sem.waiters = slices.Delete(sem.waiters, 0, 1)
		n.waiters--
		w.Count = effective(w.Count, sem.limit)
		w.Deadline = 0
		sem.count += w.Count
		// Every owner was granted before this waiter queued (grants follow
		// the queue), so appending keeps owners in order-id order.
		sem.owners = append(sem.owners, w)
		granted = true
		if w.OrderID != self {
			r.event(CoordEvent{Kind: EventGranted, Path: n.path, Session: w.Session, Name: sem.name, OrderID: w.OrderID, Count: w.Count})
		}
	}
	if granted {
		s.coord.touch(sem)
		r.changed(n.path, sem.name, false, true)
	}
	s.dropIfUnused(n, sem, r)
}

// dropIfUnused deletes an ephemeral semaphore nobody holds or waits for.
func (s *State) dropIfUnused(n *coordNode, sem *coordSem, r *CoordResult) {
	if sem.ephemeral && len(sem.owners) == 0 && len(sem.waiters) == 0 && n.sems[sem.name] == sem {
		delete(n.sems, sem.name)
		r.changed(n.path, sem.name, true, true)
	}
}

func (s *State) timeoutWaiter(now int64, o *CoordOp, r *CoordResult) CoordStatus {
	ss := s.coord.sessions[o.Session]
	if ss == nil {
		return CoordSessionExpired
	}
	n := s.coord.nodes[ss.node]
	sem := n.sems[o.Name]
	if sem == nil {
		return CoordPreconditionFailed
	}
	i := holderIndex(sem.waiters, ss.id)
	if i < 0 || sem.waiters[i].OrderID != o.OrderID || now < sem.waiters[i].Deadline {
		return CoordPreconditionFailed
	}
	r.event(CoordEvent{Kind: EventTimedOut, Path: n.path, Session: ss.id, Name: sem.name, OrderID: o.OrderID})
	sem.waiters = slices.Delete(sem.waiters, i, i+1)
	n.waiters--
	s.coord.touch(sem)
	delete(ss.sems, sem.name)
	s.pump(n, sem, 0, r)
	return CoordSuccess
}

// endSession releases every hold and drops every wait of ss, then hands the
// semaphores it left to their waiters, all in this one entry.
func (s *State) endSession(ss *coordSession, reason uint8, r *CoordResult) {
	n := s.coord.nodes[ss.node]
	names := make([]string, 0, len(ss.sems))
	for name := range ss.sems {
		names = append(names, name)
	}
	sort.Strings(names)
	r.event(CoordEvent{Kind: EventSessionEnded, Path: n.path, Session: ss.id, Reason: reason})
	for _, name := range names {
		sem := n.sems[name]
		s.coord.touch(sem)
		if i := holderIndex(sem.owners, ss.id); i >= 0 {
			sem.count -= sem.owners[i].Count
			sem.owners = slices.Delete(sem.owners, i, i+1)
			r.changed(n.path, name, false, true)
		} else if i := holderIndex(sem.waiters, ss.id); i >= 0 {
			sem.waiters = slices.Delete(sem.waiters, i, i+1)
			n.waiters--
		}
	}
	delete(n.sessions, ss.id)
	delete(s.coord.sessions, ss.id)
	for _, name := range names {
		s.pump(n, n.sems[name], 0, r)
	}
}

// dropNode ends every session of n (told EXPIRED) and deletes its semaphores.
// No grants are made: everyone who could be granted is ending too.
func (c *coordState) dropNode(n *coordNode, r *CoordResult) {
	ids := make([]uint64, 0, len(n.sessions))
	for id := range n.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.event(CoordEvent{Kind: EventSessionEnded, Path: n.path, Session: id, Reason: EndDropped})
		delete(c.sessions, id)
	}
	names := make([]string, 0, len(n.sems))
	for name := range n.sems {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r.changed(n.path, name, true, true)
	}
	delete(c.nodes, n.path)
}

func (r *CoordResult) event(e CoordEvent) { r.Events = append(r.Events, e) }

// changed records a semaphore change once per op, merging the flags.
func (r *CoordResult) changed(path, name string, data, owners bool) {
	for i := range r.Events {
		e := &r.Events[i]
		if e.Kind == EventChanged && e.Path == path && e.Name == name {
			e.Data = e.Data || data
			e.Owners = e.Owners || owners
			return
		}
	}
	r.event(CoordEvent{Kind: EventChanged, Path: path, Name: name, Data: data, Owners: owners})
}

// NodeInfo describes a coordination node.
type NodeInfo struct {
	Path       string
	Config     NodeConfig
	Sessions   int
	Semaphores int
	Waiters    int
}

// DescribeNode returns the node at path, if any.
func (s *State) DescribeNode(path string) (NodeInfo, bool) {
	n := s.coord.nodes[path]
	if n == nil {
		return NodeInfo{}, false
	}
	return NodeInfo{Path: n.path, Config: n.cfg, Sessions: len(n.sessions), Semaphores: len(n.sems), Waiters: n.waiters}, true
}

// SessionInfo describes a session (without its protection key).
type SessionInfo struct {
	ID         uint64
	Path       string
	SeqNo      uint64
	TimeoutMs  uint64
	Desc       string
	Attached   bool
	ExpiresAt  int64 // when detached
	DetachedAt int64 // when detached: the batch time of its detach (or of the takeover that detached it)
}

func (ss *coordSession) info() SessionInfo {
	return SessionInfo{ID: ss.id, Path: ss.node, SeqNo: ss.seqNo, TimeoutMs: ss.timeoutMs, Desc: ss.desc, Attached: ss.attached,
		ExpiresAt: ss.expiresAt, DetachedAt: ss.detachedAt}
}

// Session returns session id, if it exists.
func (s *State) Session(id uint64) (SessionInfo, bool) {
	ss := s.coord.sessions[id]
	if ss == nil {
		return SessionInfo{}, false
	}
	return ss.info(), true
}

// Sessions returns every session, of the node at path or of all nodes when
// path is empty, by id.
func (s *State) Sessions(path string) []SessionInfo {
	out := make([]SessionInfo, 0)
	for _, ss := range s.coord.sessions {
		if path == "" || ss.node == path {
			out = append(out, ss.info())
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmpU64(a.ID, b.ID) })
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SemaphoreInfo describes a semaphore.
type SemaphoreInfo struct {
	Name      string
	Limit     uint64
	Count     uint64
	Data      string
	Ephemeral bool
	Owners    []Holder // by order id, when asked for
	Waiters   []Holder // in queue order, when asked for
	Version   uint64   // changes whenever Data, Owners or Waiters change
}

// DescribeSemaphore returns the semaphore name of the node at path:
// NOT_FOUND if either is missing.
func (s *State) DescribeSemaphore(path, name string, owners, waiters bool) (SemaphoreInfo, CoordStatus) {
	n := s.coord.nodes[path]
	if n == nil {
		return SemaphoreInfo{}, CoordNotFound
	}
	sem := n.sems[name]
	if sem == nil {
		return SemaphoreInfo{}, CoordNotFound
	}
	info := SemaphoreInfo{Name: sem.name, Limit: sem.limit, Count: sem.count, Data: sem.data, Ephemeral: sem.ephemeral, Version: sem.version}
	if owners {
		info.Owners = slices.Clone(sem.owners)
	}
	if waiters {
		info.Waiters = slices.Clone(sem.waiters)
	}
	return info, CoordSuccess
}

// CoordWaiters calls fn for every queued acquire, by node path, semaphore
// name and queue order, so a new leader can arm their timeouts.
func (s *State) CoordWaiters(fn func(path, name string, w Holder)) {
	for _, p := range sortedKeys(s.coord.nodes) {
		n := s.coord.nodes[p]
		for _, name := range sortedKeys(n.sems) {
			for _, w := range n.sems[name].waiters {
				fn(p, name, w)
			}
		}
	}
}
