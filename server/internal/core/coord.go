package core

import (
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// Coordination nodes on the leader (docs/coordination.md). Everything that
// changes sessions or semaphores is an fsm op committed through Raft, like
// tickets; the leader keeps only what belongs to connections: which
// connection is attached to which session, the acquires waiting for their
// final answer, the watches, and the deadlines (session expiry, waiter
// timeout) it proposes when due. The state machine checks each deadline
// again, so a stale proposal changes nothing.
//
// A leader that loses its quorum cannot commit anything, so it cannot act on
// sessions; Raft's leader lease (heartbeat_timeout / 2) makes it step down
// long before a node's session grace period (default 10 s) lets a new
// leader expire a session.

// coordCore is the core's coordination state; the core's goroutine owns it.
// Which connection carries which session is apart (sessions.go).
type coordCore struct {
	pending map[coordKey]*coordAcq // acquires queued in the state machine, awaiting their answer
	watches map[semKey]map[uint64]*coordWatch
	expiry  map[uint64]*timer // session id -> its expiry deadline
}

type coordKey struct {
	session uint64
	name    string
}

type semKey struct{ path, name string }

type coordAcq struct {
	c     Replier
	id    uint32
	order uint64
	timer *timer
}

type coordWatch struct {
	c            Replier
	id           uint32
	data, owners bool
}

func (co *coordCore) reset() {
	co.pending = make(map[coordKey]*coordAcq)
	co.watches = make(map[semKey]map[uint64]*coordWatch)
	co.expiry = make(map[uint64]*timer)
}

// AnswerCoord finishes coordination request id (sub-op op) on cn with
// status and, on success, body; a refusal without a message of its own says
// what the status means.
func AnswerCoord(cn Replier, id uint32, op uint8, status uint16, body *wire.Coord) {
	if body == nil {
		body = &wire.Coord{}
	}
	if status != wire.CoordSuccess && len(body.Message) == 0 {
		body.Message = []byte(coordMessage(status))
	}
	cn.Finish(id, wire.CoordFrame(true, id, op, status, body))
}

// coordMessage says what a status means and what to do about it.
func coordMessage(status uint16) string {
	switch status {
	case wire.CoordNotFound:
		return "the node or semaphore does not exist: create it first, or check the path and name"
	case wire.CoordAlreadyExists:
		return "it already exists: describe it, or delete it first"
	case wire.CoordBadRequest:
		return "a field is out of range (path, name, count, limit, size, timeout or configuration): see docs/coordination.md"
	case wire.CoordPreconditionFailed:
		return "the semaphore has owners or waiters: delete it with force, or release it first"
	case wire.CoordAborted:
		return "the acquire was replaced by a later one of this session, released, or its semaphore was force-deleted"
	case wire.CoordSessionExpired:
		return "the session does not exist any more: start a new one"
	case wire.CoordBadSession:
		return "the session was attached by a newer connection, or the protection key is wrong: attach again with a higher seq_no"
	case wire.CoordLimitExceeded:
		return "a limit of the node is reached (sessions, semaphores or waiters): free some, or raise it with an alter"
	}
	return wire.CoordStatusName(status)
}

func (c *Core) coordPropose(r Request, kind coordsm.Kind, o *coordsm.Op) {
	c.pending.add(fsm.Op{Kind: fsm.OpKind(kind), Coord: o}, cause{kind: causeCoord, c: r.Conn, id: r.ID, principal: r.Principal, forSession: r.ForSession})
}

// coordProposeOwn adds an op the leader proposes itself (a detach, an
// expiry, a waiter's timeout): nobody waits for its answer.
func (c *Core) coordProposeOwn(kind coordsm.Kind, o *coordsm.Op) {
	c.pending.add(fsm.Op{Kind: fsm.OpKind(kind), Coord: o}, cause{kind: causeCoord})
}

// coordRequest turns a K request, decoded and checked by the reader, into
// an fsm op or a read for the batch. The reads (describe node, list
// sessions, describe semaphore) are the core's own; every other request
// asks for the coordsm command that declares its sub-op, which says how
// the request becomes its op.
func (c *Core) coordRequest(r Request) {
	b := r.Coord
	switch r.Op {
	case wire.CoordDescribeNode:
		path := string(b.Path)
		c.pending.addRead(readReq{c: r.Conn, id: r.ID, fn: func(st *fsm.State) {
			n, ok := st.DescribeNode(path)
			if !ok {
				AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordNotFound, nil)
				return
			}
			AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordSuccess, &wire.Coord{SelfCheckMs: n.Config.SelfCheckMs, GraceMs: n.Config.GraceMs,
				ReadMode: n.Config.ReadMode, AttachMode: n.Config.AttachMode, MaxSessions: n.Config.MaxSessions,
				MaxSemaphores: n.Config.MaxSemaphores, MaxWaiters: n.Config.MaxWaiters,
				Sessions: uint32(n.Sessions), Semaphores: uint32(n.Semaphores), Waiters: uint32(n.Waiters)})
		}})
		return
	case wire.CoordListSessions:
		path, after := string(b.Path), b.After
		c.pending.reads = append(c.pending.reads, readReq{c: r.Conn, id: r.ID, fn: func(st *fsm.State) {
			if _, ok := st.DescribeNode(path); !ok {
				AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordNotFound, nil)
				return
			}
			AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordSuccess, listSessions(st.Sessions(path), after))
		}})
		return
	case wire.CoordAttach:
		if msg := c.sessions.mixed(r.Conn, r.ForSession); msg != "" {
			AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordBadSession, &wire.Coord{Message: []byte(msg)})
			return
		}
		c.sessions.declare(r.Conn, r.ForSession)
		cur := c.sessions.attached(r.Conn, r.ForSession, b.Session)
		if cur != nil && cur.session != b.Session {
			AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordBadRequest, &wire.Coord{Message: []byte("this connection is attached to another session: a connection carries one session unless its requests name their session (docs/protocol.md, Coordination frames)")})
			return
		}
		if q, ok := c.sessionRoom(r.Principal); cur == nil && !ok {
			AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordLimitExceeded, &wire.Coord{Message: []byte(quotaMessage(r.Principal, QuotaSessions, q))})
			return
		}
	}
	cmd, known := coordsm.ForRequest(r.Op)
	if known && !cmd.InSession {
		o := cmd.Build(b)
		c.coordPropose(r, cmd.Kind, &o)
		return
	}
	bind, msg := c.sessions.of(r.Conn, r.ForSession, b.Session)
	if bind == nil {
		AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordBadSession, &wire.Coord{Message: []byte(msg)})
		return
	}
	if r.Op != wire.CoordStop && r.Op != wire.CoordRelease {
		// The session's node, with the principal's current rights (a reload
		// may have taken the node away). Giving up (release, stop) is
		// always allowed.
		if !r.Conn.AllowCoord(r.ID, r.Op, bind.path) {
			return
		}
	}
	switch {
	case known:
		o := cmd.Build(b)
		o.Session, o.SeqNo = bind.session, bind.seq
		c.coordPropose(r, cmd.Kind, &o)
	case r.Op == wire.CoordDescribeSemaphore:
		c.coordDescribeSem(r, bind, string(b.Name), b.Flags, b.After)
	default:
		AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordBadRequest, &wire.Coord{Message: []byte("not a request sub-op")})
	}
}

// coordDescribeSem answers one page from the applied state after the batch
// it is in (so a connection reads its own writes) and sets the watch, if
// asked.
func (c *Core) coordDescribeSem(r Request, bind *binding, name string, flags uint8, after uint64) {
	c.pending.addRead(readReq{c: r.Conn, id: r.ID, fn: func(st *fsm.State) {
		info, status := st.DescribeSemaphore(bind.path, name, flags&wire.CoordFlagOwners != 0, flags&wire.CoordFlagWaiters != 0)
		if status != coordsm.Success {
			AnswerCoord(r.Conn, r.ID, r.Op, uint16(status), nil)
			return
		}
		AnswerCoord(r.Conn, r.ID, r.Op, wire.CoordSuccess, describePage(&info, flags, after))
		if flags&(wire.CoordFlagWatchData|wire.CoordFlagWatchOwners) != 0 {
			k := semKey{bind.path, name}
			ws := c.co.watches[k]
			if ws == nil {
				ws = make(map[uint64]*coordWatch)
				c.co.watches[k] = ws
			}
			if old := ws[bind.session]; old != nil {
				// One watch per (session, semaphore): the older one fires empty.
				old.c.Send(wire.CoordFrame(true, old.id, wire.CoordChanged, 0, &wire.Coord{}))

			}
			ws[bind.session] = &coordWatch{c: r.Conn, id: r.ID, data: flags&wire.CoordFlagWatchData != 0, owners: flags&wire.CoordFlagWatchOwners != 0}
		}
	}})
}

// listSessions is one page of a list-sessions answer: the sessions with an
// id above after, as many as fit in 1 MiB (a frame's bound is 1 MiB + 8 KiB);
// CoordFlagMore says that the client should ask again after the last one.
func listSessions(all []coordsm.SessionInfo, after uint64) *wire.Coord {
	ans := &wire.Coord{}
	size := 0
	for _, s := range all {
		if s.ID <= after {
			continue
		}
		x := wire.CoordSession{Session: s.ID, SeqNo: s.SeqNo, TimeoutMs: s.TimeoutMs, Desc: []byte(s.Desc)}
		if s.Attached {
			x.Flags = wire.CoordFlagAttached
		}
		if size += wire.CoordSessionSize(&x); size > ListSessionsBudget && len(ans.SessionList) > 0 {
			ans.Flags = wire.CoordFlagMore
			break
		}
		ans.SessionList = append(ans.SessionList, x)
	}
	return ans
}

// ListSessionsBudget bounds the sessions of one list-sessions answer
// (bytes). A variable so that tests can page with a few sessions; set it
// only while no core runs.
var ListSessionsBudget = wire.MaxCoordData

// describePage is one page of a describe-semaphore answer: the semaphore's
// data (unless flags has CoordFlagNoData), then the owners and waiters with
// an order id above after, in order-id order (every owner's is below every
// waiter's), as many as fit in 1 MiB with the data; a frame's bound is
// 1 MiB + 8 KiB, so the fixed fields and the holders' headers fit too. A
// page without data always carries one holder at least (one holder's data is
// at most 1 MiB), so paging always ends. CoordFlagMoreHolders says that the
// client should ask again after the last one, without the data.
func describePage(info *coordsm.SemaphoreInfo, flags uint8, after uint64) *wire.Coord {
	ans := &wire.Coord{Limit: info.Limit, Count: info.Count, Version: info.Version}
	if info.Ephemeral {
		ans.Flags = wire.CoordFlagEphemeral
	}
	if flags&wire.CoordFlagNoData == 0 {
		ans.Data = []byte(info.Data)
	}
	size := len(ans.Data)
	full := false
	take := func(hs []coordsm.Holder) []wire.CoordHolder {
		var out []wire.CoordHolder
		for _, h := range hs {
			if h.OrderID <= after {
				continue
			}
			x := wire.CoordHolder{OrderID: h.OrderID, Session: h.Session, Count: h.Count, TimeoutMs: h.TimeoutMs, Data: []byte(h.Data)}
			if full || (size > 0 && size+wire.CoordHolderSize(&x) > DescribeBudget) {
				full = true
				break
			}
			size += wire.CoordHolderSize(&x)
			out = append(out, x)
		}
		return out
	}
	ans.Owners = take(info.Owners)
	ans.Queue = take(info.Waiters)
	if full {
		ans.Flags |= wire.CoordFlagMoreHolders
	}
	return ans
}

// DescribeBudget bounds the data and holders of one describe-semaphore
// answer (bytes). A variable so that tests can page with a few holders; set
// it only while no core runs.
var DescribeBudget = wire.MaxCoordData

// coordApplied handles the result of one committed coordination op: first
// its events (other parties), then the requester's answer.
func (c *Core) coordApplied(op *fsm.Op, res fsm.Result, cs cause, now time.Time) {
	kind := coordsm.Kind(op.Kind)
	wop := coordsm.RequestOf(kind)
	r := res.Coord
	if r == nil {
		if cs.c != nil {
			AnswerCoord(cs.c, cs.id, wop, wire.CoordBadRequest, nil)
		}
		return
	}
	for _, e := range r.Events {
		c.coordEvent(e)
	}
	o := op.Coord
	switch kind {
	case coordsm.Detach:
		if r.Status == coordsm.Success {
			c.coordArmExpiry(o.Session)
		}
		return
	case coordsm.Expire:
		if r.Status == coordsm.PreconditionFailed {
			c.coordArmExpiry(o.Session) // restored meanwhile (no timer then), or not yet due
		}
		return
	case coordsm.Timeout:
		if r.Status == coordsm.PreconditionFailed {
			c.coordRecheckTimeout(o)
		}
		return
	}
	if cs.c == nil {
		return
	}
	if r.Status != coordsm.Success {
		var body *wire.Coord
		if r.Status == coordsm.BadRequest && (kind == coordsm.CreateNode || kind == coordsm.AlterNode) {
			body = &wire.Coord{Message: []byte("configuration: session_grace_period_ms must be greater than self_check_period_ms (after an alter's fields are merged with the current ones), and every limit above 0")}
		}
		AnswerCoord(cs.c, cs.id, wop, uint16(r.Status), body)
		return
	}
	switch kind {
	case coordsm.Attach:
		c.removeTimer(c.co.expiry[r.Session])
		delete(c.co.expiry, r.Session)
		replaced, added := c.sessions.bind(cs.c, cs.forSession, &binding{session: r.Session, seq: r.SeqNo, path: o.Path, principal: cs.principal})
		if replaced != nil {
			c.countSession(replaced.principal, -1)
		}
		if added {
			c.countSession(cs.principal, 1)
		}
		AnswerCoord(cs.c, cs.id, wop, wire.CoordSuccess, &wire.Coord{Session: r.Session, SeqNo: r.SeqNo})
	case coordsm.Acquire:
		switch {
		case r.Acquired:
			AnswerCoord(cs.c, cs.id, wop, wire.CoordSuccess, &wire.Coord{Flags: wire.CoordFlagAcquired, OrderID: r.OrderID, Count: r.Count})
		case r.Queued:
			k := coordKey{o.Session, o.Name}
			a := &coordAcq{c: cs.c, id: cs.id, order: r.OrderID}
			c.co.pending[k] = a
			cs.c.Send(wire.CoordFrame(true, cs.id, wire.CoordQueued, 0, &wire.Coord{OrderID: r.OrderID}))
			if o.TimeoutMs < maxCoordTimer {
				a.timer = c.coordTimeoutTimer(now.Add(time.Duration(o.TimeoutMs)*time.Millisecond), o.Session, o.Name, r.OrderID)
				c.addTimer(a.timer)
			}
		default:
			AnswerCoord(cs.c, cs.id, wop, wire.CoordSuccess, &wire.Coord{})
		}
	case coordsm.Release:
		var flags uint8
		if r.Changed {
			flags = wire.CoordFlagReleased
		}
		AnswerCoord(cs.c, cs.id, wop, wire.CoordSuccess, &wire.Coord{Flags: flags})
	default:
		AnswerCoord(cs.c, cs.id, wop, wire.CoordSuccess, nil)
	}
}

// coordEvent tells the parties of one event.
func (c *Core) coordEvent(e coordsm.Event) {
	k := coordKey{e.Session, e.Name}
	switch e.Kind {
	case coordsm.EventGranted, coordsm.EventAborted, coordsm.EventTimedOut:
		a := c.co.pending[k]
		if a == nil || a.order != e.OrderID {
			return // its connection is gone: the client re-sends after a restore
		}
		delete(c.co.pending, k)
		c.removeTimer(a.timer)
		switch e.Kind {
		case coordsm.EventGranted:
			AnswerCoord(a.c, a.id, wire.CoordAcquire, wire.CoordSuccess, &wire.Coord{Flags: wire.CoordFlagAcquired, OrderID: e.OrderID, Count: e.Count})
		case coordsm.EventAborted:
			AnswerCoord(a.c, a.id, wire.CoordAcquire, wire.CoordAborted, nil)
		default:
			AnswerCoord(a.c, a.id, wire.CoordAcquire, wire.CoordSuccess, &wire.Coord{})
		}
	case coordsm.EventLost:
		if cn, _ := c.sessions.connOf(e.Session); cn != nil {
			cn.Send(wire.CoordFrame(true, 0, wire.CoordLost, 0, &wire.Coord{Name: []byte(e.Name), OrderID: e.OrderID}))
		}
	case coordsm.EventSessionEnded:
		c.removeTimer(c.co.expiry[e.Session])
		delete(c.co.expiry, e.Session)
		for pk, a := range c.co.pending {
			if pk.session == e.Session {
				delete(c.co.pending, pk)
				c.removeTimer(a.timer)
				AnswerCoord(a.c, a.id, wire.CoordAcquire, wire.CoordSessionExpired, nil)
			}
		}
		for _, ws := range c.co.watches {
			delete(ws, e.Session)
		}
		if cn, b := c.sessions.connOf(e.Session); cn != nil {
			cn.Send(wire.CoordFrame(true, 0, wire.CoordSessionEnded, 0, &wire.Coord{Session: e.Session, Reason: e.Reason}))
			c.sessions.unbind(cn, e.Session)
			c.countSession(b.principal, -1)
		}
	case coordsm.EventChanged:
		sk := semKey{e.Path, e.Name}
		for session, w := range c.co.watches[sk] {
			if (e.Data && w.data) || (e.Owners && w.owners) {
				var flags uint8
				if e.Data {
					flags |= wire.CoordFlagChangedData
				}
				if e.Owners {
					flags |= wire.CoordFlagChangedOwners
				}
				w.c.Send(wire.CoordFrame(true, w.id, wire.CoordChanged, 0, &wire.Coord{Flags: flags}))
				delete(c.co.watches[sk], session) // one-shot

			}
		}
	}
}

// coordConnClosed detaches the connection's sessions (each one's expiry
// clock starts when its detach is applied) and forgets its pending answers and watches:
// the session keeps its holds and queue positions until it expires.
func (c *Core) coordConnClosed(cn Replier) {
	// Each session the connection carried is detached on its own.
	for _, b := range c.sessions.dropConn(cn) {
		c.countSession(b.principal, -1)
		if c.serving {
			c.coordProposeOwn(coordsm.Detach, &coordsm.Op{Session: b.session, SeqNo: b.seq})
		}
	}
	for k, a := range c.co.pending {
		if a.c == cn {
			delete(c.co.pending, k)
			c.removeTimer(a.timer)
		}
	}
	for _, ws := range c.co.watches {
		for s, w := range ws {
			if w.c == cn {
				delete(ws, s)
			}
		}
	}
}

// coordArmExpiry sets the leader's timer for a detached session at its
// expiry time in the applied state (batch-time clock), and proposes the
// expiry when it fires.
func (c *Core) coordArmExpiry(session uint64) {
	var info coordsm.SessionInfo
	var ok bool
	c.state.Read(func(st *fsm.State) { info, ok = st.Session(session) })
	if !ok || info.Attached {
		return
	}
	c.removeTimer(c.co.expiry[session])
	wait := time.Duration(max(info.ExpiresAt-c.clock(), 0)) * time.Millisecond
	t := &timer{at: c.clk.Now().Add(wait), fn: func() {
		delete(c.co.expiry, session)
		if c.serving {
			c.coordProposeOwn(coordsm.Expire, &coordsm.Op{Session: session})
		}
	}}
	c.co.expiry[session] = t
	c.addTimer(t)
}

// coordTakeover arms, after the takeover entry is applied, the expiry of
// every session (the takeover detached them all and gave each its timeout
// plus the node's grace period) and the timeout of every queued acquire.
func (c *Core) coordTakeover(now time.Time) {
	clock := c.clock()
	c.state.Read(func(st *fsm.State) {
		for _, s := range st.Sessions("") {
			session := s.ID
			t := &timer{at: now.Add(time.Duration(max(s.ExpiresAt-clock, 0)) * time.Millisecond), fn: func() {
				delete(c.co.expiry, session)
				if c.serving {
					c.coordProposeOwn(coordsm.Expire, &coordsm.Op{Session: session})
				}
			}, idx: len(c.timers)}
			c.timers = append(c.timers, t)
			c.co.expiry[session] = t
		}
		st.CoordWaiters(func(path, name string, w coordsm.Holder) {
			if left := w.Deadline - clock; left < maxCoordTimer {
				t := c.coordTimeoutTimer(now.Add(time.Duration(max(left, 0))*time.Millisecond), w.Session, name, w.OrderID)
				t.idx = len(c.timers)
				c.timers = append(c.timers, t)
			}
		})
	})
}

// maxCoordTimer (ms, about 34 years): a longer wait gets no timer, so that
// its deadline cannot overflow a time.Duration.
const maxCoordTimer = 1 << 40

// coordTimeoutTimer proposes the timeout of the waiter (session, name, order)
// when it fires.
func (c *Core) coordTimeoutTimer(at time.Time, session uint64, name string, order uint64) *timer {
	return &timer{at: at, fn: func() {
		if c.serving {
			c.coordProposeOwn(coordsm.Timeout, &coordsm.Op{Session: session, Name: name, OrderID: order})
		}
	}}
}

// coordRecheckTimeout re-arms a waiter timeout that the state machine found
// not yet due (the leader's timer ran ahead of the batch clock); a waiter
// that was granted, released or replaced meanwhile needs nothing.
func (c *Core) coordRecheckTimeout(o *coordsm.Op) {
	var path string
	if s, ok := c.sessionInfo(o.Session); ok {
		path = s.Path
	} else {
		return
	}
	var again bool
	c.state.Read(func(st *fsm.State) {
		info, _ := st.DescribeSemaphore(path, o.Name, false, true)
		for _, w := range info.Waiters {
			again = again || (w.Session == o.Session && w.OrderID == o.OrderID)
		}
	})
	if again {
		c.addTimer(c.coordTimeoutTimer(c.clk.Now().Add(50*time.Millisecond), o.Session, o.Name, o.OrderID))
	}
}

func (c *Core) sessionInfo(id uint64) (info coordsm.SessionInfo, ok bool) {
	c.state.Read(func(st *fsm.State) { info, ok = st.Session(id) })
	return info, ok
}
