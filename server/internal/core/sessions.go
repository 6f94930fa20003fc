package core

// This file holds which connection carries which coordination session: the
// only coordination state that belongs to connections rather than to the
// replicated state. Every lookup of a session by its connection, or of a
// connection by its session, goes through bindings, so that the rule "a
// connection carries one session" lives here alone.

// binding is one session attached on one connection.
type binding struct {
	session, seq uint64
	path         string // the session's node: its rights are checked per request
	principal    string // the connection's principal: the session counts against its quota
}

// bindings maps connections to the sessions they carry; the core's
// goroutine owns it.
type bindings struct {
	byConn map[Replier]*binding
}

func (bs *bindings) reset() { bs.byConn = make(map[Replier]*binding) }

// of is the session attached on cn, nil when none.
func (bs *bindings) of(cn Replier) *binding { return bs.byConn[cn] }

// bind records that cn carries b's session (replacing what it carried).
func (bs *bindings) bind(cn Replier, b *binding) { bs.byConn[cn] = b }

// unbind forgets the session cn carries.
func (bs *bindings) unbind(cn Replier) { delete(bs.byConn, cn) }

// connOf is the connection currently attached to session (the one that
// attached with the highest seq_no), if any.
func (bs *bindings) connOf(session uint64) (Replier, *binding) {
	var best Replier
	var bb *binding
	for cn, b := range bs.byConn {
		if b.session == session && (bb == nil || b.seq > bb.seq) {
			best, bb = cn, b
		}
	}
	return best, bb
}
