package ticketing

import (
	"errors"
	"fmt"

	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Sentinel errors. Every error returned by this package matches one or more
// of them with errors.Is; the error's text says what happened in full.
var (
	// ErrInvalidArgument: an argument is out of range (wait, lease, budget,
	// key length). Nothing was sent.
	ErrInvalidArgument = transport.ErrInvalidArgument

	// ErrIndeterminate: the request may have reached the server, but its final
	// answer was lost (the connection dropped or went silent, the server ended
	// the session ("not the leader" or an error), the broker was closed, or no
	// answer came in time). For an acquire it means the ticket may or may not
	// have been granted: do not enter the critical section. The acquire is
	// never re-sent automatically.
	ErrIndeterminate = transport.ErrIndeterminate

	// ErrNotAcquired: the key was not granted within the wait, the only
	// ordinary "no".
	ErrNotAcquired = transport.ErrNotAcquired

	// ErrCapacity: the server rejected the request for one of its capacity
	// limits (a capacity reject). It is final and returned at once; the client
	// does not retry it. Use errors.As with *CapacityError for the reason.
	ErrCapacity = transport.ErrCapacity

	// ErrNotHeld: a release found the key free or held under another token
	// ("not held"): the ticket had already ended (expired, or released
	// earlier).
	ErrNotHeld = transport.ErrNotHeld

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
	ErrBudgetExceeded = transport.ErrBudgetExceeded

	// ErrUnauthenticated: the server refused the hello's token
	// (CodeUnauthenticated),
	// or refused the client certificate or required one (mutual TLS).
	// WaitReady and calls made while the refusal persists return it promptly;
	// the broker keeps retrying in the background with backoff.
	ErrUnauthenticated = transport.ErrUnauthenticated

	// ErrUnavailable: no usable connection to the cluster leader: it could
	// not be reached before the context ended, or, for requests without an
	// effect (Describe, admin requests), the connection was lost before the
	// answer. Requests that may have had an effect report ErrIndeterminate
	// instead.
	ErrUnavailable = transport.ErrUnavailable

	// ErrClosed: the Broker (or Admin) was closed.
	ErrClosed = transport.ErrClosed

	// ErrReleaseDropped: Ticket.Close could not queue its background release
	// because the release queue was full. The ticket stays held until its
	// lease expires.
	ErrReleaseDropped = transport.ErrReleaseDropped

	// ErrNotLeader: an admin request needs the leader and the node is a
	// follower. Use errors.As with *NotLeaderError for the leader's address.
	ErrNotLeader = transport.ErrNotLeader

	// ErrPermissionDenied: the server refused the request because this
	// client's principal may not make it ("forbidden"): its role does not
	// allow it, the key is outside its key prefixes, or the ticket to release
	// was granted to another principal. It is final, nothing happened, and the
	// connection stays usable; the same request is refused again until the
	// server's configuration changes. Use errors.As with *PermissionError for
	// the reason.
	ErrPermissionDenied = transport.ErrPermissionDenied
)

// PermissionReason says why the server refused a request as forbidden.
//
// Its String method says it in words.
type PermissionReason = transport.PermissionReason

// Refusal reasons (docs/protocol.md).
const (
	PermissionRole  = PermissionReason(wire.ForbiddenRole)  // the principal's role does not allow the request
	PermissionKey   = PermissionReason(wire.ForbiddenKey)   // the key is outside the principal's key prefixes
	PermissionOwner = PermissionReason(wire.ForbiddenOwner) // the ticket was granted to another principal
)

// PermissionError is a "forbidden" answer: the server refused the request for
// this client's principal. It matches ErrPermissionDenied.
//
//	type PermissionError struct {
//		Addr   string           // the server that refused
//		Reason PermissionReason // why
//	}
type PermissionError = transport.PermissionError

// permissionError is the error of an operation answered F.
func permissionError(c *transport.Conn, f *wire.Frame, op, key, effect string) error {
	pe := &PermissionError{Addr: c.Addr(), Reason: PermissionReason(f.Reason)}
	e := newOpError(op, key, key != "", pe, "permission denied: "+pe.Reason.String()+effect, ErrPermissionDenied)
	e.Hide = true
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
//
//	type IndeterminateError struct {
//		Key   string
//		Owner [16]byte
//	}
type IndeterminateError = transport.IndeterminateError

// ErrorCode is the stable numeric code of an error with which a server ends
// a session.
// Its String method is the code's name in the protocol.
type ErrorCode = transport.ErrorCode

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

// ServerError is a server ending the session with a stable error code. It is found with errors.As in the error a call
// returns. Code 5 (CodeUnauthenticated) also matches ErrUnauthenticated.
//
//	type ServerError struct {
//		Addr    string    // the server that sent it
//		Code    ErrorCode // the wire code
//		Message string    // the server's explanation
//	}
type ServerError = transport.ServerError

// CapacityReason says which server limit a capacity reject hit.
// Its String method says it in words.
type CapacityReason = transport.CapacityReason

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

// CapacityError is a final capacity reject. It matches ErrCapacity.
// Its RetryClass is OVERLOADED: retried on package retry's slow backoff
// tier.
//
//	type CapacityError struct {
//		Addr   string         // the server that rejected the request
//		Reason CapacityReason // which limit
//	}
type CapacityError = transport.CapacityError

// NotLeaderError is returned by admin requests that only the leader serves
// when sent to a follower, and reported when a server answers a hello or ends
// a session with "not the leader". LeaderAddr is the leader's client address
// when the node knows it, so a tool can follow it.
// It matches ErrNotLeader.
//
//	type NotLeaderError struct {
//		Addr       string // the node that answered
//		LeaderAddr string // the leader's client address, "" if unknown
//	}
type NotLeaderError = transport.NotLeaderError

// AdminError is an admin request that the node answered with "failed".
//
//	type AdminError struct {
//		Addr    string // the node
//		Op      string // the admin operation
//		Message string // the node's explanation
//	}
type AdminError = transport.AdminError

// opError is what every call returns: which operation on which key, what
// happened in words, the sentinel kinds it matches and the underlying cause.
type opError = transport.OpError

func newOpError(op, key string, hasKey bool, cause error, msg string, kinds ...error) *opError {
	return transport.NewOpError(op, key, hasKey, cause, msg, kinds...)
}

// prefix starts the text of every error of this package.
const prefix = transport.Prefix

func detailOf(err error) string  { return transport.DetailOf(err) }
func quoteKey(key string) string { return transport.QuoteKey(key) }

func invalidArg(op, key string, hasKey bool, format string, args ...any) error {
	return newOpError(op, key, hasKey, nil, fmt.Sprintf(format, args...)+"; nothing was sent", ErrInvalidArgument)
}
