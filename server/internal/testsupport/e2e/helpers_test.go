package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/fence/pgxfence"
	"github.com/ticketing-io/ticketing/retry"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
)

// One PostgreSQL server for the package; every test gets its own database.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testCtx is bounded so that a hang fails the test instead of the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connect is one worker process's client: its own Broker, connected.
func connect(t *testing.T, addrs string) *ticketing.Broker {
	t.Helper()
	b, err := ticketing.Connect(addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.WaitReady(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return b
}

// acquire is Broker.Acquire, asking again after outcomes that belong to the
// machine rather than to the code under test: a grant too late for the
// budget (the client released it), and an unknown outcome or a lost
// connection when the cluster changes leader, which a loaded machine with
// the test clusters' short Raft timeouts makes happen now and then. Asking
// again is what an application does; a grant that was made for the lost
// request is never used, so it can only delay the next holder by its lease.
func acquire(ctx context.Context, b *ticketing.Broker, key string, wait, lease, budget time.Duration) (*ticketing.Ticket, error) {
	for {
		tk, err := b.Acquire(ctx, key, wait, lease, budget)
		switch {
		case ctx.Err() != nil:
			return tk, err
		case errors.Is(err, ticketing.ErrBudgetExceeded),
			errors.Is(err, ticketing.ErrIndeterminate),
			errors.Is(err, ticketing.ErrUnavailable):
			continue
		}
		return tk, err
	}
}

// store is a PostgreSQL database reached through one of the two drivers,
// with a fence. Both implementations run the same SQL.
type store interface {
	// queryRow runs a one-row query outside any transaction.
	queryRow(ctx context.Context, q string, args ...any) row
	// queryInt runs a one-row, one-column query outside any transaction.
	queryInt(ctx context.Context, q string, args ...any) (int64, error)
	// exec runs a statement outside any transaction.
	exec(ctx context.Context, q string, args ...any) error
	// inTx runs fn in a READ COMMITTED transaction and commits if fn
	// returns nil, rolls back otherwise.
	inTx(ctx context.Context, fn func(tx txn) error) error
}

// row is *sql.Row or pgx.Row.
type row interface{ Scan(dest ...any) error }

// txn is an open transaction.
type txn interface {
	// check is fence.Check (or CheckPgx) on this transaction.
	check(ctx context.Context, key string, token uint64) error
	queryInt(ctx context.Context, q string, args ...any) (int64, error)
	exec(ctx context.Context, q string, args ...any) error
}

// drivers are the two ways to reach PostgreSQL from Go that fence supports.
var drivers = []struct {
	name string
	open func(t *testing.T, dsn string) store
}{
	{"database_sql", openSQL},
	{"pgx", openPgx},
}

// newStore creates a fresh database with the fence table and the given
// schema and opens it through the driver.
func newStore(t *testing.T, open func(*testing.T, string) store, schema ...string) store {
	t.Helper()
	s := open(t, pgtest.Shared(t).NewDatabase(t))
	ctx := testCtx(t)
	for _, stmt := range schema {
		if err := s.exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return s
}

func newFence(t *testing.T) *fence.Fence {
	t.Helper()
	f, err := fence.New(fence.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// --- database/sql through pgx stdlib ---

type sqlStore struct {
	db *sql.DB
	f  *fence.Fence
}

func openSQL(t *testing.T, dsn string) store {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(20)
	f := newFence(t)
	if err := f.CreateTable(testCtx(t), db); err != nil {
		t.Fatal(err)
	}
	return &sqlStore{db: db, f: f}
}

func (s *sqlStore) queryRow(ctx context.Context, q string, args ...any) row {
	return s.db.QueryRowContext(ctx, q, args...)
}

func (s *sqlStore) queryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = s.db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

func (s *sqlStore) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.db.ExecContext(ctx, q, args...)
	return err
}

func (s *sqlStore) inTx(ctx context.Context, fn func(txn) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(sqlTxn{tx, s.f}); err != nil {
		return err
	}
	return tx.Commit()
}

type sqlTxn struct {
	tx *sql.Tx
	f  *fence.Fence
}

func (x sqlTxn) check(ctx context.Context, key string, token uint64) error {
	return x.f.Check(ctx, x.tx, key, token)
}

func (x sqlTxn) queryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = x.tx.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

func (x sqlTxn) exec(ctx context.Context, q string, args ...any) error {
	_, err := x.tx.ExecContext(ctx, q, args...)
	return err
}

// --- native pgx (pgxpool) ---

type pgxStore struct {
	pool *pgxpool.Pool
	f    *fence.Fence
}

func openPgx(t *testing.T, dsn string) store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := newFence(t)
	if err := pgxfence.CreateTable(testCtx(t), f, pool); err != nil {
		t.Fatal(err)
	}
	return &pgxStore{pool: pool, f: f}
}

func (s *pgxStore) queryRow(ctx context.Context, q string, args ...any) row {
	return s.pool.QueryRow(ctx, q, args...)
}

func (s *pgxStore) queryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = s.pool.QueryRow(ctx, q, args...).Scan(&n)
	return n, err
}

func (s *pgxStore) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.pool.Exec(ctx, q, args...)
	return err
}

func (s *pgxStore) inTx(ctx context.Context, fn func(txn) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(pgxTxn{tx, s.f}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

type pgxTxn struct {
	tx pgx.Tx
	f  *fence.Fence
}

func (x pgxTxn) check(ctx context.Context, key string, token uint64) error {
	return pgxfence.Check(ctx, x.f, x.tx, key, token)
}

func (x pgxTxn) queryInt(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = x.tx.QueryRow(ctx, q, args...).Scan(&n)
	return n, err
}

func (x pgxTxn) exec(ctx context.Context, q string, args ...any) error {
	_, err := x.tx.Exec(ctx, q, args...)
	return err
}

// --- retry ---

// retried runs one transaction with retry.Do, marked idempotent (the widest
// set of retried errors), and reports how many times the body ran.
func retried(ctx context.Context, s store, fn func(ctx context.Context, tx txn) error) (attempts int, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		attempts++
		return s.inTx(ctx, func(tx txn) error { return fn(ctx, tx) })
	}, retry.Idempotent(true))
	return attempts, err
}

// wantStaleOnce checks that err is the fence's rejection of token (the key's
// mark being mark) and that retry gave up on it after the first attempt.
func wantStaleOnce(t *testing.T, err error, attempts int, key string, token, mark uint64) {
	t.Helper()
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write: err = %v, want fence.ErrStaleToken", err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Key != key || se.Token != token || se.Mark != mark {
		t.Errorf("stale write: err = %v, want StaleError{Key: %q, Token: %d, Mark: %d}", err, key, token, mark)
	}
	if attempts != 1 {
		t.Errorf("stale write ran %d times under retry.Do, want 1: ErrStaleToken must not be retried", attempts)
	}
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Fatalf("stale write: err = %T %v, want a *retry.Error from retry.Do", err, err)
	}
	if re.Attempts != 1 || re.Class != retry.PreconditionFailed {
		t.Errorf("retry.Error{Attempts: %d, Class: %v}, want {1, %v}", re.Attempts, re.Class, retry.PreconditionFailed)
	}
}

func fenceMark(ctx context.Context, s store, key string) (uint64, error) {
	n, err := s.queryInt(ctx, "SELECT token FROM "+fence.DefaultTable+" WHERE fence_key = $1", key)
	if err != nil {
		return 0, fmt.Errorf("read the fence mark of %q: %w", key, err)
	}
	return uint64(n), nil
}
