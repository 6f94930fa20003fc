package fencetest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"go/build"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/fence/pgxfence"
	"github.com/ticketing-io/ticketing/retry"
)

// checkTx runs one transaction: fence, business write, commit.
func checkTx(ctx context.Context, b *backend, key string, token uint64) error {
	x, err := b.begin(ctx, sql.LevelDefault)
	if err != nil {
		return err
	}
	defer x.Rollback(ctx)
	if err := x.Check(ctx, key, token); err != nil {
		return err
	}
	if err := b.write(ctx, x, key, token); err != nil {
		return err
	}
	return x.Commit(ctx)
}

// wantStale checks the refusal of token for key whose stored mark is mark:
// a *StaleError (ErrStaleToken) when mark is above token, and a
// *TokenCommittedError (ErrTokenCommitted, never ErrStaleToken) when mark is
// the token itself.
func wantStale(t *testing.T, err error, key string, token, mark uint64) {
	t.Helper()
	if mark == token {
		if !errors.Is(err, fence.ErrTokenCommitted) || errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("err = %v, want ErrTokenCommitted and not ErrStaleToken (the stored mark is this token)", err)
		}
		var ce *fence.TokenCommittedError
		if !errors.As(err, &ce) || *ce != (fence.TokenCommittedError{Key: key, Token: token}) {
			t.Fatalf("err = %#v, want TokenCommittedError{%q, %d}", err, key, token)
		}
	} else {
		if !errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrTokenCommitted) {
			t.Fatalf("err = %v, want ErrStaleToken", err)
		}
		var se *fence.StaleError
		if !errors.As(err, &se) || *se != (fence.StaleError{Key: key, Token: token, Mark: mark}) {
			t.Fatalf("err = %#v, want StaleError{%q, %d, %d}", err, key, token, mark)
		}
	}
	for _, part := range []string{fmt.Sprintf("%q", key), fmt.Sprint(token), fmt.Sprint(mark)} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q does not name %s", err, part)
		}
	}
}

func TestCheck(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		steps := []struct {
			key   string
			token uint64
			stale bool
			mark  uint64 // when stale
		}{
			{"a", 5, false, 0},
			{"a", 5, true, 5}, // the same token again: already committed, not stale
			{"a", 4, true, 5}, // an older one
			{"a", 6, false, 0},
			{"b", 1, false, 0}, // keys are independent
			{"a", 1, true, 6},
			{"new", 0, false, 0}, // token 0 is valid on a new key
			{"new", 0, true, 0},
			{"max", math.MaxInt64, false, 0},
			{"max", math.MaxInt64, true, math.MaxInt64},
			{"Caps", 3, false, 0}, // keys are compared exactly
			{"caps", 3, false, 0},
			{"caps ", 3, false, 0},
		}
		for i, s := range steps {
			err := checkTx(ctx, b, s.key, s.token)
			if s.stale {
				wantStale(t, err, s.key, s.token, s.mark)
			} else if err != nil {
				t.Fatalf("step %d %+v: %v", i, s, err)
			}
		}
		for key, want := range map[string][]int64{"a": {5, 6}, "b": {1}, "new": {0}, "max": {math.MaxInt64}} {
			if got := b.written(t, key); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("key %q business rows %v, want %v", key, got, want)
			}
		}
		if m := b.mark(t, "a"); m != 6 {
			t.Errorf("mark of a = %d, want 6", m)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		for _, c := range []struct {
			key   string
			token uint64
			msg   string
		}{
			{"k", math.MaxInt64 + 1, "9223372036854775808"},
			{"k", math.MaxUint64, "18446744073709551615"},
			{"", 1, "empty key"},
		} {
			err := checkTx(ctx, b, c.key, c.token)
			if !errors.Is(err, fence.ErrInvalid) || errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("Check(%q, %d) = %v, want ErrInvalid mentioning %q", c.key, c.token, err, c.msg)
			}
		}
		if m := b.mark(t, "k"); m != -2 {
			t.Errorf("rejected token stored: mark %d", m)
		}
		if b.dialect == fence.MySQL {
			err := checkTx(ctx, b, strings.Repeat("x", 768), 1)
			if !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("768-byte key: %v, want ErrInvalid", err)
			}
			if err := checkTx(ctx, b, strings.Repeat("x", 767), 1); err != nil {
				t.Errorf("767-byte key: %v", err)
			}
		}
	})
}

// TestStaleRollsBackBusinessWrite writes first and fences second: the
// stale check must make the caller roll its write back, and leave the mark.
func TestStaleRollsBackBusinessWrite(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		if err := checkTx(ctx, b, "k", 10); err != nil {
			t.Fatal(err)
		}
		x, err := b.begin(ctx, sql.LevelDefault)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.write(ctx, x, "k", 9); err != nil {
			t.Fatal(err)
		}
		wantStale(t, x.Check(ctx, "k", 9), "k", 9, 10)
		if err := x.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.written(t, "k"); fmt.Sprint(got) != "[10]" {
			t.Errorf("business rows %v, want only [10]", got)
		}
		if m := b.mark(t, "k"); m != 10 {
			t.Errorf("mark %d, want 10", m)
		}
	})
}

// TestRollbackDiscardsMark: the mark is part of the caller's transaction.
func TestRollbackDiscardsMark(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		for _, pre := range []uint64{0, 3} { // new key, then an existing one
			key := fmt.Sprint("k", pre)
			if pre > 0 {
				if err := checkTx(ctx, b, key, pre); err != nil {
					t.Fatal(err)
				}
			}
			x, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Check(ctx, key, 20); err != nil {
				t.Fatal(err)
			}
			if err := b.write(ctx, x, key, 20); err != nil {
				t.Fatal(err)
			}
			if err := x.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			want := int64(pre)
			if pre == 0 {
				want = -2 // no row
			}
			if m := b.mark(t, key); m != want {
				t.Errorf("%s: mark %d after rollback, want %d", key, m, want)
			}
			// The token the rolled-back transaction used is still good.
			if err := checkTx(ctx, b, key, 20); err != nil {
				t.Errorf("%s: token 20 after rollback: %v", key, err)
			}
		}
	})
}

// race runs one transaction per token at once, each retried on transient
// errors (deadlocks, SQLite busy) by retry.Do. Transactions are all open
// before any of them fences, except where BEGIN takes a lock.
func race(t *testing.T, b *backend, key string, tokens []uint64) []error {
	t.Helper()
	ctx := context.Background()
	p := retry.Policy{Rand: func(int64) int64 { return 0 }} // no backoff waits
	var ready, done sync.WaitGroup
	ready.Add(len(tokens))
	done.Add(len(tokens))
	start := make(chan struct{})
	errs := make([]error, len(tokens))
	for i, token := range tokens {
		go func() {
			defer done.Done()
			arrive := sync.OnceFunc(func() { ready.Done(); <-start })
			defer arrive() // never leave the others waiting
			errs[i] = p.Do(ctx, func(ctx context.Context) error {
				if b.lockOnBegin {
					arrive()
				}
				x, err := b.begin(ctx, sql.LevelDefault)
				if err != nil {
					return err
				}
				defer x.Rollback(ctx)
				arrive()
				if err := x.Check(ctx, key, token); err != nil {
					return err
				}
				if err := b.write(ctx, x, key, token); err != nil {
					return err
				}
				return x.Commit(ctx)
			}, retry.MaxAttempts(100))
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}

const racers = 12

func TestConcurrentSameToken(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		for _, pre := range []uint64{0, 6} { // new key, existing key
			key := fmt.Sprint("same", pre)
			if pre > 0 {
				if err := checkTx(context.Background(), b, key, pre); err != nil {
					t.Fatal(err)
				}
			}
			tokens := make([]uint64, racers)
			for i := range tokens {
				tokens[i] = 7
			}
			won := 0
			for _, err := range race(t, b, key, tokens) {
				switch {
				case err == nil:
					won++
				case errors.Is(err, fence.ErrTokenCommitted) && !errors.Is(err, fence.ErrStaleToken):
					var ce *fence.TokenCommittedError
					if !errors.As(err, &ce) || ce.Token != 7 {
						t.Errorf("error %v, want token 7 already committed", err)
					}
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
			if won != 1 {
				t.Errorf("%s: %d transactions won with the same token, want 1", key, won)
			}
			want := "[7]"
			if pre > 0 {
				want = "[6 7]"
			}
			if got := b.written(t, key); fmt.Sprint(got) != want {
				t.Errorf("%s: business rows %v, want %s", key, got, want)
			}
			if m := b.mark(t, key); m != 7 {
				t.Errorf("%s: mark %d, want 7", key, m)
			}
		}
	})
}

func TestConcurrentDistinctTokens(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		tokens := make([]uint64, racers)
		for i := range tokens {
			tokens[i] = uint64(100 + (i*7)%racers) // distinct, shuffled
		}
		maxToken := uint64(100 + racers - 1)
		errs := race(t, b, "k", tokens)
		var winners []int64
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, int64(tokens[i]))
			case errors.Is(err, fence.ErrStaleToken):
				var se *fence.StaleError
				if !errors.As(err, &se) || se.Mark <= se.Token || se.Token != tokens[i] {
					t.Errorf("token %d: stale error %v", tokens[i], err)
				}
				if tokens[i] == maxToken {
					t.Errorf("the highest token %d was rejected: %v", maxToken, err)
				}
			default:
				t.Errorf("token %d: unexpected error: %v", tokens[i], err)
			}
		}
		// Business writes happen under the key's lock, so their order is the
		// commit order: every winner beat all earlier ones.
		got := b.written(t, "k")
		if len(got) != len(winners) {
			t.Fatalf("business rows %v, but %d winners %v", got, len(winners), winners)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("tokens committed out of order: %v", got)
			}
		}
		if len(got) == 0 || got[len(got)-1] != int64(maxToken) {
			t.Fatalf("business rows %v do not end with the highest token %d", got, maxToken)
		}
		if m := b.mark(t, "k"); m != int64(maxToken) {
			t.Errorf("mark %d, want %d", m, maxToken)
		}
	})
}

func TestConcurrentKeysIndependent(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for i := range racers {
			wg.Go(func() {
				errs[i] = retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
					return checkTx(ctx, b, fmt.Sprint("key", i), 1)
				}, retry.MaxAttempts(100))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("key%d: %v", i, err)
			}
		}
	})
}

// TestBlockedCheckSeesOutcome pins down the interleaving: A fences a key and
// holds the transaction open; B fences the same key with the same token and
// must wait for A's row lock; then A commits (B is stale) or rolls back (B
// wins).
//
// SQLite cannot show a waiting connection; TestSQLiteWriterExcluded covers it.
func TestBlockedCheckSeesOutcome(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		for _, existing := range []bool{false, true} {
			for _, commit := range []bool{true, false} {
				blockedCase(t, b, existing, commit)
			}
		}
	}, "postgres/sql", "postgres/pgx", "mysql")
}

// TestSQLiteWriterExcluded: while A's fenced transaction is open, no other
// connection can write (with no busy timeout it is told SQLITE_BUSY, which
// retry treats as ABORTED); afterwards the same token is stale if A
// committed and good if A rolled back.
func TestSQLiteWriterExcluded(t *testing.T) {
	for _, txlock := range []string{"immediate", "deferred"} {
		b := sqliteBackend(t, txlock, 0)
		ctx := context.Background()
		for _, commit := range []bool{true, false} {
			key := fmt.Sprintf("k-%s-%v", txlock, commit)
			a, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Check(ctx, key, 7); err != nil {
				t.Fatal(err)
			}
			err = checkTx(ctx, b, key, 7)
			if retry.Classify(err) != retry.Aborted {
				t.Fatalf("%s: second writer got %v, want SQLITE_BUSY", key, err)
			}
			if commit {
				err = a.Commit(ctx)
			} else {
				err = a.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			err = checkTx(ctx, b, key, 7)
			if commit {
				wantStale(t, err, key, 7, 7)
			} else if err != nil {
				t.Fatalf("%s: A rolled back, B still lost: %v", key, err)
			}
			want := "[7]" // B's write
			if commit {
				want = "[]" // A wrote nothing but the mark, B was stale
			}
			if got := b.written(t, key); fmt.Sprint(got) != want {
				t.Errorf("%s: business rows %v, want %s", key, got, want)
			}
		}
	}
}

func blockedCase(t *testing.T, b *backend, existing, commit bool) {
	ctx := context.Background()
	key := fmt.Sprintf("k-%v-%v", existing, commit)
	if existing {
		if err := checkTx(ctx, b, key, 1); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.begin(ctx, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx) // on failure: release B, then the tables
	if err := a.Check(ctx, key, 7); err != nil {
		t.Fatal(err)
	}
	bt, err := b.begin(ctx, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Rollback(ctx)
	id, err := bt.Int(ctx, b.sessionID)
	if err != nil {
		t.Fatal(err)
	}
	errB := make(chan error, 1)
	go func() { errB <- bt.Check(ctx, key, 7) }()
	defer func() {
		a.Rollback(ctx)
		<-errB // B's transaction must be idle before it is rolled back
	}()
	b.waitBlocked(t, id, errB)
	if commit {
		err = a.Commit(ctx)
	} else {
		err = a.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	err = <-errB
	errB <- err // for the deferred receive
	if commit {
		wantStale(t, err, key, 7, 7)
	} else if err != nil {
		t.Fatalf("A rolled back, B still lost: %v", err)
	}
	if err := bt.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if m := b.mark(t, key); m != 7 {
		t.Errorf("%s: mark %d, want 7", key, m)
	}
}

// TestPostgresRepeatableRead: under REPEATABLE READ the waiting transaction
// cannot re-read the row, so PostgreSQL fails it with 40001; retry classifies
// that ABORTED, and the re-run transaction finds the token already committed.
func TestPostgresRepeatableRead(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			b := newPostgres(t, native)
			ctx := context.Background()
			a, err := b.begin(ctx, sql.LevelRepeatableRead)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Check(ctx, "k", 7); err != nil {
				t.Fatal(err)
			}
			ids := make(chan int64, 1)
			errB := make(chan error, 1)
			var first error
			attempts := 0
			go func() {
				errB <- retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
					attempts++
					x, err := b.begin(ctx, sql.LevelRepeatableRead)
					if err != nil {
						return err
					}
					defer x.Rollback(ctx)
					if attempts == 1 {
						// Take the snapshot before A commits.
						if _, err := x.Int(ctx, "SELECT count(*) FROM "+b.f.Table()); err != nil {
							return err
						}
						id, err := x.Int(ctx, b.sessionID)
						if err != nil {
							return err
						}
						ids <- id
					}
					err = x.Check(ctx, "k", 7)
					if attempts == 1 {
						first = err
					}
					if err != nil {
						return err
					}
					return x.Commit(ctx)
				})
			}()
			b.waitBlocked(t, <-ids, errB)
			if err := a.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-errB
			if retry.Classify(first) != retry.Aborted || !strings.Contains(first.Error(), "40001") {
				t.Errorf("first attempt: %v, want a 40001 serialization failure", first)
			}
			if attempts != 2 || !errors.Is(err, fence.ErrTokenCommitted) {
				t.Fatalf("attempts=%d err=%v, want the retry to find the token already committed", attempts, err)
			}
		})
	}
}

// TestSQLiteStaleSnapshotRetried: deferred transactions that read before
// fencing hold snapshots; once one commits, the others' writes fail with
// SQLITE_BUSY(_SNAPSHOT), which retry re-runs until they see the new mark.
func TestSQLiteStaleSnapshotRetried(t *testing.T) {
	b := sqliteBackend(t, "deferred", 20000)
	ctx := context.Background()
	const n = 8
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	start := make(chan struct{})
	errs := make([]error, n)
	firsts := make([]error, n)
	for i := range n {
		go func() {
			defer done.Done()
			attempt := 0
			errs[i] = retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
				attempt++
				x, err := b.begin(ctx, sql.LevelDefault)
				if err != nil {
					return err
				}
				defer x.Rollback(ctx)
				if attempt == 1 {
					_, err := x.Int(ctx, "SELECT count(*) FROM "+b.f.Table())
					ready.Done()
					<-start
					if err != nil {
						return err
					}
				}
				err = x.Check(ctx, "k", 7)
				if err == nil {
					err = b.write(ctx, x, "k", 7)
				}
				if err == nil {
					err = x.Commit(ctx)
				}
				if attempt == 1 {
					firsts[i] = err
				}
				return err
			}, retry.MaxAttempts(1000))
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	won, busy := 0, 0
	for i := range n {
		switch {
		case errs[i] == nil:
			won++
		case !errors.Is(errs[i], fence.ErrTokenCommitted):
			t.Errorf("unexpected error: %v", errs[i])
		}
		if firsts[i] != nil && retry.Classify(firsts[i]) == retry.Aborted {
			busy++
		}
	}
	if won != 1 || busy != n-1 {
		t.Fatalf("won=%d, first attempts aborted=%d; want 1 and %d", won, busy, n-1)
	}
	if got := b.written(t, "k"); fmt.Sprint(got) != "[7]" {
		t.Errorf("business rows %v", got)
	}
}

func TestNew(t *testing.T) {
	for _, name := range []string{"fence", "ticket_fence", "_x1", "app.ticket_fence", "T", strings.Repeat("a", 63)} {
		f, err := fence.New(fence.Postgres, fence.WithTable(name))
		if err != nil || f.Table() != name {
			t.Errorf("WithTable(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "1fence", "fence;DROP TABLE x", "a.b.c", "a.", ".a", `"fence"`, "fen ce",
		"fence--", "fénce", strings.Repeat("a", 64), "a-b"} {
		if _, err := fence.New(fence.SQLite, fence.WithTable(name)); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("WithTable(%q): %v, want ErrInvalid", name, err)
		}
	}
	f, err := fence.New(fence.MySQL)
	if err != nil || f.Table() != fence.DefaultTable || f.Dialect() != fence.MySQL {
		t.Errorf("defaults: %v %v %v", f, err, f.Dialect())
	}
	if _, err := fence.New(fence.Dialect(0)); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("unknown dialect: %v", err)
	}
	if s := fmt.Sprint(fence.Postgres, fence.MySQL, fence.SQLite, fence.Dialect(9)); s != "postgres mysql sqlite Dialect(9)" {
		t.Errorf("dialect names: %s", s)
	}
}

func TestPgxNeedsPostgres(t *testing.T) {
	f, err := fence.New(fence.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgxfence.Check(context.Background(), f, nil, "k", 1); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("CheckPgx with sqlite dialect: %v", err)
	}
	if err := pgxfence.CreateTable(context.Background(), f, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("CreateTablePgx with sqlite dialect: %v", err)
	}
}

// TestDatabaseErrorsWrapped: a failing statement comes back wrapped, not as
// a stale token.
func TestDatabaseErrorsWrapped(t *testing.T) {
	b := newSQLite(t)
	ctx := context.Background()
	if _, err := b.db.Exec("DROP TABLE " + b.f.Table()); err != nil {
		t.Fatal(err)
	}
	err := checkTx(ctx, b, "k", 1)
	if err == nil || errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("err = %v", err)
	}
}

// TestCreateTableConcurrent: instances starting together may all call
// CreateTable at once, on their own connections; every call must succeed
// and leave one working table. Several rounds, each on a table that does
// not exist yet, because the race is only in creating it.
func TestCreateTableConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		const callers, rounds = 8, 5
		b.db.SetMaxOpenConns(callers + 1)
		for round := range rounds {
			f, err := fence.New(b.dialect, fence.WithTable(fmt.Sprintf("fence_race_%d", round)))
			if err != nil {
				t.Fatal(err)
			}
			// One connection per caller, opened before the start, so that
			// the statements are sent at the same moment. The native pgx
			// backend calls CreateTablePgx.
			create := make([]func() error, callers)
			var release []func()
			for i := range create {
				if b.pool != nil {
					c, err := b.pool.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					release = append(release, c.Release)
					create[i] = func() error { return pgxfence.CreateTable(ctx, f, c.Conn()) }
					continue
				}
				c, err := b.db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				release = append(release, func() { c.Close() })
				if err := c.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
				create[i] = func() error { return f.CreateTable(ctx, c) }
			}
			start := make(chan struct{})
			errs := make([]error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					errs[i] = create[i]()
				})
			}
			close(start)
			wg.Wait()
			for _, r := range release {
				r()
			}
			for i := range create {
				if errs[i] != nil {
					t.Fatalf("round %d, caller %d: %v", round, i, errs[i])
				}
			}
			x, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Check(ctx, x, "k", 1); err != nil {
				t.Fatalf("round %d: the created table does not work: %v", round, err)
			}
			if err := x.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The client's ticket is a fence.Ticket as it is.
var _ fence.Ticket = (*ticketing.Ticket)(nil)

type ticket struct {
	key   string
	token uint64
}

func (t *ticket) Key() string   { return t.key }
func (t *ticket) Token() uint64 { return t.token }

// TestCheckTicket: the ticket form fences the ticket's own key with its
// token, and refuses a missing ticket.
func TestCheckTicket(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		run := func(tk fence.Ticket) error {
			x, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Rollback(ctx)
			if err := x.CheckTicket(ctx, tk); err != nil {
				return err
			}
			return x.Commit(ctx)
		}
		if err := run(&ticket{"orders/1", 5}); err != nil {
			t.Fatal(err)
		}
		if m := b.mark(t, "orders/1"); m != 5 {
			t.Fatalf("mark of the ticket's key %d, want 5", m)
		}
		wantStale(t, run(&ticket{"orders/1", 5}), "orders/1", 5, 5)
		wantStale(t, run(&ticket{"orders/1", 4}), "orders/1", 4, 5)
		if err := run(&ticket{"orders/2", 5}); err != nil {
			t.Fatalf("another key's ticket: %v", err)
		}
		var nilTicket *ticket
		for _, tk := range []fence.Ticket{nil, nilTicket} {
			if err := run(tk); !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "nil ticket") {
				t.Errorf("CheckTicket(%#v) = %v, want ErrInvalid naming the nil ticket", tk, err)
			}
		}
	})
}

// TestNoClientDependency: package fence takes tickets through its own
// interface and imports no package of this module (the client among them).
func TestNoClientDependency(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if imp == "github.com/ticketing-io/ticketing" || strings.HasPrefix(imp, "github.com/ticketing-io/ticketing/") {
			t.Errorf("package fence imports %s", imp)
		}
	}
}

// TestSecondCheckInSameTx: as Check's documentation says, checking a key
// twice in one transaction finds the transaction's own mark.
func TestSecondCheckInSameTx(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		x, err := b.begin(ctx, sql.LevelDefault)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Rollback(ctx)
		if err := x.Check(ctx, "k", 3); err != nil {
			t.Fatal(err)
		}
		wantStale(t, x.Check(ctx, "k", 3), "k", 3, 3)
	})
}
