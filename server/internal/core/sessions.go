package core

// This file holds which connection carries which coordination session: the
// only coordination state that belongs to connections rather than to the
// replicated state. Every lookup of a session by its connection, or of a
// connection by its session, goes through bindings. Bindings are keyed by
// (connection, session); the rule "a connection carries one session" lives
// only in carried and in the attach check (coord.go), so that a connection
// may carry several sessions once requests name theirs.

// binding is one session attached on one connection.
type binding struct {
	session, seq uint64
	path         string // the session's node: its rights are checked per request
	principal    string // the connection's principal: the session counts against its quota
}

type bindKey struct {
	conn    Replier
	session uint64
}

// bindings maps connections to the sessions they carry; the core's
// goroutine owns it.
type bindings struct {
	all     map[bindKey]*binding
	carried map[Replier]*binding // the one session each connection carries
}

func (bs *bindings) reset() {
	bs.all = make(map[bindKey]*binding)
	bs.carried = make(map[Replier]*binding)
}

// of is the session attached on cn, nil when none.
func (bs *bindings) of(cn Replier) *binding { return bs.carried[cn] }

// bind records that cn carries b's session, in place of what it carried.
func (bs *bindings) bind(cn Replier, b *binding) {
	if old := bs.carried[cn]; old != nil {
		delete(bs.all, bindKey{cn, old.session})
	}
	bs.all[bindKey{cn, b.session}] = b
	bs.carried[cn] = b
}

// unbind forgets that cn carries session.
func (bs *bindings) unbind(cn Replier, session uint64) {
	delete(bs.all, bindKey{cn, session})
	if b := bs.carried[cn]; b != nil && b.session == session {
		delete(bs.carried, cn)
	}
}

// connOf is the connection currently attached to session (the one that
// attached with the highest seq_no), if any, and its binding.
func (bs *bindings) connOf(session uint64) (Replier, *binding) {
	var best Replier
	var bb *binding
	for k, b := range bs.all {
		if k.session == session && (bb == nil || b.seq > bb.seq) {
			best, bb = k.conn, b
		}
	}
	return best, bb
}
