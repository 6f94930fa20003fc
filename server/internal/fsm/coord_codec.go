package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// The fields of a CoordOp each kind encodes, in this order. The others are
// not written and decode as zero, so every op has one encoding.
const (
	cfPath = 1 << iota
	cfConfig
	cfSession
	cfSeqNo
	cfKey
	cfTimeout
	cfDesc
	cfName
	cfLimit
	cfCount
	cfData
	cfEphemeral
	cfForce
	cfOrder
)

var coordFields = [...]uint16{
	OpCoordCreateNode - opCoordFirst: cfPath | cfConfig,
	OpCoordAlterNode - opCoordFirst:  cfPath | cfConfig,
	OpCoordDropNode - opCoordFirst:   cfPath,
	OpCoordAttach - opCoordFirst:     cfPath | cfSession | cfSeqNo | cfKey | cfTimeout | cfDesc,
	OpCoordDetach - opCoordFirst:     cfSession | cfSeqNo,
	OpCoordExpire - opCoordFirst:     cfSession,
	OpCoordStop - opCoordFirst:       cfSession | cfSeqNo,
	OpCoordCreateSem - opCoordFirst:  cfSession | cfSeqNo | cfName | cfLimit | cfData,
	OpCoordUpdateSem - opCoordFirst:  cfSession | cfSeqNo | cfName | cfData,
	OpCoordDeleteSem - opCoordFirst:  cfSession | cfSeqNo | cfName | cfForce,
	OpCoordAcquire - opCoordFirst:    cfSession | cfSeqNo | cfName | cfCount | cfTimeout | cfData | cfEphemeral,
	OpCoordRelease - opCoordFirst:    cfSession | cfSeqNo | cfName,
	OpCoordTimeout - opCoordFirst:    cfSession | cfName | cfOrder,
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendNodeConfig(dst []byte, c NodeConfig) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.SelfCheckMs))
	dst = binary.AppendUvarint(dst, uint64(c.GraceMs))
	dst = append(dst, c.ReadMode, c.AttachMode)
	dst = binary.AppendUvarint(dst, uint64(c.MaxSessions))
	dst = binary.AppendUvarint(dst, uint64(c.MaxSemaphores))
	return binary.AppendUvarint(dst, uint64(c.MaxWaiters))
}

// appendCoordOp encodes the fields of kind from o (nil: all zero).
func appendCoordOp(dst []byte, kind OpKind, o *CoordOp) []byte {
	if o == nil {
		o = &CoordOp{}
	}
	f := coordFields[kind-opCoordFirst]
	if f&cfPath != 0 {
		dst = appendStr(dst, o.Path)
	}
	if f&cfConfig != 0 {
		dst = appendNodeConfig(dst, o.Config)
	}
	if f&cfSession != 0 {
		dst = binary.AppendUvarint(dst, o.Session)
	}
	if f&cfSeqNo != 0 {
		dst = binary.AppendUvarint(dst, o.SeqNo)
	}
	if f&cfKey != 0 {
		dst = appendStr(dst, o.Key)
	}
	if f&cfTimeout != 0 {
		dst = binary.AppendUvarint(dst, o.TimeoutMs)
	}
	if f&cfDesc != 0 {
		dst = appendStr(dst, o.Desc)
	}
	if f&cfName != 0 {
		dst = appendStr(dst, o.Name)
	}
	if f&cfLimit != 0 {
		dst = binary.AppendUvarint(dst, o.Limit)
	}
	if f&cfCount != 0 {
		dst = binary.AppendUvarint(dst, o.Count)
	}
	if f&cfData != 0 {
		dst = appendStr(dst, o.Data)
	}
	if f&cfEphemeral != 0 {
		dst = appendBool(dst, o.Ephemeral)
	}
	if f&cfForce != 0 {
		dst = appendBool(dst, o.Force)
	}
	if f&cfOrder != 0 {
		dst = binary.AppendUvarint(dst, o.OrderID)
	}
	return dst
}

func (d *dec) boolean(what string) bool {
	v := d.u8(what)
	if v > 1 && d.err == nil {
		d.err = fmt.Errorf("%w: %s is %d, not 0 or 1", ErrCorrupt, what, v)
	}
	return v == 1
}

func (d *dec) uvarint32(what string) uint32 {
	v := d.uvarint(what)
	if v > math.MaxUint32 && d.err == nil {
		d.err = fmt.Errorf("%w: %s %d does not fit 32 bits", ErrCorrupt, what, v)
	}
	return uint32(v)
}

func (d *dec) nodeConfig() NodeConfig {
	var c NodeConfig
	c.SelfCheckMs = d.uvarint32("self-check period")
	c.GraceMs = d.uvarint32("grace period")
	c.ReadMode = d.u8("read mode")
	c.AttachMode = d.u8("attach mode")
	c.MaxSessions = d.uvarint32("max sessions")
	c.MaxSemaphores = d.uvarint32("max semaphores")
	c.MaxWaiters = d.uvarint32("max waiters")
	return c
}

func (d *dec) coordOp(kind OpKind) *CoordOp {
	o := &CoordOp{}
	f := coordFields[kind-opCoordFirst]
	if f&cfPath != 0 {
		o.Path = d.str("path")
	}
	if f&cfConfig != 0 {
		o.Config = d.nodeConfig()
	}
	if f&cfSession != 0 {
		o.Session = d.uvarint("session")
	}
	if f&cfSeqNo != 0 {
		o.SeqNo = d.uvarint("seq_no")
	}
	if f&cfKey != 0 {
		o.Key = d.str("protection key")
	}
	if f&cfTimeout != 0 {
		o.TimeoutMs = d.uvarint("timeout")
	}
	if f&cfDesc != 0 {
		o.Desc = d.str("description")
	}
	if f&cfName != 0 {
		o.Name = d.str("semaphore name")
	}
	if f&cfLimit != 0 {
		o.Limit = d.uvarint("limit")
	}
	if f&cfCount != 0 {
		o.Count = d.uvarint("count")
	}
	if f&cfData != 0 {
		o.Data = d.str("data")
	}
	if f&cfEphemeral != 0 {
		o.Ephemeral = d.boolean("ephemeral")
	}
	if f&cfForce != 0 {
		o.Force = d.boolean("force")
	}
	if f&cfOrder != 0 {
		o.OrderID = d.uvarint("order id")
	}
	return o
}

// The coordination section of a snapshot: after everything else, a tag and
// its own version, written only when there is coordination state, so that a
// state without it writes the bytes older servers wrote, and snapshots
// written before it existed (ending before any section) still read.
const (
	coordSectionTag     = 'C'
	coordSectionVersion = 3 // 2 adds the semaphore versions, 3 the sessions' detach times; 1 and 2 still read
)

func sortedKeys[K string | uint64, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// appendSnapshot appends the coordination section, or nothing when empty.
func (c *coordState) appendSnapshot(buf []byte) []byte {
	return c.appendSection(buf, coordSectionVersion)
}

// appendSection writes the section in format v (tests write 1 to check that
// it still reads).
func (c *coordState) appendSection(buf []byte, v uint8) []byte {
	if c.empty() {
		return buf
	}
	buf = append(buf, coordSectionTag, v)
	buf = binary.AppendUvarint(buf, c.lastSession)
	if v >= 2 {
		buf = binary.AppendUvarint(buf, c.lastVersion)
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.nodes)))
	for _, p := range sortedKeys(c.nodes) {
		n := c.nodes[p]
		buf = appendStr(buf, p)
		buf = appendNodeConfig(buf, n.cfg)
		buf = binary.AppendUvarint(buf, uint64(len(n.sessions)))
		for _, id := range sortedKeys(n.sessions) {
			ss := n.sessions[id]
			buf = binary.AppendUvarint(buf, id)
			buf = binary.AppendUvarint(buf, ss.seqNo)
			buf = binary.AppendUvarint(buf, ss.timeoutMs)
			buf = appendStr(buf, ss.desc)
			buf = appendStr(buf, ss.key)
			buf = appendBool(buf, ss.attached)
			buf = binary.BigEndian.AppendUint64(buf, uint64(ss.expiresAt))
			if v >= 3 {
				buf = binary.BigEndian.AppendUint64(buf, uint64(ss.detachedAt))
			}
		}
		buf = binary.AppendUvarint(buf, uint64(len(n.sems)))
		for _, name := range sortedKeys(n.sems) {
			sem := n.sems[name]
			buf = appendStr(buf, name)
			buf = binary.AppendUvarint(buf, sem.limit)
			buf = appendStr(buf, sem.data)
			buf = appendBool(buf, sem.ephemeral)
			if v >= 2 {
				buf = binary.AppendUvarint(buf, sem.version)
			}
			for _, list := range [][]Holder{sem.owners, sem.waiters} {
				buf = binary.AppendUvarint(buf, uint64(len(list)))
				for _, h := range list {
					buf = binary.AppendUvarint(buf, h.OrderID)
					buf = binary.AppendUvarint(buf, h.Session)
					buf = binary.AppendUvarint(buf, h.Count)
					buf = binary.AppendUvarint(buf, h.TimeoutMs)
					buf = appendStr(buf, h.Data)
					buf = binary.BigEndian.AppendUint64(buf, uint64(h.Deadline))
				}
			}
		}
	}
	return buf
}

func (d *dec) corrupt(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: coordination section: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

// count reads an element count; each element takes at least min bytes.
func (d *dec) count(what string, min int) uint64 {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.corrupt("%d %s in %d bytes", n, what, len(d.b))
		return 0
	}
	return n
}

// readCoordSection reads the section into s (whose token counter is already
// read) and checks that it is a state the operations could have reached.
func (d *dec) readCoordSection(s *State) {
	d.u8("section tag")
	v := d.u8("coordination section version")
	if d.err == nil && (v < 1 || v > coordSectionVersion) {
		d.corrupt("version %d, this ticketd reads versions 1 to %d: use the ticketd version that wrote it, or a newer one", v, coordSectionVersion)
		return
	}
	d.coordVersion = v
	c := s.coord
	c.lastSession = d.uvarint("last session id")
	if v >= 2 {
		c.lastVersion = d.uvarint("last semaphore version")
	}
	nn := d.count("nodes", 8)
	prevPath := ""
	for i := uint64(0); i < nn && d.err == nil; i++ {
		n := &coordNode{path: d.str("node path"), sessions: make(map[uint64]*coordSession), sems: make(map[string]*coordSem)}
		n.cfg = d.nodeConfig()
		if d.err != nil {
			return
		}
		if !validPath(n.path) || n.path <= prevPath || !n.cfg.valid() {
			d.corrupt("node %q out of order, or invalid path or configuration", n.path)
			return
		}
		prevPath = n.path
		c.nodes[n.path] = n
		d.readSessions(c, n)
		d.readSems(s, n)
	}
	if d.err == nil && c.empty() {
		d.corrupt("present but empty")
	}
}

func (d *dec) readSessions(c *coordState, n *coordNode) {
	ns := d.count("sessions", 14)
	var prev uint64
	for i := uint64(0); i < ns && d.err == nil; i++ {
		ss := &coordSession{node: n.path, sems: make(map[string]bool)}
		ss.id = d.uvarint("session id")
		ss.seqNo = d.uvarint("seq_no")
		ss.timeoutMs = d.uvarint("session timeout")
		ss.desc = d.str("description")
		ss.key = d.str("protection key")
		ss.attached = d.boolean("attached")
		ss.expiresAt = int64(d.u64("expires at"))
		if d.coordVersion >= 3 {
			ss.detachedAt = int64(d.u64("detached at"))
		} else if !ss.attached {
			// Written before detach times were kept: the detach implied by
			// the expiry (a takeover's grace, if any, makes it earlier,
			// never later).
			ss.detachedAt = ss.expiresAt - int64(min(ss.timeoutMs, uint64(ss.expiresAt)))
		}
		if d.err != nil {
			return
		}
		if ss.id <= prev || ss.id > c.lastSession || c.sessions[ss.id] != nil {
			d.corrupt("session id %d out of order, repeated or above the last id %d", ss.id, c.lastSession)
			return
		}
		if ss.timeoutMs == 0 || ss.timeoutMs > MaxSessionTimeout || len(ss.desc) > MaxCoordDesc ||
			len(ss.key) > MaxCoordKey || (ss.attached && (ss.expiresAt != 0 || ss.detachedAt != 0)) {
			d.corrupt("session %d has an invalid timeout, description, key or expiry", ss.id)
			return
		}
		prev = ss.id
		n.sessions[ss.id] = ss
		c.sessions[ss.id] = ss
	}
}

func (d *dec) readSems(s *State, n *coordNode) {
	nsem := d.count("semaphores", 6)
	prev := ""
	for i := uint64(0); i < nsem && d.err == nil; i++ {
		sem := &coordSem{name: d.str("semaphore name")}
		sem.limit = d.uvarint("limit")
		sem.data = d.str("semaphore data")
		sem.ephemeral = d.boolean("ephemeral")
		if d.coordVersion >= 2 {
			sem.version = d.uvarint("semaphore version")
		}
		if d.err != nil {
			return
		}
		if !validName(sem.name) || sem.name <= prev || sem.limit == 0 || len(sem.data) > MaxCoordData ||
			(sem.ephemeral && sem.limit != math.MaxUint64) || sem.version > s.coord.lastVersion {
			d.corrupt("semaphore %q of %s out of order, or invalid name, limit, data or version", sem.name, n.path)
			return
		}
		prev = sem.name
		var lastOrder uint64
		for list := 0; list < 2 && d.err == nil; list++ {
			nh := d.count("holders", 13)
			hs := make([]Holder, 0, min(nh, 64))
			for j := uint64(0); j < nh && d.err == nil; j++ {
				h := Holder{OrderID: d.uvarint("order id"), Session: d.uvarint("holder session"),
					Count: d.uvarint("holder count"), TimeoutMs: d.uvarint("holder timeout"), Data: d.str("holder data")}
				h.Deadline = int64(d.u64("deadline"))
				if d.err != nil {
					return
				}
				ss := n.sessions[h.Session]
				ok := ss != nil && !ss.sems[sem.name] && h.OrderID > lastOrder && h.OrderID <= s.lastToken &&
					h.Count > 0 && len(h.Data) <= MaxCoordData
				if list == 0 { // owner: counted against the limit, no deadline
					ok = ok && h.Deadline == 0 && h.Count <= sem.limit-sem.count
				} else {
					ok = ok && (h.Count <= sem.limit || h.Count == Exclusive)
				}
				if !ok {
					d.corrupt("holder %d of semaphore %q of %s is invalid (session, order, count or data)", h.OrderID, sem.name, n.path)
					return
				}
				lastOrder = h.OrderID
				ss.sems[sem.name] = true
				if list == 0 {
					sem.count += h.Count
				}
				hs = append(hs, h)
			}
			if len(hs) == 0 {
				hs = nil
			}
			if list == 0 {
				sem.owners = hs
			} else {
				sem.waiters = hs
				n.waiters += len(hs)
			}
		}
		if d.err != nil {
			return
		}
		// Every operation grants the head while it fits, and an ephemeral
		// semaphore is deleted when unused; a state breaking either is not
		// one the operations reach.
		if (len(sem.waiters) > 0 && fits(sem, sem.waiters[0].Count)) ||
			(sem.ephemeral && len(sem.owners) == 0 && len(sem.waiters) == 0) {
			d.corrupt("semaphore %q of %s: its head waiter fits, or it is an unused ephemeral", sem.name, n.path)
			return
		}
		n.sems[sem.name] = sem
	}
}
