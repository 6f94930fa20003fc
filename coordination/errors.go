package coordination

import (
	"errors"
	"fmt"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Sentinel errors, one per status of docs/coordination.md, and the
// client-side ones. Every error this package returns matches one of them
// with errors.Is; a status error is also a *StatusError.
var (
	ErrNotFound           = errors.New("coordination: not found")
	ErrAlreadyExists      = errors.New("coordination: already exists")
	ErrBadRequest         = errors.New("coordination: bad request")
	ErrPreconditionFailed = errors.New("coordination: precondition failed")
	ErrAborted            = errors.New("coordination: aborted")
	ErrSessionExpired     = errors.New("coordination: session expired")
	ErrBadSession         = errors.New("coordination: bad session")
	ErrUnauthorized       = errors.New("coordination: unauthorized")
	ErrLimitExceeded      = errors.New("coordination: limit exceeded")

	// ErrIndeterminate: the connection was lost after a create, update or
	// delete was sent and before its answer: it may or may not have
	// happened. It is never re-sent automatically; describe to find out.
	// An acquire or describe whose connection was lost twice before the
	// server said anything about it is not sent a third time either. It is
	// the Ticketing client's sentinel: errors.Is matches either package's.
	ErrIndeterminate = ticketing.ErrIndeterminate
	// ErrUnavailable: no leader could be reached before the context ended
	// (the Ticketing client's sentinel).
	ErrUnavailable = ticketing.ErrUnavailable
	// ErrUnauthenticated: the server refused the client token (WithToken)
	// (the Ticketing client's sentinel).
	ErrUnauthenticated = ticketing.ErrUnauthenticated
	// ErrWrongCluster: the servers reachable belong to another cluster than
	// the one the Ticketing client is pinned to (ticketing.WithClusterID, or
	// the first cluster it reached) (the Ticketing client's sentinel).
	ErrWrongCluster = ticketing.ErrWrongCluster
	// ErrClosed: the client or session was closed (the Ticketing client's
	// sentinel).
	ErrClosed = ticketing.ErrClosed
	// ErrNotAcquired: an acquire ended without the semaphore (timeout 0, or
	// its timeout passed in the queue) (the Ticketing client's sentinel).
	ErrNotAcquired = ticketing.ErrNotAcquired

	// ErrDeadlinePassed: the session's conservative deadline passed without
	// an answer from the server, so its holds and leadership were given up
	// on the client (the server may still have them, until it expires the
	// session; a restored session gets them back only by acquiring again).
	// It is the cause (context.Cause) of the leases' contexts.
	ErrDeadlinePassed = errors.New("coordination: session deadline passed")
	// ErrLost: a hold was taken away by a force delete (a lease's cause).
	ErrLost = errors.New("coordination: hold lost")
	// ErrWrongKind: a recipe (Mutex, Election, Discovery, Publication)
	// found its semaphore with a limit or data that it does not create: the
	// semaphore was made by hand or by another program, and the recipe
	// refuses to use it.
	ErrWrongKind = errors.New("coordination: semaphore of another kind")
	// ErrNotLeading: Resign found the session neither leading nor
	// campaigning in the election.
	ErrNotLeading = errors.New("coordination: not leading")
	// ErrReleased: the hold was released (a lease's cause).
	ErrReleased = errors.New("coordination: released")
)

var statusErrs = map[uint16]error{
	wire.CoordNotFound: ErrNotFound, wire.CoordAlreadyExists: ErrAlreadyExists, wire.CoordBadRequest: ErrBadRequest,
	wire.CoordPreconditionFailed: ErrPreconditionFailed, wire.CoordAborted: ErrAborted,
	wire.CoordSessionExpired: ErrSessionExpired, wire.CoordBadSession: ErrBadSession,
	wire.CoordUnauthorized: ErrUnauthorized, wire.CoordLimitExceeded: ErrLimitExceeded,
}

// StatusError is a per-operation status other than SUCCESS, with the
// server's message.
type StatusError struct {
	Op      string
	Status  uint16
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("coordination: %s: %s: %s", e.Op, wire.CoordStatusName(e.Status), e.Message)
}

// Unwrap returns the sentinel of the status.
func (e *StatusError) Unwrap() error {
	if s, ok := statusErrs[e.Status]; ok {
		return s
	}
	return nil
}

// statusClasses are the retry classes (package retry) of the statuses,
// which are named after the YDB coordination statuses as the classes are
// after YDB's: BAD_SESSION (the request was refused before it ran) is
// retried always, SESSION_EXPIRED only for idempotent work, ABORTED (a
// waiting acquire replaced or its semaphore force-deleted) always; the
// rest never. A body that retry.Do re-runs for a session class must open
// its own session: a session that expired stays expired.
var statusClasses = map[uint16]retry.Class{
	wire.CoordNotFound: retry.NotFound, wire.CoordBadRequest: retry.InvalidArgument,
	wire.CoordPreconditionFailed: retry.PreconditionFailed, wire.CoordAborted: retry.Aborted,
	wire.CoordSessionExpired: retry.SessionExpired, wire.CoordBadSession: retry.BadSession,
}

// RetryClass is the status's retry class (see statusClasses); statuses
// without one (ALREADY_EXISTS, UNAUTHORIZED, LIMIT_EXCEEDED) are
// NON_RETRYABLE.
func (e *StatusError) RetryClass() retry.Class {
	if c, ok := statusClasses[e.Status]; ok {
		return c
	}
	return retry.NonRetryable
}

func statusError(op string, status uint16, msg []byte) error {
	if status == wire.CoordSuccess {
		return nil
	}
	return &StatusError{Op: op, Status: status, Message: string(msg)}
}
