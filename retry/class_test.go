package retry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite"

	"github.com/ticketing-io/ticketing/fence"
)

// TestPolicyTable checks every row of the policy table in the package doc.
func TestPolicyTable(t *testing.T) {
	rows := []struct {
		class          Class
		name           string
		always, ifIdem bool
		tier           tier
	}{
		{Aborted, "ABORTED", true, true, tierFast},
		{Unavailable, "UNAVAILABLE", true, true, tierFast},
		{Overloaded, "OVERLOADED", true, true, tierSlow},
		{ClientResourceExhausted, "CLIENT_RESOURCE_EXHAUSTED", true, true, tierSlow},
		{BadSession, "BAD_SESSION", true, true, tierNone},
		{SessionBusy, "SESSION_BUSY", true, true, tierNone},
		{Undetermined, "UNDETERMINED", false, true, tierFast},
		{TransportUnavailable, "TRANSPORT_UNAVAILABLE", false, true, tierFast},
		{ClientTransportError, "CLIENT_TRANSPORT_ERROR", false, true, tierFast},
		{SessionExpired, "SESSION_EXPIRED", false, true, tierNone},
		{NonRetryable, "NON_RETRYABLE", false, false, tierNone},
		{Timeout, "TIMEOUT", false, false, tierNone},
		{Canceled, "CANCELED", false, false, tierNone},
		{PreconditionFailed, "PRECONDITION_FAILED", false, false, tierNone},
		{NotFound, "NOT_FOUND", false, false, tierNone},
		{InvalidArgument, "INVALID_ARGUMENT", false, false, tierNone},
	}
	if len(rows) != len(classNames) {
		t.Fatalf("table has %d rows, package has %d classes", len(rows), len(classNames))
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if got := r.class.String(); got != r.name {
				t.Errorf("String() = %q", got)
			}
			if got := r.class.Retryable(false); got != r.always {
				t.Errorf("Retryable(false) = %v, want %v", got, r.always)
			}
			if got := r.class.Retryable(true); got != r.ifIdem {
				t.Errorf("Retryable(true) = %v, want %v", got, r.ifIdem)
			}
			if r.ifIdem {
				if got := r.class.tier(); got != r.tier {
					t.Errorf("tier = %v, want %v", got, r.tier)
				}
			}
			// An error reporting the class explicitly is classified as it says.
			if got := Classify(fmt.Errorf("wrapped: %w", WithClass(errors.New("x"), r.class))); got != r.class {
				t.Errorf("Classify(WithClass) = %v", got)
			}
		})
	}
	if got := Class(99).String(); got != "Class(99)" {
		t.Errorf("unknown class String() = %q", got)
	}
}

// clientError stands in for the Ticketing client's error types, which report
// their class through RetryClasser.
type clientError struct {
	msg   string
	class Class
}

func (e *clientError) Error() string     { return e.msg }
func (e *clientError) RetryClass() Class { return e.class }

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "m"} }
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: "m"} }
	wrap := func(err error) error { return fmt.Errorf("layer: %w", err) }
	busy, snapshot, locked := sqliteErrors(t)

	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, NonRetryable},
		{"plain", errors.New("boom"), NonRetryable},

		// (a) errors that report their own class
		{"client capacity reject", &clientError{"capacity", Overloaded}, Overloaded},
		{"client indeterminate", wrap(&clientError{"indeterminate", Undetermined}), Undetermined},
		{"client connection fatal", &clientError{"conn", TransportUnavailable}, TransportUnavailable},
		{"explicit class beats wrapped context error", WithClass(context.Canceled, Overloaded), Overloaded},
		{"exhausted retry.Error", &Error{Attempts: 3, Class: Aborted, Err: pg("40001")}, NonRetryable},

		// (b) PostgreSQL SQLSTATEs
		{"pg serialization_failure", wrap(pg("40001")), Aborted},
		{"pg deadlock_detected", pg("40P01"), Aborted},
		{"pg lock_not_available", wrap(pg("55P03")), Aborted},
		{"pg too_many_connections", pg("53300"), ClientResourceExhausted},
		{"pg admin_shutdown", pg("57P01"), Unavailable},
		{"pg crash_shutdown", pg("57P02"), Unavailable},
		{"pg cannot_connect_now", pg("57P03"), Unavailable},
		{"pg connection_exception", pg("08000"), TransportUnavailable},
		{"pg connection_failure", pg("08006"), TransportUnavailable},
		{"pg protocol_violation", pg("08P01"), TransportUnavailable},
		{"pg unique_violation", pg("23505"), NonRetryable},
		{"pg query_canceled", pg("57014"), NonRetryable},
		{"pg out_of_memory", pg("53200"), NonRetryable},

		// (c) MySQL and connection errors
		{"mysql deadlock", wrap(my(1213)), Aborted},
		{"mysql lock wait timeout", my(1205), Aborted},
		{"mysql too many connections", my(1040), ClientResourceExhausted},
		{"mysql too many user connections", my(1203), ClientResourceExhausted},
		{"mysql duplicate key", my(1062), NonRetryable},
		{"mysql invalid conn", wrap(mysql.ErrInvalidConn), TransportUnavailable},
		{"driver bad conn", wrap(driver.ErrBadConn), TransportUnavailable},
		{"connection refused: nothing was sent", connRefused(t), Unavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ClientTransportError},
		{"broken pipe", wrap(syscall.EPIPE), ClientTransportError},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), ClientTransportError},
		{"other net.OpError", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}, ClientTransportError},

		// (d) SQLite, from a real engine
		{"sqlite busy", busy, Aborted},
		{"sqlite busy snapshot", snapshot, Aborted},
		{"sqlite locked", locked, Aborted},

		// never retried
		{"context canceled", wrap(context.Canceled), Canceled},
		{"context deadline", wrap(context.DeadlineExceeded), Timeout},
		{"os deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, Timeout},
		{"net timeout", wrap(netTimeout{}), Timeout},
		{"stale fencing token", wrap(&fence.StaleError{Key: "k", Token: 1, Mark: 2}), NonRetryable},
		{"stale fencing token sentinel", fence.ErrStaleToken, NonRetryable},
		{"token already committed", wrap(&fence.TokenCommittedError{Key: "k", Token: 1}), NonRetryable},
		{"conn closed from elsewhere", errors.New("conn closed"), NonRetryable},
		{"not found", wrap(sql.ErrNoRows), NonRetryable},
		{"invalid argument", fence.ErrInvalid, NonRetryable},
		{"client precondition", &clientError{"precondition", PreconditionFailed}, PreconditionFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Classify(c.err); got != c.want {
				t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func connRefused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s after close succeeded", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial closed port: %v, want ECONNREFUSED", err)
	}
	return err
}

// sqliteErrors provokes SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT and SQLITE_LOCKED
// from the real driver.
func sqliteErrors(t *testing.T) (busy, snapshot, locked error) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustExec := func(c *sql.Conn, q string) {
		t.Helper()
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustExec(a, "CREATE TABLE t (x INTEGER)")
	mustExec(a, "INSERT INTO t VALUES (1)")

	// Two writers: the second cannot take the write lock.
	mustExec(a, "BEGIN IMMEDIATE")
	_, busy = b.ExecContext(ctx, "BEGIN IMMEDIATE")
	mustExec(a, "ROLLBACK")

	// A reader's snapshot goes stale when another connection commits.
	mustExec(a, "BEGIN")
	var x int
	if err := a.QueryRowContext(ctx, "SELECT x FROM t").Scan(&x); err != nil {
		t.Fatal(err)
	}
	mustExec(b, "UPDATE t SET x = 2")
	_, snapshot = a.ExecContext(ctx, "UPDATE t SET x = 3")
	mustExec(a, "ROLLBACK")

	// Dropping a table while the same connection still reads it.
	rows, err := a.QueryContext(ctx, "SELECT x FROM t")
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	_, locked = a.ExecContext(ctx, "DROP TABLE t")
	rows.Close()

	for name, err := range map[string]error{"busy": busy, "busy snapshot": snapshot, "locked": locked} {
		if err == nil {
			t.Fatalf("sqlite %s: no error provoked", name)
		}
		code, ok := sqliteCode(err)
		t.Logf("sqlite %s: code %d: %v", name, code, err)
		if !ok {
			t.Fatalf("sqlite %s: %v is not a *sqlite.Error", name, err)
		}
	}
	return busy, snapshot, locked
}
