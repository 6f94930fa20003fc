package coordsm

// Detach is the command's log kind (never reused); its op carries Session, SeqNo: the attaching connection ended.
const Detach Kind = 36

func init() { register(&cmdDetach) }

var cmdDetach = command{kind: Detach, name: "detach", fields: fSession | fSeqNo,
	doc: "Marks the session detached (its connection ended); it expires after its timeout unless attached again.",
	apply: func(a *applier, o *Op) Status {
		ss, st := a.c.attached(o)
		if ss == nil {
			return st
		}
		if ss.attached {
			ss.attached = false
			ss.expiresAt = addMs(a.now, ss.timeoutMs)
			ss.detachedAt = a.now
		}
		return Success
	}}

// attached returns the session of o at o's seq_no, or nil and the status
// that refuses o.
func (c *State) attached(o *Op) (*session, Status) {
	ss := c.sessions[o.Session]
	if ss == nil {
		return nil, SessionExpired
	}
	if ss.seqNo != o.SeqNo {
		return nil, BadSession
	}
	return ss, Success
}
