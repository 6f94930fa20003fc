package coordsm

import (
	"encoding/binary"
	"math"

	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// The coordination section of a snapshot: after everything else, a tag and
// its own version, written only when there is coordination state, so that a
// state without it writes the bytes older servers wrote, and snapshots
// written before it existed (ending before any section) still read.
const (
	// SectionTag is the first byte of the section.
	SectionTag = 'C'
	// SectionVersion is the format version written.
	SectionVersion = 3 // 2 adds the semaphore versions, 3 the sessions' detach times; 1 and 2 still read
)

// AppendSnapshot appends the coordination section, or nothing when the
// state is Empty.
func (c *State) AppendSnapshot(buf []byte) []byte {
	return c.appendSection(buf, SectionVersion)
}

// AppendSnapshotFormat appends the section in format version v, 1 up to
// the current one, as older servers wrote it: tests check that snapshots of
// older servers still read.
func (c *State) AppendSnapshotFormat(buf []byte, v uint8) []byte {
	return c.appendSection(buf, min(max(v, 1), SectionVersion))
}

// appendSection writes the section in format v.
func (c *State) appendSection(buf []byte, v uint8) []byte {
	if c.Empty() {
		return buf
	}
	buf = append(buf, SectionTag, v)
	buf = binary.AppendUvarint(buf, c.lastSession)
	if v >= 2 {
		buf = binary.AppendUvarint(buf, c.lastVersion)
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.nodes)))
	for _, p := range sortedKeys(c.nodes) {
		n := c.nodes[p]
		buf = enc.AppendStr(buf, p)
		buf = appendNodeConfig(buf, n.cfg)
		buf = binary.AppendUvarint(buf, uint64(len(n.sessions)))
		for _, id := range sortedKeys(n.sessions) {
			ss := n.sessions[id]
			buf = binary.AppendUvarint(buf, id)
			buf = binary.AppendUvarint(buf, ss.seqNo)
			buf = binary.AppendUvarint(buf, ss.timeoutMs)
			buf = enc.AppendStr(buf, ss.desc)
			buf = enc.AppendStr(buf, ss.key)
			buf = enc.AppendBool(buf, ss.attached)
			buf = binary.BigEndian.AppendUint64(buf, uint64(ss.expiresAt))
			if v >= 3 {
				buf = binary.BigEndian.AppendUint64(buf, uint64(ss.detachedAt))
			}
		}
		buf = binary.AppendUvarint(buf, uint64(len(n.sems)))
		for _, name := range sortedKeys(n.sems) {
			sem := n.sems[name]
			buf = enc.AppendStr(buf, name)
			buf = binary.AppendUvarint(buf, sem.limit)
			buf = enc.AppendStr(buf, sem.data)
			buf = enc.AppendBool(buf, sem.ephemeral)
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
					buf = enc.AppendStr(buf, h.Data)
					buf = binary.BigEndian.AppendUint64(buf, uint64(h.Deadline))
				}
			}
		}
	}
	return buf
}

// sectionReader reads one section.
type sectionReader struct {
	*enc.Decoder
	version   uint8
	lastToken uint64 // the token counter, read before the section: no order id is above it
}

func (d *sectionReader) corrupt(format string, args ...any) {
	d.Failf("coordination section: "+format, args...)
}

// count reads an element count; each element takes at least min bytes.
func (d *sectionReader) count(what string, min int) uint64 {
	n := d.Uvarint(what)
	if d.Err == nil && n > uint64(len(d.B)/min) {
		d.corrupt("%d %s in %d bytes", n, what, len(d.B))
		return 0
	}
	return n
}

// ReadSnapshot reads a section written by AppendSnapshot from d into c,
// which must be empty, and checks that it is a state the operations could
// have reached. lastToken is the token counter, read before the section. A
// failure is left in d.Err.
func (c *State) ReadSnapshot(d *enc.Decoder, lastToken uint64) {
	r := &sectionReader{Decoder: d, lastToken: lastToken}
	r.U8("section tag")
	v := r.U8("coordination section version")
	if r.Err == nil && (v < 1 || v > SectionVersion) {
		r.corrupt("version %d, this ticketd reads versions 1 to %d: use the ticketd version that wrote it, or a newer one", v, SectionVersion)
		return
	}
	r.version = v
	c.lastSession = r.Uvarint("last session id")
	if v >= 2 {
		c.lastVersion = r.Uvarint("last semaphore version")
	}
	nn := r.count("nodes", 8)
	prevPath := ""
	for i := uint64(0); i < nn && r.Err == nil; i++ {
		n := &node{path: r.Str("node path"), sessions: make(map[uint64]*session), sems: make(map[string]*semaphore)}
		n.cfg = readNodeConfig(r.Decoder)
		if r.Err != nil {
			return
		}
		if !validPath(n.path) || n.path <= prevPath || !n.cfg.valid() {
			r.corrupt("node %q out of order, or invalid path or configuration", n.path)
			return
		}
		prevPath = n.path
		c.nodes[n.path] = n
		r.readSessions(c, n)
		r.readSems(c, n)
	}
	if r.Err == nil && c.Empty() {
		r.corrupt("present but empty")
	}
}

func (d *sectionReader) readSessions(c *State, n *node) {
	ns := d.count("sessions", 14)
	var prev uint64
	for i := uint64(0); i < ns && d.Err == nil; i++ {
		ss := &session{node: n.path, sems: make(map[string]bool)}
		ss.id = d.Uvarint("session id")
		ss.seqNo = d.Uvarint("seq_no")
		ss.timeoutMs = d.Uvarint("session timeout")
		ss.desc = d.Str("description")
		ss.key = d.Str("protection key")
		ss.attached = d.Boolean("attached")
		ss.expiresAt = int64(d.U64("expires at"))
		if d.version >= 3 {
			ss.detachedAt = int64(d.U64("detached at"))
		} else if !ss.attached {
			// Written before detach times were kept: the detach implied by
			// the expiry (a takeover's grace, if any, makes it earlier,
			// never later).
			ss.detachedAt = ss.expiresAt - int64(min(ss.timeoutMs, uint64(ss.expiresAt)))
		}
		if d.Err != nil {
			return
		}
		if ss.id <= prev || ss.id > c.lastSession || c.sessions[ss.id] != nil {
			d.corrupt("session id %d out of order, repeated or above the last id %d", ss.id, c.lastSession)
			return
		}
		if ss.timeoutMs == 0 || ss.timeoutMs > MaxSessionTimeout || len(ss.desc) > MaxDesc ||
			len(ss.key) > MaxKey || (ss.attached && (ss.expiresAt != 0 || ss.detachedAt != 0)) {
			d.corrupt("session %d has an invalid timeout, description, key or expiry", ss.id)
			return
		}
		prev = ss.id
		n.sessions[ss.id] = ss
		c.sessions[ss.id] = ss
	}
}

func (d *sectionReader) readSems(c *State, n *node) {
	nsem := d.count("semaphores", 6)
	prev := ""
	for i := uint64(0); i < nsem && d.Err == nil; i++ {
		sem := &semaphore{name: d.Str("semaphore name")}
		sem.limit = d.Uvarint("limit")
		sem.data = d.Str("semaphore data")
		sem.ephemeral = d.Boolean("ephemeral")
		if d.version >= 2 {
			sem.version = d.Uvarint("semaphore version")
		}
		if d.Err != nil {
			return
		}
		if !validName(sem.name) || sem.name <= prev || sem.limit == 0 || len(sem.data) > MaxData ||
			(sem.ephemeral && sem.limit != math.MaxUint64) || sem.version > c.lastVersion {
			d.corrupt("semaphore %q of %s out of order, or invalid name, limit, data or version", sem.name, n.path)
			return
		}
		prev = sem.name
		var lastOrder uint64
		for list := 0; list < 2 && d.Err == nil; list++ {
			nh := d.count("holders", 13)
			hs := make([]Holder, 0, min(nh, 64))
			for j := uint64(0); j < nh && d.Err == nil; j++ {
				h := Holder{OrderID: d.Uvarint("order id"), Session: d.Uvarint("holder session"),
					Count: d.Uvarint("holder count"), TimeoutMs: d.Uvarint("holder timeout"), Data: d.Str("holder data")}
				h.Deadline = int64(d.U64("deadline"))
				if d.Err != nil {
					return
				}
				ss := n.sessions[h.Session]
				ok := ss != nil && !ss.sems[sem.name] && h.OrderID > lastOrder && h.OrderID <= d.lastToken &&
					h.Count > 0 && len(h.Data) <= MaxData
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
		if d.Err != nil {
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
