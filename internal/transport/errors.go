package transport

// The client's errors, defined once for both fronts: package ticketing
// re-exports the sentinels and types (its documentation describes them), and
// package coordination matches them.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// The sentinels. Every error of the client matches one or more of them with
// errors.Is; package ticketing re-exports each (the same values) and
// documents what it means.
var (
	ErrInvalidArgument  error = &sentinel{"invalid argument"}
	ErrIndeterminate    error = &sentinel{"outcome unknown"}
	ErrNotAcquired      error = &sentinel{"not acquired within the wait"}
	ErrCapacity         error = &sentinel{"rejected by a server capacity limit"}
	ErrNotHeld          error = &sentinel{"the token no longer holds the key"}
	ErrBudgetExceeded   error = &sentinel{"granted too late for the work budget"}
	ErrUnauthenticated  error = &sentinel{"unauthenticated"}
	ErrUnavailable      error = &sentinel{"leader unavailable"}
	ErrClosed           error = &sentinel{"closed"}
	ErrReleaseDropped   error = &sentinel{"background release dropped, the release queue is full"}
	ErrNotLeader        error = &sentinel{"the node is not the leader"}
	ErrPermissionDenied error = &sentinel{"permission denied"}
	ErrTicketExpired    error = &sentinel{"the ticket's conservative deadline has passed"}
	ErrTicketReleased   error = &sentinel{"the ticket was released"}
)

// Prefix starts the text of every error of the client.
const Prefix = "ticketing: "

// detailer is an error of the client: detail is its text without Prefix,
// so that an error quoting another builds its text from the parts rather
// than by cutting the Prefix off a string.
type detailer interface{ detail() string }

// DetailOf is err's text, without Prefix when err is this package's own.
func DetailOf(err error) string {
	if d, ok := err.(detailer); ok {
		return d.detail()
	}
	return err.Error()
}

// sentinel is the type of the Err* values.
type sentinel struct{ msg string }

func (e *sentinel) Error() string  { return Prefix + e.msg }
func (e *sentinel) detail() string { return e.msg }

// PermissionReason says why the server refused a request as forbidden.
type PermissionReason uint8

func (r PermissionReason) String() string {
	switch r {
	case PermissionReason(wire.ForbiddenRole):
		return "the client's role does not allow this request (an admin token is needed for admin operations)"
	case PermissionReason(wire.ForbiddenKey):
		return "the key is outside the key prefixes the client may use"
	case PermissionReason(wire.ForbiddenOwner):
		return "the ticket was granted to another principal"
	}
	return fmt.Sprintf("refusal reason %d", uint8(r))
}

// PermissionError is a "forbidden" answer: the server refused the request for
// this client's principal. It matches ErrPermissionDenied.
type PermissionError struct {
	Addr   string
	Reason PermissionReason
}

func (e *PermissionError) Error() string { return Prefix + e.detail() }
func (e *PermissionError) detail() string {
	return fmt.Sprintf("server %s refused the request: %s", e.Addr, e.Reason)
}

// Is makes it match ErrPermissionDenied.
func (e *PermissionError) Is(target error) bool { return target == ErrPermissionDenied }

// IndeterminateError is the ErrIndeterminate of an acquire: the key and the
// owner (the 16 random bytes the acquire sent) whose outcome is unknown. Find
// it with errors.As. When the acquire's connection ended before its final
// answer, the broker itself asks the leader, once it has a connection again,
// to end whatever that owner holds or waits for on the key (release
// by owner), so an orphaned grant is freed within a reconnect rather
// than at the end of its lease; the caller still must not enter the critical
// section. Owner also identifies the hold in Broker.Describe.
type IndeterminateError struct {
	Key   string
	Owner [16]byte
}

func (e *IndeterminateError) Error() string { return Prefix + e.detail() }
func (e *IndeterminateError) detail() string {
	return fmt.Sprintf("outcome of the acquire of %q by owner %x unknown", e.Key, e.Owner[:])
}

// Is makes it match ErrIndeterminate.
func (e *IndeterminateError) Is(target error) bool { return target == ErrIndeterminate }

// ErrorCode is the stable numeric code of an error with which a server ends
// a session.
type ErrorCode uint16

func (c ErrorCode) String() string { return wire.Code(c).String() }

// ServerError is a server ending the session with a stable error code. It is found with errors.As in the error a call
// returns. Code 5 (ErrorCode(wire.CodeUnauthenticated)) also matches ErrUnauthenticated.
type ServerError struct {
	Addr    string    // the server that sent it
	Code    ErrorCode // the wire code
	Message string    // the server's explanation
}

func (e *ServerError) Error() string { return Prefix + e.detail() }
func (e *ServerError) detail() string {
	return fmt.Sprintf("server %s ended the session: %s (code %d): %s", e.Addr, e.Code, uint16(e.Code), e.Message)
}

// Is makes a code-5 error match ErrUnauthenticated.
func (e *ServerError) Is(target error) bool {
	return target == ErrUnauthenticated && e.Code == ErrorCode(wire.CodeUnauthenticated)
}

// CapacityReason says which server limit a capacity reject hit.
type CapacityReason uint8

func (r CapacityReason) String() string {
	switch r {
	case CapacityReason(wire.CapacityHeld):
		return "the server holds its maximum number of tickets"
	case CapacityReason(wire.CapacityKeyWaiters):
		return "the key has its maximum number of waiters"
	case CapacityReason(wire.CapacityWaiters):
		return "the server has its maximum number of waiters"
	case CapacityReason(wire.CapacityInFlight):
		return "the connection has its maximum number of requests in flight"
	case CapacityReason(wire.CapacityConnections):
		return "the server has its maximum number of connections"
	case CapacityReason(wire.CapacityPrincipalConnections):
		return "the principal has its quota of connections (quota connections)"
	case CapacityReason(wire.CapacityPrincipalHeld):
		return "the principal holds its quota of tickets (quota held_tickets)"
	case CapacityReason(wire.CapacityPrincipalWaiters):
		return "the principal has its quota of queued acquires (quota waiters)"
	case CapacityReason(wire.CapacityPrincipalInFlight):
		return "the principal has its quota of requests in flight (quota in_flight)"
	case CapacityReason(wire.CapacityPrincipalRate):
		return "the principal sends requests faster than its quota (quota requests_per_second)"
	}
	return fmt.Sprintf("capacity reason %d", uint8(r))
}

// CapacityError is a final capacity reject. It matches ErrCapacity.
type CapacityError struct {
	Addr   string
	Reason CapacityReason
}

func (e *CapacityError) Error() string { return Prefix + e.detail() }
func (e *CapacityError) detail() string {
	return fmt.Sprintf("server %s rejected the request: %s", e.Addr, e.Reason)
}

// Is makes it match ErrCapacity.
func (e *CapacityError) Is(target error) bool { return target == ErrCapacity }

// RetryClass is OVERLOADED: retried on the slow backoff tier.
func (e *CapacityError) RetryClass() retry.Class { return retry.Overloaded }

// NotLeaderError is returned by admin requests that only the leader serves
// when sent to a follower, and reported when a server answers a hello or ends
// a session with "not the leader". LeaderAddr is the leader's client address
// when the node knows it, so a tool can follow it.
type NotLeaderError struct {
	Addr       string // the node that answered
	LeaderAddr string // the leader's client address, "" if unknown
}

func (e *NotLeaderError) Error() string { return Prefix + e.detail() }
func (e *NotLeaderError) detail() string {
	if e.LeaderAddr == "" {
		return fmt.Sprintf("%s is not the leader and does not know the leader", e.Addr)
	}
	return fmt.Sprintf("%s is not the leader; the leader is %s", e.Addr, e.LeaderAddr)
}

// Is makes it match ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// AdminError is an admin request that the node answered with "failed".
type AdminError struct {
	Addr    string
	Op      string
	Message string
}

func (e *AdminError) Error() string { return Prefix + e.detail() }
func (e *AdminError) detail() string {
	return fmt.Sprintf("admin %s on %s failed: %s", e.Op, e.Addr, e.Message)
}

// OpError is what every call returns: which operation on which key, what
// happened in words, the sentinel kinds it matches and the underlying cause.
type OpError struct {
	op     string
	key    string
	hasKey bool
	msg    string
	kinds  []error
	cause  error
	Hide   bool // msg already says what cause says
	Unsent bool // a release of which nothing was sent (Ticket.Release lets Close retry)
}

func NewOpError(op, key string, hasKey bool, cause error, msg string, kinds ...error) *OpError {
	return &OpError{op: op, key: key, hasKey: hasKey, msg: msg, kinds: kinds, cause: cause}
}

func (e *OpError) Error() string { return Prefix + e.detail() }

func (e *OpError) detail() string {
	var sb strings.Builder
	sb.WriteString(e.op)
	if e.hasKey {
		sb.WriteString(" ")
		sb.WriteString(QuoteKey(e.key))
	}
	sb.WriteString(": ")
	sb.WriteString(e.msg)
	if e.cause != nil && !e.Hide {
		cs := DetailOf(e.cause)
		if !strings.Contains(e.msg, cs) {
			sb.WriteString(" (")
			sb.WriteString(cs)
			sb.WriteString(")")
		}
	}
	return sb.String()
}

// keyShown is how many bytes of a key an error message quotes: enough to
// recognise it, without a 1 KiB key filling the log line.
const keyShown = 64

// QuoteKey quotes key for an error message, cut to keyShown bytes.
func QuoteKey(key string) string {
	if len(key) <= keyShown {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:keyShown], len(key))
}

func (e *OpError) Unwrap() []error {
	out := make([]error, 0, len(e.kinds)+1)
	out = append(out, e.kinds...)
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// RetryClass reports the retry class for package retry: capacity rejects
// are OVERLOADED (slow tier), unknown outcomes UNDETERMINED and unusable
// connections TRANSPORT_UNAVAILABLE (both retried only when the caller's
// work is idempotent); invalid arguments are INVALID_ARGUMENT, a cancelled
// context CANCELED and an ended deadline TIMEOUT; everything else (not
// acquired, not held, budget exceeded, unauthenticated, closed) is
// NON_RETRYABLE. None of those is retried.
func (e *OpError) RetryClass() retry.Class {
	return classOf(e.kinds)
}

func classOf(kinds []error) retry.Class {
	has := func(t error) bool {
		for _, k := range kinds {
			if errors.Is(k, t) {
				return true
			}
		}
		return false
	}
	switch {
	case has(ErrInvalidArgument):
		return retry.InvalidArgument
	case has(ErrClosed), has(ErrUnauthenticated), has(ErrNotAcquired),
		has(ErrNotHeld), has(ErrBudgetExceeded), has(ErrReleaseDropped):
		return retry.NonRetryable
	case has(ErrCapacity):
		return retry.Overloaded
	case has(ErrIndeterminate):
		return retry.Undetermined
	case has(ErrUnavailable):
		return retry.TransportUnavailable
	case has(context.Canceled):
		return retry.Canceled
	case has(context.DeadlineExceeded):
		return retry.Timeout
	}
	return retry.NonRetryable
}

// ConfigError is a bad configuration: it matches ErrInvalidArgument.
func ConfigError(cause error, format string, args ...any) error {
	return NewOpError("connect", "", false, cause, fmt.Sprintf(format, args...), ErrInvalidArgument)
}
