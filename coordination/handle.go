package coordination

import (
	"context"
	"time"
)

// SessionOption configures a session.
type SessionOption func(*Session)

// WithTimeout sets how long the session survives a lost connection (default
// 30 s, at least MinSessionTimeout, at most 30 min). The session's holds
// end on the client a little earlier than on the server: see Lease.Context.
func WithTimeout(d time.Duration) SessionOption { return func(s *Session) { s.a.timeout = d } }

// WithDescription sets the session's description (up to 1024 bytes).
func WithDescription(d string) SessionOption { return func(s *Session) { s.a.desc = d } }

// WithStateCallback calls fn at every state change, in order, one call at
// a time, on a goroutine of the session's (never on the connection's
// reader): a slow fn delays only its later calls, which wait in a queue,
// never the session or the other sessions on its connection.
func WithStateCallback(fn func(State)) SessionOption { return func(s *Session) { s.a.onState = fn } }

// Session is a coordination session on one node. It reconnects and
// restores itself after a lost connection; Context ends when it expires.
type Session struct {
	// Its attachment (attach, restore, deadline, keep-alive and the
	// sending of its requests), and the state of the requests built over
	// it: the leases it holds, the watches it set, the waits being
	// withdrawn.
	a           *attachment
	leases      leaseTable
	watches     watchSet
	withdrawals withdrawals
	callbacks   callbackQueue // the caller's callbacks (OnQueued), off the connection's reader
}

// Session starts a session on the node at path.
func (c *Client) Session(ctx context.Context, path string, opts ...SessionOption) (*Session, error) {
	s := &Session{a: newAttachment(c.t, c.log, c.life, path)}
	for _, o := range opts {
		o(s)
	}
	s.a.hooks = attachmentHooks{
		detached:   s.watches.fireAll,
		holdsEnded: s.leases.forgetAll,
		ended: func(err error) {
			s.leases.endAll(err)
			s.watches.fireAll()
		},
		lost: s.leases.lost,
	}
	if err := s.a.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ID is the session's id.
func (s *Session) ID() uint64 { return s.a.id }

// Context ends when the client can no longer rely on the session's holds:
// at the session's conservative deadline (no answer that follows a commit
// for timeout × 0.99 − 100 ms since the send time of the last answered
// request: the server might expire the session soon; docs/coordination.md,
// "The client's deadline"), or when the session ends. context.Cause says
// which: ErrDeadlinePassed, ErrSessionExpired, ErrClosed. Watching it is
// enough to stop in time: every lease and leadership of the session ends
// with it. Its Err checks the deadline when called, so a process that was
// paused past the deadline sees it ended at once, before any timer runs.
//
// After the deadline the session restores itself when it can; once it is
// ATTACHED again, Context returns a new context (the ended one stays
// ended), and holds come back only from new answers (acquire or campaign
// again).
func (s *Session) Context() context.Context {
	holds, live := s.a.context()
	if !live {
		return holds // ended: its cause says why the session ended
	}
	return &holdContext{Context: holds, a: s.a}
}

// State is the session's current state. It checks the deadline when
// called: a session whose deadline has passed is never reported ATTACHED,
// even before the deadline's timer has run (a process resumed after a
// pause).
func (s *Session) State() State { return s.a.stateNow() }

// Close stops the session: its holds are released at once.
func (s *Session) Close(ctx context.Context) error { return s.a.close(ctx) }
