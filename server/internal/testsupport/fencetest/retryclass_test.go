package fencetest_test

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
	"modernc.org/sqlite"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
)

// clientError stands in for the Ticketing client's error types, which report
// their class through RetryClasser.
type clientError struct {
	msg   string
	class retry.Class
}

func (e *clientError) Error() string           { return e.msg }
func (e *clientError) RetryClass() retry.Class { return e.class }

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
		want retry.Class
	}{
		{"nil", nil, retry.NonRetryable},
		{"plain", errors.New("boom"), retry.NonRetryable},

		// (a) errors that report their own class
		{"client capacity reject", &clientError{"capacity", retry.Overloaded}, retry.Overloaded},
		{"client indeterminate", wrap(&clientError{"indeterminate", retry.Undetermined}), retry.Undetermined},
		{"client connection fatal", &clientError{"conn", retry.TransportUnavailable}, retry.TransportUnavailable},
		{"explicit class beats wrapped context error", retry.WithClass(context.Canceled, retry.Overloaded), retry.Overloaded},
		{"exhausted retry.Error", &retry.Error{Attempts: 3, Class: retry.Aborted, Err: pg("40001")}, retry.NonRetryable},

		// (b) PostgreSQL SQLSTATEs
		{"pg serialization_failure", wrap(pg("40001")), retry.Aborted},
		{"pg deadlock_detected", pg("40P01"), retry.Aborted},
		{"pg lock_not_available", wrap(pg("55P03")), retry.Aborted},
		{"pg too_many_connections", pg("53300"), retry.ClientResourceExhausted},
		{"pg admin_shutdown", pg("57P01"), retry.Unavailable},
		{"pg crash_shutdown", pg("57P02"), retry.Unavailable},
		{"pg cannot_connect_now", pg("57P03"), retry.Unavailable},
		{"pg connection_exception", pg("08000"), retry.TransportUnavailable},
		{"pg connection_failure", pg("08006"), retry.TransportUnavailable},
		{"pg protocol_violation", pg("08P01"), retry.TransportUnavailable},
		{"pg unique_violation", pg("23505"), retry.NonRetryable},
		{"pg query_canceled", pg("57014"), retry.NonRetryable},
		{"pg out_of_memory", pg("53200"), retry.NonRetryable},

		// (c) MySQL and connection errors
		{"mysql deadlock", wrap(my(1213)), retry.Aborted},
		{"mysql lock wait timeout", my(1205), retry.Aborted},
		{"mysql too many connections", my(1040), retry.ClientResourceExhausted},
		{"mysql too many user connections", my(1203), retry.ClientResourceExhausted},
		{"mysql duplicate key", my(1062), retry.NonRetryable},
		{"mysql invalid conn", wrap(mysql.ErrInvalidConn), retry.TransportUnavailable},
		{"driver bad conn", wrap(driver.ErrBadConn), retry.TransportUnavailable},
		{"connection refused: nothing was sent", connRefused(t), retry.Unavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, retry.ClientTransportError},
		{"broken pipe", wrap(syscall.EPIPE), retry.ClientTransportError},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), retry.ClientTransportError},
		{"other net.OpError", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}, retry.ClientTransportError},

		// (d) SQLite, from a real engine
		{"sqlite busy", busy, retry.Aborted},
		{"sqlite busy snapshot", snapshot, retry.Aborted},
		{"sqlite locked", locked, retry.Aborted},

		// never retried
		{"context canceled", wrap(context.Canceled), retry.Canceled},
		{"context deadline", wrap(context.DeadlineExceeded), retry.Timeout},
		{"os deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, retry.Timeout},
		{"net timeout", wrap(netTimeout{}), retry.Timeout},
		{"stale fencing token", wrap(&fence.StaleError{Key: "k", Token: 1, Mark: 2}), retry.PreconditionFailed},
		{"stale fencing token sentinel", fence.ErrStaleToken, retry.NonRetryable},
		{"token already committed", wrap(&fence.TokenCommittedError{Key: "k", Token: 1}), retry.PreconditionFailed},
		{"conn closed from elsewhere", errors.New("conn closed"), retry.NonRetryable},
		{"not found", wrap(sql.ErrNoRows), retry.NonRetryable},
		{"invalid argument", fence.ErrInvalid, retry.NonRetryable},
		{"client precondition", &clientError{"precondition", retry.PreconditionFailed}, retry.PreconditionFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := retry.Classify(c.err); got != c.want {
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
		var se *sqlite.Error
		ok := errors.As(err, &se)
		t.Logf("sqlite %s: %v", name, err)
		if !ok {
			t.Fatalf("sqlite %s: %v is not a *sqlite.Error", name, err)
		}
	}
	return busy, snapshot, locked
}
