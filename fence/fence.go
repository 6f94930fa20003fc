package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/ticketing-io/ticketing/retry"
)

var (
	// ErrStaleToken is wrapped by the error Check returns when a newer token
	// has been stored for the key: a later holder of the key has committed a
	// fenced transaction, so this holder's lease is over. The caller must
	// roll back. It is never returned for the token already stored (see
	// ErrTokenCommitted).
	ErrStaleToken = errors.New("fence: stale token")
	// ErrTokenCommitted is wrapped by the error Check returns when the key's
	// stored mark is this very token: a transaction fenced with this ticket
	// has already committed on this key. Usually that is an earlier attempt
	// of the same work whose COMMIT reply was lost (a connection cut during
	// COMMIT, then an idempotent retry). The caller must roll back and must
	// not redo the work under a new ticket: it is done; read what was
	// committed and answer from it.
	ErrTokenCommitted = errors.New("fence: token already committed")
	// ErrInvalid is wrapped by errors about bad arguments: a table name
	// that is not an identifier, an empty key, a token of 2^63 or more.
	ErrInvalid = errors.New("fence: invalid argument")
)

// StaleError reports a token below the key's stored mark. It wraps
// ErrStaleToken.
type StaleError struct {
	Key   string
	Token uint64 // the rejected token
	Mark  uint64 // the key's stored high-water mark, above Token
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token %d for key %q: stored mark is %d (a newer holder has committed; roll back)", e.Token, e.Key, e.Mark)
}

func (e *StaleError) Unwrap() error { return ErrStaleToken }

// RetryClass is PRECONDITION_FAILED: never retried (package retry); a re-run
// would fail the same way.
func (e *StaleError) RetryClass() retry.Class { return retry.PreconditionFailed }

// TokenCommittedError reports a token equal to the key's stored mark: a
// transaction fenced with it already committed. It wraps ErrTokenCommitted,
// not ErrStaleToken, so that a caller who redoes stale work under a new
// ticket does not redo work that is already done.
type TokenCommittedError struct {
	Key   string
	Token uint64 // the token, also the key's stored mark
}

func (e *TokenCommittedError) Error() string {
	return fmt.Sprintf("fence: token %d for key %q already committed a transaction here (the stored mark is this token): "+
		"an earlier attempt committed; roll back and read its result instead of redoing the work", e.Token, e.Key)
}

func (e *TokenCommittedError) Unwrap() error { return ErrTokenCommitted }

// RetryClass is PRECONDITION_FAILED: never retried (package retry); the work
// is already done.
func (e *TokenCommittedError) RetryClass() retry.Class { return retry.PreconditionFailed }

// Dialect selects the SQL a Fence speaks.
type Dialect int

const (
	Postgres Dialect = iota + 1 // PostgreSQL, through database/sql (pgx stdlib) or native pgx
	MySQL                       // MySQL and MariaDB with InnoDB
	SQLite                      // SQLite 3.24 or later (upsert)
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// DefaultTable is the fence table's name unless WithTable says otherwise.
const DefaultTable = "ticketing_fence"

// maxMySQLKey is the byte length of the MySQL key column. Longer keys are
// refused rather than risk truncation making two keys share a row.
const maxMySQLKey = 767

// Fence checks fencing tokens against a table of high-water marks, one row
// per key. It holds no connection; it is safe for concurrent use.
type Fence struct {
	dialect Dialect
	table   string
	ddl     string // the table's definition, as published by DDL
	create  string // what CreateTable runs: ddl, made safe to run concurrently
	claim   []stmt // run in order; the last one's row count says whether the token won
	mark    string // reads the stored mark when the token lost
}

type stmt struct {
	sql  string
	args func(key string, token int64) []any
}

func keyToken(key string, token int64) []any { return []any{key, token} }

// Option configures New.
type Option func(*Fence)

// WithTable names the fence table. It must be an identifier, optionally
// schema-qualified (letters, digits and underscores, not starting with a
// digit, at most 63 bytes a part); it is not quoted.
func WithTable(name string) Option { return func(f *Fence) { f.table = name } }

// New returns a Fence for the dialect.
func New(d Dialect, opts ...Option) (*Fence, error) {
	f := &Fence{dialect: d, table: DefaultTable}
	for _, o := range opts {
		o(f)
	}
	if !validTable(f.table) {
		return nil, fmt.Errorf("%w: table name %q is not an identifier", ErrInvalid, f.table)
	}
	t := f.table
	switch d {
	case Postgres:
		f.ddl = `CREATE TABLE IF NOT EXISTS ` + t + ` (fence_key text PRIMARY KEY, token bigint NOT NULL)`
		// Two sessions creating the same table at once can both pass the
		// IF NOT EXISTS check and one then fails on the catalog's unique
		// index (23505 or 42P07). A transaction-scoped advisory lock on the
		// table's name makes concurrent CreateTable calls take turns; the
		// later ones then find the table. The DO block is one statement, so
		// the lock is held to the end of its own transaction (or of the
		// caller's, when given a *sql.Tx).
		f.create = `DO $fence$ BEGIN PERFORM pg_advisory_xact_lock(` + strconv.Itoa(advisoryClass) + `, hashtext('` + t + `')); ` +
			f.ddl + `; END $fence$`
		// One statement: the conflicting row is locked, and under READ
		// COMMITTED the WHERE is re-evaluated against the latest committed
		// version once the lock is granted, so of two transactions with the
		// same token only the first to commit updates a row. Under
		// REPEATABLE READ and SERIALIZABLE the loser gets 40001 instead.
		f.claim = []stmt{{`INSERT INTO ` + t + ` AS f (fence_key, token) VALUES ($1, $2)
ON CONFLICT (fence_key) DO UPDATE SET token = EXCLUDED.token WHERE f.token < EXCLUDED.token`, keyToken}}
		f.mark = `SELECT token FROM ` + t + ` WHERE fence_key = $1`
	case SQLite:
		f.ddl = `CREATE TABLE IF NOT EXISTS ` + t + ` (fence_key TEXT NOT NULL PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID`
		f.create = f.ddl // SQLite has one writer at a time: concurrent creation is safe
		// SQLite has one writer at a time; a transaction whose snapshot is
		// older than the last commit gets SQLITE_BUSY rather than writing.
		f.claim = []stmt{{`INSERT INTO ` + t + ` (fence_key, token) VALUES (?, ?)
ON CONFLICT (fence_key) DO UPDATE SET token = excluded.token WHERE token < excluded.token`, keyToken}}
		f.mark = `SELECT token FROM ` + t + ` WHERE fence_key = ?`
	case MySQL:
		// VARBINARY compares bytes exactly: no case folding, no trailing
		// space padding, unlike the usual VARCHAR collations.
		f.ddl = `CREATE TABLE IF NOT EXISTS ` + t + ` (fence_key VARBINARY(767) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB`
		// The table name's exclusive metadata lock serialises concurrent
		// CREATE TABLE IF NOT EXISTS; the later ones only warn.
		f.create = f.ddl
		// First make sure the row exists and hold its exclusive lock (a new
		// row gets mark -1, below every token); then raise the mark only if
		// the token is higher. UPDATE reads the latest committed row, not
		// the snapshot, and its row count is the same with or without the
		// clientFoundRows DSN option because the WHERE excludes no-op
		// updates. A single INSERT ... ON DUPLICATE KEY UPDATE would need
		// affected-row counts that clientFoundRows changes.
		f.claim = []stmt{
			{`INSERT INTO ` + t + ` (fence_key, token) VALUES (?, -1) ON DUPLICATE KEY UPDATE token = token`,
				func(k string, _ int64) []any { return []any{k} }},
			{`UPDATE ` + t + ` SET token = ? WHERE fence_key = ? AND token < ?`,
				func(k string, t int64) []any { return []any{t, k, t} }},
		}
		f.mark = `SELECT token FROM ` + t + ` WHERE fence_key = ? FOR UPDATE`
	default:
		return nil, fmt.Errorf("%w: unknown dialect %v", ErrInvalid, d)
	}
	return f, nil
}

// Table returns the fence table's name.
func (f *Fence) Table() string { return f.table }

// Dialect returns the fence's dialect.
func (f *Fence) Dialect() Dialect { return f.dialect }

// advisoryClass is the first key of the PostgreSQL advisory lock that
// CreateTable takes (the second is hashtext of the table name): "tick" in
// ASCII, so that it is unlikely to collide with an application's own
// advisory locks.
const advisoryClass = 0x7469636b

// DDL returns the CREATE TABLE IF NOT EXISTS statement of the fence table,
// for a migration tool to run instead of CreateTable. The table's name and
// columns are what Check uses: fence_key (the key, primary key) and token
// (the mark, a signed 64-bit integer). The package documentation lists the
// statement of each dialect for the default table name.
func (f *Fence) DDL() string { return f.ddl }

// Execer is what CreateTable needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateTable creates the fence table if it does not exist (the statement
// DDL returns). It is safe to call from several instances at once:
//
//   - PostgreSQL: it takes a transaction-scoped advisory lock (keys
//     0x7469636b and hashtext of the table name) around the creation, so
//     that concurrent calls take turns; given a *sql.Tx, it holds the lock
//     until that transaction ends.
//   - MySQL and MariaDB: CREATE TABLE IF NOT EXISTS is serialised by the
//     table name's metadata lock. It commits any open transaction (MySQL
//     commits implicitly before DDL), so do not pass a *sql.Tx that holds
//     uncommitted work.
//   - SQLite: one writer at a time; give the connection a busy timeout so
//     that a concurrent caller waits instead of failing with SQLITE_BUSY.
func (f *Fence) CreateTable(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, f.create); err != nil {
		return fmt.Errorf("fence: create table %s: %w", f.table, err)
	}
	return nil
}

// CreateTableFunc is CreateTable for a driver other than database/sql:
// exec runs one statement (see the fence/pgxfence module for native pgx).
// The fence's dialect must be the database's.
func (f *Fence) CreateTableFunc(ctx context.Context, exec func(ctx context.Context, query string) error) error {
	if err := exec(ctx, f.create); err != nil {
		return fmt.Errorf("fence: create table %s: %w", f.table, err)
	}
	return nil
}

// Check fences key with token inside tx. If token is above the key's stored
// mark, or the key has none, it stores token as the new mark and returns
// nil: the caller's writes in tx are then safe to commit. Otherwise it
// changes nothing and returns a *StaleError wrapping ErrStaleToken (a
// larger token is stored) or a *TokenCommittedError wrapping
// ErrTokenCommitted (this token is stored: its transaction already
// committed); the caller must roll tx back. Other errors come from the
// database, and the caller must roll back then too; they match neither
// refusal, also when the token was refused but reading the stored mark to
// tell which refusal it is failed (a connection cut, ctx ended): a re-run of
// the transaction finds out.
//
// The mark is raised in tx, so it commits or rolls back with the caller's
// writes, and it holds the key's row lock until then: a concurrent Check of
// the same key waits for tx to finish and then compares against its outcome.
// Check a key once per transaction: a second Check of the same key and token
// in tx finds the mark tx itself stored and returns ErrTokenCommitted.
func (f *Fence) Check(ctx context.Context, tx *sql.Tx, key string, token uint64) error {
	return f.check(ctx, sqlTx{tx}, key, token)
}

// Tx is a transaction of a driver other than database/sql, as CheckTx
// needs it (the fence/pgxfence module adapts a native pgx.Tx). Exec runs a
// statement and returns the number of rows it changed; QueryRow runs a query
// returning at most one row.
type Tx interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is one result row, as *sql.Row and pgx.Row have it.
type Row interface {
	Scan(dest ...any) error
}

// CheckTx is Check for a transaction of another driver. Its statements use
// the fence's dialect, so the dialect must be the database's.
func (f *Fence) CheckTx(ctx context.Context, tx Tx, key string, token uint64) error {
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", ErrInvalid)
	}
	return f.check(ctx, tx, key, token)
}

// CheckTicketTx is CheckTicket for a transaction of another driver.
func (f *Fence) CheckTicketTx(ctx context.Context, tx Tx, t Ticket) error {
	if isNil(t) {
		return fmt.Errorf("%w: nil ticket", ErrInvalid)
	}
	return f.CheckTx(ctx, tx, t.Key(), t.Token())
}

// Ticket is what CheckTicket needs of a ticket: its key and its fencing
// token. The Ticketing client's *ticketing.Ticket has both methods, so it is
// passed as it is; the interface keeps this package free of the client.
type Ticket interface {
	Key() string
	Token() uint64
}

// CheckTicket is Check with the key and token taken from t, so that the
// token cannot be checked against another key by mistake.
func (f *Fence) CheckTicket(ctx context.Context, tx *sql.Tx, t Ticket) error {
	if isNil(t) {
		return fmt.Errorf("%w: nil ticket", ErrInvalid)
	}
	return f.Check(ctx, tx, t.Key(), t.Token())
}

// isNil reports a nil interface or a nil pointer in it, which would panic
// in Key.
func isNil(t Ticket) bool {
	if t == nil {
		return true
	}
	v := reflect.ValueOf(t)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (f *Fence) check(ctx context.Context, q Tx, key string, token uint64) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if f.dialect == MySQL && len(key) > maxMySQLKey {
		return fmt.Errorf("%w: key of %d bytes is longer than %d", ErrInvalid, len(key), maxMySQLKey)
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d for key %q does not fit a signed 64-bit column (maximum %d)",
			ErrInvalid, token, key, int64(math.MaxInt64))
	}
	t := int64(token)
	var won int64
	for _, st := range f.claim {
		n, err := q.Exec(ctx, st.sql, st.args(key, t)...)
		if err != nil {
			return fmt.Errorf("fence: check key %q token %d: %w", key, token, err)
		}
		won = n
	}
	if won == 1 {
		return nil
	}
	var mark int64
	if err := q.QueryRow(ctx, f.mark, key).Scan(&mark); err != nil {
		// Not ErrStaleToken: the mark may be this very token (an earlier
		// attempt committed), and a caller who redoes stale work would then
		// do it twice. The database's error decides the retry; a re-run tells
		// the two refusals apart.
		return fmt.Errorf("fence: check key %q token %d: the stored mark is this token or a newer one, and reading it to tell which failed "+
			"(neither refusal is known: roll back, and run the transaction again to find out): %w", key, token, err)
	}
	if uint64(mark) == token {
		return &TokenCommittedError{Key: key, Token: token}
	}
	return &StaleError{Key: key, Token: token, Mark: uint64(mark)}
}

type sqlTx struct{ tx *sql.Tx }

func (s sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := s.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (s sqlTx) QueryRow(ctx context.Context, q string, args ...any) Row {
	return s.tx.QueryRowContext(ctx, q, args...)
}

// validTable reports whether name is an identifier, optionally qualified
// by a schema, so it can be spliced into SQL unquoted.
func validTable(name string) bool {
	parts := 0
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '.' {
			continue
		}
		if parts++; parts > 2 || !validIdent(name[start:i]) {
			return false
		}
		start = i + 1
	}
	return true
}

func validIdent(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
