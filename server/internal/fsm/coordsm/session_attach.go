package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// Attach is the command's log kind (never reused); its op carries Path, Session (0 = start), SeqNo, Key, TimeoutMs, Desc.
const Attach Kind = 35

func init() { register(&cmdAttach) }

var cmdAttach = command{kind: Attach, name: "attach", fields: fPath | fSession | fSeqNo | fKey | fTimeout | fDesc,
	// The one session op whose session and seq_no are the request's own.
	request: wire.CoordAttach, build: func(b *wire.Coord) Op {
		return Op{Path: string(b.Path), Session: b.Session, SeqNo: b.SeqNo, TimeoutMs: b.TimeoutMs, Key: string(b.Key), Desc: string(b.Desc)}
	},
	doc: "Starts a session on the node at Path (Session 0) or attaches an existing one with its protection key and a seq_no not below its last.",
	apply: func(a *applier, o *Op) Status {
		c, r := a.c, a.r
		if !validPath(o.Path) || o.TimeoutMs == 0 || o.TimeoutMs > MaxSessionTimeout ||
			len(o.Desc) > MaxDesc || len(o.Key) > MaxKey {
			return BadRequest
		}
		n := c.nodes[o.Path]
		if n == nil {
			return NotFound
		}
		var ss *session
		if o.Session == 0 {
			if len(n.sessions) >= int(n.cfg.MaxSessions) {
				return LimitExceeded
			}
			c.lastSession++
			ss = &session{id: c.lastSession, node: n.path, key: o.Key, sems: make(map[string]bool)}
			n.sessions[ss.id] = ss
			c.sessions[ss.id] = ss
		} else {
			ss = n.sessions[o.Session]
			if ss == nil {
				return SessionExpired
			}
			if ss.key != o.Key || o.SeqNo < ss.seqNo {
				return BadSession
			}
		}
		ss.seqNo = o.SeqNo
		ss.timeoutMs = o.TimeoutMs
		ss.desc = o.Desc
		ss.attached = true
		ss.expiresAt, ss.detachedAt = 0, 0
		r.Session, r.SeqNo = ss.id, ss.seqNo
		return Success
	}}
