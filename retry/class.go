package retry

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
)

// Class is the retry class of an error, named after the YDB status codes the
// policy was ported from. The zero value, NonRetryable, is never retried.
type Class int

const (
	NonRetryable Class = iota // unknown or permanent: not retried

	// Always retried.
	Aborted                 // transaction conflict, deadlock, SQLITE_BUSY: fast backoff
	Unavailable             // server shutting down or starting up: fast backoff
	Overloaded              // server rejected the call for capacity: slow backoff
	ClientResourceExhausted // too many connections: slow backoff
	BadSession              // session must be recreated (coordination BAD_SESSION): no delay

	// Retried only when the call is marked idempotent: the outcome of the
	// failed attempt is unknown, so running it again may apply it twice.
	Undetermined         // commit outcome unknown: fast backoff
	TransportUnavailable // connection could not be used (bad conn): fast backoff
	ClientTransportError // connection broke mid-call (YDB's CLIENT_GRPC_ERROR): fast backoff
	SessionExpired       // session expired mid-call (coordination SESSION_EXPIRED): no delay

	// Never retried; named so that errors can report them explicitly.
	Timeout            // deadline exceeded
	Canceled           // context canceled
	PreconditionFailed // a stale fencing token (package fence), coordination PRECONDITION_FAILED
	NotFound           // coordination NOT_FOUND
	InvalidArgument    // the Ticketing client's ErrInvalidArgument, coordination BAD_REQUEST
)

var classNames = [...]string{
	NonRetryable:            "NON_RETRYABLE",
	Aborted:                 "ABORTED",
	Unavailable:             "UNAVAILABLE",
	Overloaded:              "OVERLOADED",
	ClientResourceExhausted: "CLIENT_RESOURCE_EXHAUSTED",
	BadSession:              "BAD_SESSION",
	Undetermined:            "UNDETERMINED",
	TransportUnavailable:    "TRANSPORT_UNAVAILABLE",
	ClientTransportError:    "CLIENT_TRANSPORT_ERROR",
	SessionExpired:          "SESSION_EXPIRED",
	Timeout:                 "TIMEOUT",
	Canceled:                "CANCELED",
	PreconditionFailed:      "PRECONDITION_FAILED",
	NotFound:                "NOT_FOUND",
	InvalidArgument:         "INVALID_ARGUMENT",
}

func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether an error of class c is retried. Idempotent calls
// are additionally retried on classes whose failed attempt may have taken
// effect.
func (c Class) Retryable(idempotent bool) bool {
	switch c {
	case Aborted, Unavailable, Overloaded, ClientResourceExhausted, BadSession:
		return true
	case Undetermined, TransportUnavailable, ClientTransportError, SessionExpired:
		return idempotent
	}
	return false
}

// tier selects the backoff curve of a retryable class.
type tier int

const (
	tierNone tier = iota // retry at once
	tierFast
	tierSlow
)

func (c Class) tier() tier {
	switch c {
	case Aborted, Unavailable, Undetermined, TransportUnavailable, ClientTransportError:
		return tierFast
	case Overloaded, ClientResourceExhausted:
		return tierSlow
	}
	return tierNone
}

// RetryClasser is implemented by errors that know their own retry class,
// such as the Ticketing client's errors. Classify consults it before anything
// else, so an explicit class always wins over what the error wraps.
type RetryClasser interface {
	RetryClass() Class
}

// WithClass returns an error that wraps err and reports class c.
func WithClass(err error, c Class) error {
	if err == nil {
		return nil
	}
	return &classed{err: err, class: c}
}

type classed struct {
	err   error
	class Class
}

func (e *classed) Error() string     { return e.err.Error() }
func (e *classed) Unwrap() error     { return e.err }
func (e *classed) RetryClass() Class { return e.class }

// Classify returns the retry class of err. In order, it looks for:
//
//   - an error in the chain implementing RetryClasser;
//   - context.Canceled (Canceled), context.DeadlineExceeded and
//     os.ErrDeadlineExceeded (Timeout);
//   - a MySQL server error: 1213 deadlock and 1205 lock wait timeout are
//     Aborted (the whole transaction is re-run, so a statement-only rollback
//     on 1205 is harmless); 1040/1203 too many connections are
//     ClientResourceExhausted;
//   - an SQLSTATE (any error with a SQLState() string method, such as
//     *pgconn.PgError): 40001 serialization failure, 40P01 deadlock and
//     55P03 lock not available (lock_timeout) are Aborted, 53300 too many
//     connections is ClientResourceExhausted,
//     57P01..57P03 shutdown/cannot connect now are Unavailable, and class 08
//     (connection exception) is TransportUnavailable;
//   - a modernc.org/sqlite error with primary code SQLITE_BUSY or
//     SQLITE_LOCKED (Aborted);
//   - a network timeout (Timeout);
//   - a connection refused at dial time, ECONNREFUSED (Unavailable: nothing
//     was sent, so it is always retried);
//   - a connection that could not be used: driver.ErrBadConn,
//     mysql.ErrInvalidConn (TransportUnavailable);
//   - a connection that broke mid-call: pgx's "conn closed"
//     (pgconn.ErrConnClosed, which pgx returns for a COMMIT cut in flight),
//     ECONNRESET, ECONNABORTED, EPIPE, io.ErrUnexpectedEOF, other
//     *net.OpError (ClientTransportError).
//
// Everything else, including fence.ErrStaleToken and sql.ErrNoRows, is
// NonRetryable.
func Classify(err error) Class {
	if err == nil {
		return NonRetryable
	}
	var rc RetryClasser
	if errors.As(err, &rc) {
		return rc.RetryClass()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return Timeout
	}
	if number, ok := mysqlNumber(err); ok {
		switch number {
		case 1213, 1205: // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
			return Aborted
		case 1040, 1203: // ER_CON_COUNT_ERROR, ER_TOO_MANY_USER_CONNECTIONS
			return ClientResourceExhausted
		}
		return NonRetryable
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		return classifySQLState(se.SQLState())
	}
	if code, ok := sqliteCode(err); ok {
		switch code & 0xff { // primary code; extended codes carry detail in the high bits
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return Aborted
		}
		return NonRetryable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Timeout
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// Refused at dial time: nothing was sent, so nothing was applied.
		return Unavailable
	case errors.Is(err, driver.ErrBadConn), isMySQLInvalidConn(err):
		return TransportUnavailable
	case isPgConnClosed(err), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF):
		return ClientTransportError
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return ClientTransportError
	}
	return NonRetryable
}

func classifySQLState(code string) Class {
	switch code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return Aborted
	case "55P03": // lock_not_available (lock_timeout, NOWAIT): aborts the transaction, like MySQL's 1205
		return Aborted
	case "53300": // too_many_connections
		return ClientResourceExhausted
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return Unavailable
	}
	if strings.HasPrefix(code, "08") { // connection_exception class
		return TransportUnavailable
	}
	return NonRetryable
}

// sqliteCode finds a modernc.org/sqlite *Error in the chain and returns its
// result code. The type is recognised by its package path rather than
// imported, so that importing retry does not link the whole SQLite engine
// into programs that never use it.
func sqliteCode(err error) (int, bool) {
	for _, e := range chain(err) {
		c, ok := e.(interface{ Code() int })
		if !ok {
			continue
		}
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.PkgPath() == "modernc.org/sqlite" && t.Name() == "Error" {
			return c.Code(), true
		}
	}
	return 0, false
}

// mysqlNumber finds a go-sql-driver/mysql *MySQLError in the chain and
// returns its error number. Like sqliteCode, it recognises the type by its
// package path instead of importing the driver, which would register the
// "mysql" driver in every program that imports retry (the Ticketing client
// among them).
func mysqlNumber(err error) (uint16, bool) {
	for _, e := range chain(err) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			continue
		}
		v = v.Elem()
		t := v.Type()
		if t.PkgPath() != mysqlPkg || t.Name() != "MySQLError" || t.Kind() != reflect.Struct {
			continue
		}
		if f := v.FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
			return uint16(f.Uint()), true
		}
	}
	return 0, false
}

const mysqlPkg = "github.com/go-sql-driver/mysql"

// isPgConnClosed reports pgconn's "conn closed" error (the unexported
// error that wraps pgconn.ErrConnClosed), recognised by package path and
// text so that retry does not import pgx. database/sql over pgx's stdlib
// returns it from a COMMIT whose connection was lost while the COMMIT was
// in flight, so the commit may have happened: the outcome is unknown.
// (pgconn marks the error safe to retry, which is not true there.)
func isPgConnClosed(err error) bool {
	for _, e := range chain(err) {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.PkgPath() == "github.com/jackc/pgx/v5/pgconn" && e.Error() == "conn closed" {
			return true
		}
	}
	return false
}

// isMySQLInvalidConn reports the driver's ErrInvalidConn ("invalid
// connection"), a plain errors.New value that can only be recognised by its
// text: the connection broke during the call.
func isMySQLInvalidConn(err error) bool {
	for _, e := range chain(err) {
		if e.Error() == "invalid connection" && reflect.TypeOf(e).String() == "*errors.errorString" {
			return true
		}
	}
	return false
}

// chain lists err and everything it wraps, depth first, like errors.As walks it.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			out = append(out, e)
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			case interface{ Unwrap() []error }:
				for _, x := range u.Unwrap() {
					walk(x)
				}
				return
			default:
				return
			}
		}
	}
	walk(err)
	return out
}
