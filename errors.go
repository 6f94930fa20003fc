package ticketing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Sentinel errors. Every error returned by this package matches one or more
// of them with errors.Is; the error's text says what happened in full.
var (
	// ErrInvalidArgument: an argument is out of range (wait, lease, budget,
	// key length). Nothing was sent.
	ErrInvalidArgument error = &sentinel{"invalid argument"}

	// ErrIndeterminate: the request may have reached the server, but its final
	// answer was lost (the connection dropped or went silent, the server ended
	// the session ("not the leader" or an error), the broker was closed, or no
	// answer came in time). For an acquire it means the ticket may or may not
	// have been granted: do not enter the critical section. The acquire is
	// never re-sent automatically.
	ErrIndeterminate error = &sentinel{"outcome unknown"}

	// ErrNotAcquired: the key was not granted within the wait, the only
	// ordinary "no".
	ErrNotAcquired error = &sentinel{"not acquired within the wait"}

	// ErrCapacity: the server rejected the request for one of its capacity
	// limits (a capacity reject). It is final and returned at once; the client
	// does not retry it. Use errors.As with *CapacityError for the reason.
	ErrCapacity error = &sentinel{"rejected by a server capacity limit"}

	// ErrNotHeld: a release found the key free or held under another token
	// ("not held"): the ticket had already ended (expired, or released
	// earlier).
	ErrNotHeld error = &sentinel{"the token no longer holds the key"}

	// ErrNotHeldAfterRetry: a release whose first answer was lost (the
	// connection dropped after it was sent) was sent again with the same
	// token, and the server answered N. The hold has ended, but the earlier
	// attempt may be what ended it, so it cannot be told from an ordinary
	// release: unlike a plain ErrNotHeld it does not mean that the ticket
	// had already expired or been released before this release. Such an
	// error also matches ErrNotHeld (errors.Is), so code that only checks
	// ErrNotHeld is unchanged; check ErrNotHeldAfterRetry first to tell the
	// two apart.
	ErrNotHeldAfterRetry = errors.New("ticketing: not held when the release was retried (an earlier attempt may have released it)")

	// ErrBudgetExceeded: the ticket was granted, but so late that its
	// conservative remaining time is below the work budget (or not positive).
	// The client released it; do not enter the critical section.
	ErrBudgetExceeded error = &sentinel{"granted too late for the work budget"}

	// ErrUnauthenticated: the server refused the hello's token
	// (CodeUnauthenticated),
	// or refused the client certificate or required one (mutual TLS).
	// WaitReady and calls made while the refusal persists return it promptly;
	// the broker keeps retrying in the background with backoff.
	ErrUnauthenticated error = &sentinel{"unauthenticated"}

	// ErrUnavailable: no usable connection to the cluster leader: it could
	// not be reached before the context ended, or, for requests without an
	// effect (Describe, admin requests), the connection was lost before the
	// answer. Requests that may have had an effect report ErrIndeterminate
	// instead.
	ErrUnavailable error = &sentinel{"leader unavailable"}

	// ErrClosed: the Broker (or Admin) was closed.
	ErrClosed error = &sentinel{"closed"}

	// ErrReleaseDropped: Ticket.Close could not queue its background release
	// because the release queue was full. The ticket stays held until its
	// lease expires.
	ErrReleaseDropped error = &sentinel{"background release dropped, the release queue is full"}

	// ErrNotLeader: an admin request needs the leader and the node is a
	// follower. Use errors.As with *NotLeaderError for the leader's address.
	ErrNotLeader error = &sentinel{"the node is not the leader"}

	// ErrPermissionDenied: the server refused the request because this
	// client's principal may not make it ("forbidden"): its role does not
	// allow it, the key is outside its key prefixes, or the ticket to release
	// was granted to another principal. It is final, nothing happened, and the
	// connection stays usable; the same request is refused again until the
	// server's configuration changes. Use errors.As with *PermissionError for
	// the reason.
	ErrPermissionDenied error = &sentinel{"permission denied"}
)

// prefix starts the text of every error of this package.
const prefix = "ticketing: "

// detailer is an error of this package: detail is its text without prefix,
// so that an error quoting another builds its text from the parts rather
// than by cutting the prefix off a string.
type detailer interface{ detail() string }

// detailOf is err's text, without prefix when err is this package's own.
func detailOf(err error) string {
	if d, ok := err.(detailer); ok {
		return d.detail()
	}
	return err.Error()
}

// sentinel is the type of the Err* values.
type sentinel struct{ msg string }

func (e *sentinel) Error() string  { return prefix + e.msg }
func (e *sentinel) detail() string { return e.msg }

// PermissionReason says why the server refused a request as forbidden.
type PermissionReason uint8

// Refusal reasons (docs/protocol.md).
const (
	PermissionRole  = PermissionReason(wire.ForbiddenRole)  // the principal's role does not allow the request
	PermissionKey   = PermissionReason(wire.ForbiddenKey)   // the key is outside the principal's key prefixes
	PermissionOwner = PermissionReason(wire.ForbiddenOwner) // the ticket was granted to another principal
)

func (r PermissionReason) String() string {
	switch r {
	case PermissionRole:
		return "the client's role does not allow this request (an admin token is needed for admin operations)"
	case PermissionKey:
		return "the key is outside the key prefixes the client may use"
	case PermissionOwner:
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

func (e *PermissionError) Error() string { return prefix + e.detail() }
func (e *PermissionError) detail() string {
	return fmt.Sprintf("server %s refused the request: %s", e.Addr, e.Reason)
}

// Is makes it match ErrPermissionDenied.
func (e *PermissionError) Is(target error) bool { return target == ErrPermissionDenied }

// permissionError is the error of an operation answered F.
func permissionError(c *conn, f *wire.Frame, op, key, effect string) error {
	pe := &PermissionError{Addr: c.addr, Reason: PermissionReason(f.Reason)}
	e := newOpError(op, key, key != "", pe, "permission denied: "+pe.Reason.String()+effect, ErrPermissionDenied)
	e.hide = true
	return e
}

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

func (e *IndeterminateError) Error() string { return prefix + e.detail() }
func (e *IndeterminateError) detail() string {
	return fmt.Sprintf("outcome of the acquire of %q by owner %x unknown", e.Key, e.Owner[:])
}

// Is makes it match ErrIndeterminate.
func (e *IndeterminateError) Is(target error) bool { return target == ErrIndeterminate }

// ErrorCode is the stable numeric code of an error with which a server ends
// a session.
type ErrorCode uint16

// Server error codes (docs/protocol.md), the protocol's own values.
const (
	CodeMalformedFrame     = ErrorCode(wire.CodeMalformedFrame)
	CodeFrameTooLarge      = ErrorCode(wire.CodeFrameTooLarge)
	CodeUnknownFrame       = ErrorCode(wire.CodeUnknownFrame)
	CodeUnsupportedVersion = ErrorCode(wire.CodeUnsupportedVersion)
	CodeUnauthenticated    = ErrorCode(wire.CodeUnauthenticated)
	CodeHelloRequired      = ErrorCode(wire.CodeHelloRequired)
	CodeHelloTimeout       = ErrorCode(wire.CodeHelloTimeout)
	CodeInvalidArgument    = ErrorCode(wire.CodeInvalidArgument)
	CodePingTimeout        = ErrorCode(wire.CodePingTimeout)
	CodeSlowConsumer       = ErrorCode(wire.CodeSlowConsumer)
	CodeShuttingDown       = ErrorCode(wire.CodeShuttingDown)
	CodeInternal           = ErrorCode(wire.CodeInternal)
	CodeDuplicateID        = ErrorCode(wire.CodeDuplicateID)
	CodeNotAllowed         = ErrorCode(wire.CodeNotAllowed)
)

func (c ErrorCode) String() string { return wire.Code(c).String() }

// ServerError is a server ending the session with a stable error code. It is found with errors.As in the error a call
// returns. Code 5 (CodeUnauthenticated) also matches ErrUnauthenticated.
type ServerError struct {
	Addr    string    // the server that sent it
	Code    ErrorCode // the wire code
	Message string    // the server's explanation
}

func (e *ServerError) Error() string { return prefix + e.detail() }
func (e *ServerError) detail() string {
	return fmt.Sprintf("server %s ended the session: %s (code %d): %s", e.Addr, e.Code, uint16(e.Code), e.Message)
}

// Is makes a code-5 error match ErrUnauthenticated.
func (e *ServerError) Is(target error) bool {
	return target == ErrUnauthenticated && e.Code == CodeUnauthenticated
}

// CapacityReason says which server limit a capacity reject hit.
type CapacityReason uint8

// Capacity reasons (docs/protocol.md).
const (
	CapacityHeld        = CapacityReason(wire.CapacityHeld)
	CapacityKeyWaiters  = CapacityReason(wire.CapacityKeyWaiters)
	CapacityWaiters     = CapacityReason(wire.CapacityWaiters)
	CapacityInFlight    = CapacityReason(wire.CapacityInFlight)
	CapacityConnections = CapacityReason(wire.CapacityConnections)
	// The principal's own quotas (docs/deployment.md, "Quotas").
	CapacityPrincipalConnections = CapacityReason(wire.CapacityPrincipalConnections)
	CapacityPrincipalHeld        = CapacityReason(wire.CapacityPrincipalHeld)
	CapacityPrincipalWaiters     = CapacityReason(wire.CapacityPrincipalWaiters)
	CapacityPrincipalInFlight    = CapacityReason(wire.CapacityPrincipalInFlight)
	CapacityPrincipalRate        = CapacityReason(wire.CapacityPrincipalRate)
)

func (r CapacityReason) String() string {
	switch r {
	case CapacityHeld:
		return "the server holds its maximum number of tickets"
	case CapacityKeyWaiters:
		return "the key has its maximum number of waiters"
	case CapacityWaiters:
		return "the server has its maximum number of waiters"
	case CapacityInFlight:
		return "the connection has its maximum number of requests in flight"
	case CapacityConnections:
		return "the server has its maximum number of connections"
	case CapacityPrincipalConnections:
		return "the principal has its quota of connections (quota connections)"
	case CapacityPrincipalHeld:
		return "the principal holds its quota of tickets (quota held_tickets)"
	case CapacityPrincipalWaiters:
		return "the principal has its quota of queued acquires (quota waiters)"
	case CapacityPrincipalInFlight:
		return "the principal has its quota of requests in flight (quota in_flight)"
	case CapacityPrincipalRate:
		return "the principal sends requests faster than its quota (quota requests_per_second)"
	}
	return fmt.Sprintf("capacity reason %d", uint8(r))
}

// CapacityError is a final capacity reject. It matches ErrCapacity.
type CapacityError struct {
	Addr   string
	Reason CapacityReason
}

func (e *CapacityError) Error() string { return prefix + e.detail() }
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

func (e *NotLeaderError) Error() string { return prefix + e.detail() }
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

func (e *AdminError) Error() string { return prefix + e.detail() }
func (e *AdminError) detail() string {
	return fmt.Sprintf("admin %s on %s failed: %s", e.Op, e.Addr, e.Message)
}

// opError is what every call returns: which operation on which key, what
// happened in words, the sentinel kinds it matches and the underlying cause.
type opError struct {
	op     string
	key    string
	hasKey bool
	msg    string
	kinds  []error
	cause  error
	hide   bool // msg already says what cause says
	unsent bool // a release of which nothing was sent (Ticket.Release lets Close retry)
}

func newOpError(op, key string, hasKey bool, cause error, msg string, kinds ...error) *opError {
	return &opError{op: op, key: key, hasKey: hasKey, msg: msg, kinds: kinds, cause: cause}
}

func (e *opError) Error() string { return prefix + e.detail() }

func (e *opError) detail() string {
	var sb strings.Builder
	sb.WriteString(e.op)
	if e.hasKey {
		sb.WriteString(" ")
		sb.WriteString(quoteKey(e.key))
	}
	sb.WriteString(": ")
	sb.WriteString(e.msg)
	if e.cause != nil && !e.hide {
		cs := detailOf(e.cause)
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

// quoteKey quotes key for an error message, cut to keyShown bytes.
func quoteKey(key string) string {
	if len(key) <= keyShown {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:keyShown], len(key))
}

func (e *opError) Unwrap() []error {
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
func (e *opError) RetryClass() retry.Class {
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

func invalidArg(op, key string, hasKey bool, format string, args ...any) error {
	return newOpError(op, key, hasKey, nil, fmt.Sprintf(format, args...)+"; nothing was sent", ErrInvalidArgument)
}
