package fencetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/fence/pgxfence"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/mysqltest"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
)

// Both servers are started on first use and stopped at the end; the MySQL
// dialect runs against a throwaway MariaDB (or TICKETING_TEST_MYSQL_DSN's
// server), never skipped.
func TestMain(m *testing.M) {
	os.Exit(mysqltest.Run(func() int { return pgtest.Main(m) }))
}

// backend is one way of reaching a database: a dialect plus a driver.
type backend struct {
	name    string
	dialect fence.Dialect
	db      *sql.DB // setup and verification
	f       *fence.Fence
	biz     string // business table: id, fence_key, token
	begin   func(ctx context.Context, iso sql.IsolationLevel) (tx, error)
	// lockOnBegin: BEGIN itself takes the database's write lock (SQLite
	// immediate transactions), so a test must not hold a transaction open
	// while waiting for the others to begin.
	lockOnBegin bool
	// sessionID returns the current session's id; blocked, given one, is
	// non-zero while that session waits for a lock (see waitBlocked). Empty
	// where a waiting session cannot be observed.
	sessionID, blocked string
	// pool is the native pgx pool of the postgres/pgx backend, else nil.
	pool *pgxpool.Pool
}

// tx is a transaction of the driver under test.
type tx interface {
	Check(ctx context.Context, key string, token uint64) error
	CheckTicket(ctx context.Context, t fence.Ticket) error
	Exec(ctx context.Context, q string, args ...any) error
	ExecRows(ctx context.Context, q string, args ...any) (int64, error) // rows affected
	Int(ctx context.Context, q string, args ...any) (int64, error)
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// forEach runs test against a fresh, empty database of every backend, or of
// the named ones.
func forEach(t *testing.T, test func(t *testing.T, b *backend), only ...string) {
	for _, bk := range []struct {
		name string
		open func(*testing.T) *backend
	}{
		{"sqlite", newSQLite},
		{"postgres/sql", func(t *testing.T) *backend { return newPostgres(t, false) }},
		{"postgres/pgx", func(t *testing.T) *backend { return newPostgres(t, true) }},
		{"mysql", newMySQL},
	} {
		if len(only) > 0 && !slices.Contains(only, bk.name) {
			continue
		}
		t.Run(bk.name, func(t *testing.T) { test(t, bk.open(t)) })
	}
}

func newSQLite(t *testing.T) *backend {
	return sqliteBackend(t, "immediate", 20000)
}

// sqliteBackend opens a WAL database in a temporary file. txlock is
// "immediate" (BEGIN takes the write lock) or "deferred"; busyMS is how long
// a connection waits for another's lock.
func sqliteBackend(t *testing.T, txlock string, busyMS int) *backend {
	path := filepath.Join(t.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(wal)&_txlock=%s", path, busyMS, txlock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &backend{name: "sqlite", dialect: fence.SQLite, db: db, lockOnBegin: txlock == "immediate"}
	b.begin = sqlBegin(b)
	setup(t, b, "id INTEGER PRIMARY KEY AUTOINCREMENT, fence_key TEXT NOT NULL, token INTEGER NOT NULL", "", nil)
	return b
}

func newPostgres(t *testing.T, native bool) *backend {
	dsn := pgtest.Shared(t).NewDatabase(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &backend{name: "postgres", dialect: fence.Postgres, db: db,
		sessionID: "SELECT pg_backend_pid()",
		blocked:   "SELECT cardinality(pg_blocking_pids($1::int))"}
	create := func(f *fence.Fence) error { return f.CreateTable(context.Background(), db) }
	b.begin = sqlBegin(b)
	if native {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 32
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		b.begin = pgxBegin(b, pool)
		b.pool = pool
		create = func(f *fence.Fence) error { return pgxfence.CreateTable(context.Background(), f, pool) }
	}
	setup(t, b, "id bigserial PRIMARY KEY, fence_key text NOT NULL, token bigint NOT NULL", "", create)
	return b
}

func newMySQL(t *testing.T) *backend {
	db, err := sql.Open("mysql", mysqltest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &backend{name: "mysql", dialect: fence.MySQL, db: db,
		sessionID: "SELECT CONNECTION_ID()",
		blocked:   "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"}
	b.begin = sqlBegin(b)
	setup(t, b, "id BIGINT AUTO_INCREMENT PRIMARY KEY, fence_key VARBINARY(767) NOT NULL, token BIGINT NOT NULL", "", nil)
	return b
}

// setup creates the fence table, with create or else CreateTable, and the
// business table.
func setup(t *testing.T, b *backend, bizColumns, suffix string, create func(*fence.Fence) error) {
	t.Helper()
	f, err := fence.New(b.dialect, fence.WithTable("fence"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	b.f = f
	b.biz = "biz" + suffix
	ctx := context.Background()
	if create == nil {
		create = func(f *fence.Fence) error { return f.CreateTable(ctx, b.db) }
	}
	for range 2 { // the second call finds the table and does nothing
		if err := create(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.db.ExecContext(ctx, "CREATE TABLE "+b.biz+" ("+bizColumns+")"); err != nil {
		t.Fatal(err)
	}
}

// q rewrites ? placeholders to $n for PostgreSQL.
func (b *backend) q(query string) string {
	if b.dialect != fence.Postgres {
		return query
	}
	var sb strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// mark returns the stored mark of key, or -2 if it has none.
func (b *backend) mark(t *testing.T, key string) int64 {
	t.Helper()
	var m int64
	err := b.db.QueryRow(b.q("SELECT token FROM "+b.f.Table()+" WHERE fence_key = ?"), key).Scan(&m)
	if err == sql.ErrNoRows {
		return -2
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// written returns the business rows' tokens for key in insertion order.
func (b *backend) written(t *testing.T, key string) []int64 {
	t.Helper()
	rows, err := b.db.Query(b.q("SELECT token FROM "+b.biz+" WHERE fence_key = ? ORDER BY id"), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// write is the business write of the tests.
func (b *backend) write(ctx context.Context, x tx, key string, token uint64) error {
	return x.Exec(ctx, b.q("INSERT INTO "+b.biz+" (fence_key, token) VALUES (?, ?)"), key, int64(token))
}

// waitBlocked polls until session id waits for a lock. The session's
// statement must not finish first: it reports to finished.
func (b *backend) waitBlocked(t *testing.T, id int64, finished chan error) {
	t.Helper()
	// InnoDB refreshes information_schema.innodb_trx only when it was last
	// read more than 100ms ago, so faster polling would see a frozen table.
	interval := 2 * time.Millisecond
	if b.dialect == fence.MySQL {
		interval = 150 * time.Millisecond
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := b.db.QueryRow(b.blocked, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-finished:
			finished <- err
			t.Fatalf("session %d finished without waiting for a lock: %v", id, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d never waited for a lock", id)
		}
		time.Sleep(interval) // polling interval, not a stand-in for the condition
	}
}

type sqlTx struct {
	f  *fence.Fence
	tx *sql.Tx
}

func sqlBegin(b *backend) func(context.Context, sql.IsolationLevel) (tx, error) {
	return func(ctx context.Context, iso sql.IsolationLevel) (tx, error) {
		t, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
		if err != nil {
			return nil, err
		}
		return &sqlTx{b.f, t}, nil
	}
}

func (s *sqlTx) Check(ctx context.Context, key string, token uint64) error {
	return s.f.Check(ctx, s.tx, key, token)
}

func (s *sqlTx) CheckTicket(ctx context.Context, t fence.Ticket) error {
	return s.f.CheckTicket(ctx, s.tx, t)
}

func (s *sqlTx) Exec(ctx context.Context, q string, args ...any) error {
	_, err := s.tx.ExecContext(ctx, q, args...)
	return err
}

func (s *sqlTx) ExecRows(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := s.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (s *sqlTx) Int(ctx context.Context, q string, args ...any) (int64, error) {
	var v int64
	err := s.tx.QueryRowContext(ctx, q, args...).Scan(&v)
	return v, err
}

func (s *sqlTx) Commit(context.Context) error   { return s.tx.Commit() }
func (s *sqlTx) Rollback(context.Context) error { return s.tx.Rollback() }

type pgxTx struct {
	f  *fence.Fence
	tx pgx.Tx
}

func pgxBegin(b *backend, pool *pgxpool.Pool) func(context.Context, sql.IsolationLevel) (tx, error) {
	return func(ctx context.Context, iso sql.IsolationLevel) (tx, error) {
		opts := pgx.TxOptions{}
		switch iso {
		case sql.LevelDefault:
		case sql.LevelRepeatableRead:
			opts.IsoLevel = pgx.RepeatableRead
		case sql.LevelSerializable:
			opts.IsoLevel = pgx.Serializable
		default:
			return nil, fmt.Errorf("isolation %v not mapped", iso)
		}
		t, err := pool.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		return &pgxTx{b.f, t}, nil
	}
}

func (p *pgxTx) Check(ctx context.Context, key string, token uint64) error {
	return pgxfence.Check(ctx, p.f, p.tx, key, token)
}

func (p *pgxTx) CheckTicket(ctx context.Context, t fence.Ticket) error {
	return pgxfence.CheckTicket(ctx, p.f, p.tx, t)
}

func (p *pgxTx) Exec(ctx context.Context, q string, args ...any) error {
	_, err := p.tx.Exec(ctx, q, args...)
	return err
}

func (p *pgxTx) ExecRows(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (p *pgxTx) Int(ctx context.Context, q string, args ...any) (int64, error) {
	var v int64
	err := p.tx.QueryRow(ctx, q, args...).Scan(&v)
	return v, err
}

func (p *pgxTx) Commit(ctx context.Context) error   { return p.tx.Commit(ctx) }
func (p *pgxTx) Rollback(ctx context.Context) error { return p.tx.Rollback(ctx) }
