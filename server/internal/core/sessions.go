package core

import "slices"

// This file holds which connection carries which coordination session: the
// only coordination state that belongs to connections rather than to the
// replicated state. Bindings are keyed by (connection, session); every lookup
// of a session by its connection, or of a connection by its session, goes
// through them, so that the rules of which sessions a connection carries
// live here alone:
//
//   - a connection whose session requests name no session carries one
//     session (its attach binds it, a later attach of another session
//     replaces it);
//   - a connection whose session requests name their session
//     (wire.CoordForSession) carries any number, each attached by its own
//     attach, each detached on its own when the connection ends;
//   - one connection does not mix the two forms.

// binding is one session attached on one connection.
type binding struct {
	session, seq uint64
	path         string // the session's node: its rights are checked per request
	principal    string // the connection's principal: the session counts against its quota
}

// bindings maps connections to the sessions they carry; the core's
// goroutine owns it.
type bindings struct {
	byConn map[Replier]map[uint64]*binding
	// form is the form of a connection's session requests, fixed by its
	// first attach: true when they name their session.
	form map[Replier]bool
}

func (bs *bindings) reset() {
	bs.byConn = make(map[Replier]map[uint64]*binding)
	bs.form = make(map[Replier]bool)
}

// declare fixes cn's form at its first attach request; a request in the
// other form is refused from then on (mixed).
func (bs *bindings) declare(cn Replier, forSession bool) {
	if _, ok := bs.form[cn]; !ok {
		bs.form[cn] = forSession
	}
}

// of is the session that a request on cn acts for: the one it names
// (forSession) among those cn attached, else cn's only session. nil when
// there is none; msg then says why, for a BAD_SESSION answer.
func (bs *bindings) of(cn Replier, forSession bool, session uint64) (b *binding, msg string) {
	if msg := bs.mixed(cn, forSession); msg != "" {
		return nil, msg
	}
	if forSession {
		if b := bs.byConn[cn][session]; b != nil {
			return b, ""
		}
		return nil, "this connection has not attached that session: attach it first"
	}
	for _, b := range bs.byConn[cn] {
		return b, ""
	}
	return nil, "no session is attached to this connection: attach one first"
}

// attached is the binding of session on cn, if cn attached it; for a
// connection that names no session, the one session it carries (whichever
// it is).
func (bs *bindings) attached(cn Replier, forSession bool, session uint64) *binding {
	if forSession {
		return bs.byConn[cn][session]
	}
	for _, b := range bs.byConn[cn] {
		return b
	}
	return nil
}

// mixed refuses a request whose form (naming its session or not) differs
// from that of the sessions cn has attached: "this connection's session"
// would be ambiguous. "" when the forms agree.
func (bs *bindings) mixed(cn Replier, forSession bool) string {
	named, ok := bs.form[cn]
	switch {
	case ok && forSession && !named:
		return "this connection attached its session without naming it: its requests name no session (name the session in every session request of a connection, or in none)"
	case ok && !forSession && named:
		return "this connection's session requests name their session: this one names none (name the session in every session request of a connection, or in none)"
	}
	return ""
}

// bind records that cn carries b's session. On a connection that names no
// session it replaces the session cn carried (returned, to uncount it);
// on one that does, it adds it (or replaces the same session's binding).
// added reports whether cn did not carry b's session before.
func (bs *bindings) bind(cn Replier, forSession bool, b *binding) (replaced *binding, added bool) {
	m := bs.byConn[cn]
	if m == nil {
		m = make(map[uint64]*binding)
		bs.byConn[cn] = m
	}
	if !forSession {
		for id, old := range m {
			if id != b.session {
				delete(m, id)
				replaced = old
			}
		}
	}
	added = m[b.session] == nil
	m[b.session] = b
	return replaced, added
}

// unbind forgets that cn carries session.
func (bs *bindings) unbind(cn Replier, session uint64) {
	delete(bs.byConn[cn], session)
	if len(bs.byConn[cn]) == 0 {
		delete(bs.byConn, cn) // its form stays until it closes
	}
}

// dropConn forgets every session cn carries and returns them in session-id
// order (the order of their detaches in the log does not depend on a map's).
func (bs *bindings) dropConn(cn Replier) []*binding {
	m := bs.byConn[cn]
	out := make([]*binding, 0, len(m))
	for _, b := range m {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *binding) int {
		switch {
		case a.session < b.session:
			return -1
		case a.session > b.session:
			return 1
		}
		return 0
	})
	delete(bs.byConn, cn)
	delete(bs.form, cn)
	return out
}

// connOf is the connection currently attached to session (the one that
// attached with the highest seq_no), if any.
func (bs *bindings) connOf(session uint64) (Replier, *binding) {
	var best Replier
	var bb *binding
	for cn, m := range bs.byConn {
		if b := m[session]; b != nil && (bb == nil || b.seq > bb.seq) {
			best, bb = cn, b
		}
	}
	return best, bb
}
