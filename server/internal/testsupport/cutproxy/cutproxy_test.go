package cutproxy_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/fence/pgxfence"
	"github.com/ticketing-io/ticketing/retry"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/cutproxy"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/mysqltest"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(mysqltest.Run(func() int { return pgtest.Main(m) }))
}

// session is one driver's connection through the proxy.
type session interface {
	begin(ctx context.Context) error
	exec(ctx context.Context, q string, args ...any) error
	check(ctx context.Context, f *fence.Fence, key string, token uint64) error
	commit(ctx context.Context) error
	rollback(ctx context.Context)
	close()
}

// driver opens sessions through a proxy and reads through a direct
// connection.
type driver struct {
	name    string
	dialect fence.Dialect
	direct  *sql.DB
	open    func(t *testing.T, proxyAddr string) session
	tryOpen func(addr string) (session, error) // a connection made now, errors returned
	ph      func(n int) string                 // placeholder n (1-based)
}

func drivers(t *testing.T) []driver {
	pgDSN := pgtest.Shared(t).NewDatabase(t)
	myDSN := mysqltest.Shared(t).NewDatabase(t)
	pgDirect, err := sql.Open("pgx", pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgDirect.Close() })
	myDirect, err := sql.Open("mysql", myDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { myDirect.Close() })
	pgVia := func(addr string) string {
		u, err := url.Parse(pgDSN)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = addr
		return u.String()
	}
	myVia := func(addr string) string {
		c, err := mysql.ParseDSN(myDSN)
		if err != nil {
			t.Fatal(err)
		}
		c.Addr = addr
		return c.FormatDSN()
	}
	dollar := func(n int) string { return fmt.Sprintf("$%d", n) }
	return []driver{
		{"database/sql+pgx", fence.Postgres, pgDirect, func(t *testing.T, addr string) session {
			return openSQL(t, "pgx", pgVia(addr))
		}, func(addr string) (session, error) { return dialSQL("pgx", pgVia(addr)) }, dollar},
		{"pgx", fence.Postgres, pgDirect, func(t *testing.T, addr string) session {
			c, err := pgx.Connect(context.Background(), pgVia(addr))
			if err != nil {
				t.Fatal(err)
			}
			s := &pgxSession{conn: c}
			t.Cleanup(s.close)
			return s
		}, func(addr string) (session, error) {
			c, err := pgx.Connect(context.Background(), pgVia(addr))
			if err != nil {
				return nil, err
			}
			return &pgxSession{conn: c}, nil
		}, dollar},
		{"database/sql+mysql", fence.MySQL, myDirect, func(t *testing.T, addr string) session {
			return openSQL(t, "mysql", myVia(addr))
		}, func(addr string) (session, error) { return dialSQL("mysql", myVia(addr)) }, func(int) string { return "?" }},
	}
}

type sqlSession struct {
	db *sql.DB
	tx *sql.Tx
}

func openSQL(t *testing.T, drv, dsn string) *sqlSession {
	db, err := sql.Open(drv, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s := &sqlSession{db: db}
	t.Cleanup(s.close)
	return s
}

// dialSQL opens a pool and makes its connection now (database/sql dials
// lazily, at BeginTx).
func dialSQL(drv, dsn string) (*sqlSession, error) {
	db, err := sql.Open(drv, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return &sqlSession{db: db}, nil
}

func (s *sqlSession) begin(ctx context.Context) (err error) {
	s.tx, err = s.db.BeginTx(ctx, nil)
	return err
}
func (s *sqlSession) exec(ctx context.Context, q string, args ...any) error {
	var err error
	if s.tx != nil {
		_, err = s.tx.ExecContext(ctx, q, args...)
	} else {
		_, err = s.db.ExecContext(ctx, q, args...)
	}
	return err
}
func (s *sqlSession) check(ctx context.Context, f *fence.Fence, key string, token uint64) error {
	return f.Check(ctx, s.tx, key, token)
}
func (s *sqlSession) commit(context.Context) error {
	err := s.tx.Commit()
	s.tx = nil
	return err
}
func (s *sqlSession) rollback(context.Context) {
	if s.tx != nil {
		s.tx.Rollback()
		s.tx = nil
	}
}
func (s *sqlSession) close() { s.db.Close() }

type pgxSession struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

func (s *pgxSession) begin(ctx context.Context) (err error) {
	s.tx, err = s.conn.Begin(ctx)
	return err
}
func (s *pgxSession) exec(ctx context.Context, q string, args ...any) error {
	var err error
	if s.tx != nil {
		_, err = s.tx.Exec(ctx, q, args...)
	} else {
		_, err = s.conn.Exec(ctx, q, args...)
	}
	return err
}
func (s *pgxSession) check(ctx context.Context, f *fence.Fence, key string, token uint64) error {
	return pgxfence.Check(ctx, f, s.tx, key, token)
}
func (s *pgxSession) commit(ctx context.Context) error {
	err := s.tx.Commit(ctx)
	s.tx = nil
	return err
}
func (s *pgxSession) rollback(ctx context.Context) {
	if s.tx != nil {
		s.tx.Rollback(ctx)
		s.tx = nil
	}
}
func (s *pgxSession) close() { s.conn.Close(context.Background()) }

func count(t *testing.T, d driver, table string, id int) int {
	t.Helper()
	var n int
	if err := d.direct.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE id = "+d.ph(1), id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCommitCut cuts the connection before, during and after COMMIT with
// each real driver, and checks what retry.Classify makes of the error: a
// COMMIT whose outcome the client cannot know (cut before or during it: the
// client wrote COMMIT and got no answer) must be retried only for an
// idempotent body, never always (during: it did commit), and never be
// NonRetryable (the idempotent retry would not happen). After the reply,
// Commit succeeds and the next use of the connection fails with a class an
// idempotent body is retried on.
func TestCommitCut(t *testing.T) {
	for di, d := range drivers(t) {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			table := fmt.Sprint("cut_rows_", di) // the pgx drivers share a database
			if _, err := d.direct.Exec("CREATE TABLE " + table + " (id INT PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			for i, phase := range []cutproxy.Phase{cutproxy.Before, cutproxy.During, cutproxy.After} {
				t.Run(phase.String(), func(t *testing.T) {
					p := cutproxy.Start(t, addrOf(t, d))
					s := d.open(t, p.Addr())
					if err := s.begin(ctx); err != nil {
						t.Fatal(err)
					}
					if err := s.exec(ctx, "INSERT INTO "+table+" (id) VALUES ("+d.ph(1)+")", i); err != nil {
						t.Fatal(err)
					}
					fired := p.CutAt(phase, "commit")
					err := s.commit(ctx)
					<-fired
					class := retry.Classify(err)
					t.Logf("commit: %v (%T), class %v", err, err, class)
					switch phase {
					case cutproxy.Before, cutproxy.During:
						if err == nil {
							t.Fatal("COMMIT over a cut connection reported success")
						}
						if !class.Retryable(true) || class.Retryable(false) {
							t.Errorf("class %v: want a class retried only when idempotent (outcome unknown)", class)
						}
						want := map[cutproxy.Phase]int{cutproxy.Before: 0, cutproxy.During: 1}[phase]
						if n := count(t, d, table, i); n != want {
							t.Errorf("row %d: %d committed, want %d", i, n, want)
						}
					case cutproxy.After:
						if err != nil {
							t.Fatalf("COMMIT whose reply arrived: %v", err)
						}
						if n := count(t, d, table, i); n != 1 {
							t.Errorf("row %d not committed", i)
						}
						next := s.exec(ctx, "SELECT 1")
						t.Logf("next statement: %v (%T), class %v", next, next, retry.Classify(next))
						if next != nil && !retry.Classify(next).Retryable(true) {
							t.Errorf("next statement on the cut connection: %v, class %v, want a retryable class", next, retry.Classify(next))
						}
					}
				})
			}
		})
	}
}

func addrOf(t *testing.T, d driver) string {
	var addr string
	switch d.dialect {
	case fence.Postgres:
		addr = pgtest.Shared(t).Addr()
	default:
		addr = mysqltest.Shared(t).Addr()
	}
	return addr
}

// TestIdempotentRetryAfterLostCommitReply: a fenced transaction whose
// COMMIT reply is lost is re-run by retry.Do (idempotent) with the same
// ticket; the re-run's Check reports ErrTokenCommitted, not ErrStaleToken,
// so the body answers "done" and the write is applied exactly once.
func TestIdempotentRetryAfterLostCommitReply(t *testing.T) {
	for di, d := range drivers(t) {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			// The pgx drivers share a database: a table each.
			payments := fmt.Sprint("payments_", di)
			f, err := fence.New(d.dialect, fence.WithTable(fmt.Sprint("fence_", di)))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CreateTable(ctx, d.direct); err != nil {
				t.Fatal(err)
			}
			if _, err := d.direct.Exec("CREATE TABLE " + payments + " (id INT PRIMARY KEY, token BIGINT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			p := cutproxy.Start(t, addrOf(t, d))
			fired := p.CutAt(cutproxy.During, "commit")
			attempts := 0
			var results []error
			err = retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
				attempts++
				s := d.open(t, p.Addr()) // a new connection per attempt
				defer s.close()
				if err := s.begin(ctx); err != nil {
					return err
				}
				defer s.rollback(ctx)
				err := s.check(ctx, f, "order-1", 7)
				results = append(results, err)
				if errors.Is(err, fence.ErrTokenCommitted) {
					return nil // an earlier attempt committed: done
				}
				if err != nil {
					return err
				}
				if err := s.exec(ctx, "INSERT INTO "+payments+" (id, token) VALUES (1, 7)"); err != nil {
					return err
				}
				return s.commit(ctx)
			}, retry.Idempotent(true))
			<-fired
			if err != nil {
				t.Fatalf("retry.Do: %v (attempts %d, checks %v)", err, attempts, results)
			}
			if attempts != 2 || results[0] != nil || !errors.Is(results[1], fence.ErrTokenCommitted) || errors.Is(results[1], fence.ErrStaleToken) {
				t.Fatalf("attempts %d, checks %v: want 2 attempts, the second finding the token already committed", attempts, results)
			}
			if n := count(t, d, payments, 1); n != 1 {
				t.Fatalf("%d payments, want exactly 1", n)
			}
		})
	}
}

// TestDialRefusedAlwaysRetried: a connection refused at dial time sent
// nothing, so it is UNAVAILABLE and retried even for a body that is not
// idempotent; the retry that reaches the server succeeds.
func TestDialRefusedAlwaysRetried(t *testing.T) {
	for di, d := range drivers(t) {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			table := fmt.Sprint("refused_rows_", di)
			if _, err := d.direct.Exec("CREATE TABLE " + table + " (id INT PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			closed := closedPort(t)
			addrs := []string{closed, addrOf(t, d)}
			attempts := 0
			var first error
			err := retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
				addr := addrs[min(attempts, 1)]
				attempts++
				err := func() error {
					s, err := d.tryOpen(addr)
					if err != nil {
						return err
					}
					defer s.close()
					if err := s.begin(ctx); err != nil {
						return err
					}
					defer s.rollback(ctx)
					if err := s.exec(ctx, "INSERT INTO "+table+" (id) VALUES (1)"); err != nil {
						return err
					}
					return s.commit(ctx)
				}()
				if attempts == 1 {
					first = err
				}
				return err
			}) // not idempotent
			t.Logf("first attempt: %v (%T)", first, first)
			if first == nil || retry.Classify(first) != retry.Unavailable {
				t.Fatalf("dial to a closed port: %v, class %v, want UNAVAILABLE", first, retry.Classify(first))
			}
			if err != nil || attempts != 2 {
				t.Fatalf("attempts %d, err %v: want the refused attempt retried", attempts, err)
			}
			if n := count(t, d, table, 1); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
}

func closedPort(t *testing.T) string {
	p := cutproxy.Start(t, "127.0.0.1:1")
	addr := p.Addr()
	p.Close()
	return addr
}

// TestMarkReadCutIsNeitherRefusal: when Check's claim finds the key's mark
// at or above the token, it reads the mark to tell "already committed" from
// "stale". A connection cut before that read must not be reported as
// ErrStaleToken (the fence documents that it never is for the token already
// stored, and a caller who redoes stale work under a new ticket would then
// apply work twice) nor as ErrTokenCommitted: it is the driver's error, of a
// class that an idempotent retry re-runs, and the re-run tells the two apart.
func TestMarkReadCutIsNeitherRefusal(t *testing.T) {
	for di, d := range drivers(t) {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			f, err := fence.New(d.dialect, fence.WithTable(fmt.Sprint("fence_markcut_", di)))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CreateTable(ctx, d.direct); err != nil {
				t.Fatal(err)
			}
			// Token 7 has committed on the key (an earlier attempt whose
			// COMMIT reply was lost, say).
			tx, err := d.direct.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Check(ctx, tx, "order-1", 7); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}

			p := cutproxy.Start(t, addrOf(t, d))
			s := d.open(t, p.Addr()) // a fresh connection: no statement cached
			if err := s.begin(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.rollback(ctx)
			fired := p.CutAt(cutproxy.Before, "select token") // the mark read only
			err = s.check(ctx, f, "order-1", 7)
			select {
			case <-fired:
			case <-time.After(20 * time.Second): // a bound against a hang, not a timing assertion
				t.Fatalf("the mark read was never sent (check returned %v)", err)
			}
			t.Logf("check with the mark read cut: %v (class %v)", err, retry.Classify(err))
			if err == nil {
				t.Fatal("Check over a cut connection reported success")
			}
			if errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrTokenCommitted) {
				t.Fatalf("Check whose mark read was cut: %v; want neither ErrStaleToken nor ErrTokenCommitted (the stored mark is this token, and Check could not read it)", err)
			}
			if !retry.Classify(err).Retryable(true) {
				t.Errorf("class %v: want a class an idempotent body is retried on", retry.Classify(err))
			}
		})
	}
}

// TestHoldAfter: the connections allowed through are forwarded, later ones
// are accepted and get nothing back, and Release closes them.
func TestHoldAfter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p := cutproxy.Start(t, ln.Addr().String())
	p.HoldAfter(1)
	echo := func(c net.Conn) error {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		return err
	}
	through, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	if err := echo(through); err != nil {
		t.Fatalf("the connection let through: %v", err)
	}
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := echo(held); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a held connection: %v, want no answer", err)
	}
	if err := echo(through); err != nil {
		t.Fatalf("the connection let through, after the hold began: %v", err)
	}
	if p.Held() != 1 {
		t.Fatalf("%d connections held, want 1", p.Held())
	}
	p.Release()
	held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a released connection is not closed: %v", err)
	}
	again, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := echo(again); err != nil {
		t.Fatalf("a connection after Release: %v", err)
	}
}
