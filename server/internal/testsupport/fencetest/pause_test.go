package fencetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
)

// jobRun is the fenced transaction of the package documentation's example:
// Check, then the job's own record (one row per night, unique, inserted
// only if absent), then the work. It reports whether this run did the work.
func jobRun(ctx context.Context, b *backend, x tx, night string, token uint64) (did bool, err error) {
	if err := x.Check(ctx, "invoices/"+night, token); err != nil {
		return false, err
	}
	ins := "INSERT INTO job_runs (night, token) VALUES (?, ?) ON CONFLICT (night) DO NOTHING"
	if b.dialect == fence.MySQL {
		ins = "INSERT IGNORE INTO job_runs (night, token) VALUES (?, ?)"
	}
	n, err := x.ExecRows(ctx, b.q(ins), night, int64(token))
	if err != nil || n == 0 {
		return false, err // n == 0: this night's run is already recorded
	}
	return true, b.write(ctx, x, "invoices/"+night, token)
}

// TestPauseAfterCheck pins down what the package documentation says about
// a holder that pauses after Check and before COMMIT: the next holder's
// Check waits for it; when the paused holder commits, the next one passes
// with its larger token, so both writes are applied, in token order (the
// fence does not make work run at most once). The job's own unique record,
// written after Check in the same transaction, is what makes the second run
// do nothing.
func TestPauseAfterCheck(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		col := "night text PRIMARY KEY, token bigint NOT NULL"
		if b.dialect == fence.MySQL {
			col = "night VARCHAR(32) PRIMARY KEY, token BIGINT NOT NULL"
		}
		if _, err := b.db.Exec("CREATE TABLE job_runs (" + col + ")"); err != nil {
			t.Fatal(err)
		}
		for _, guard := range []bool{false, true} {
			night := fmt.Sprint("n-", guard)
			key := "invoices/" + night
			a, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Rollback(ctx)
			if guard {
				if did, err := jobRun(ctx, b, a, night, 1); !did || err != nil {
					t.Fatalf("A: did=%v err=%v", did, err)
				}
			} else {
				if err := a.Check(ctx, key, 1); err != nil {
					t.Fatal(err)
				}
				if err := b.write(ctx, a, key, 1); err != nil {
					t.Fatal(err)
				}
			}
			// A "pauses" here. B, granted the key with token 2, checks.
			bt, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				t.Fatal(err)
			}
			defer bt.Rollback(ctx)
			id, err := bt.Int(ctx, b.sessionID)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				did bool
				err error
			}
			resB := make(chan result, 1)
			errB := make(chan error, 1)
			go func() {
				var r result
				if guard {
					r.did, r.err = jobRun(ctx, b, bt, night, 2)
				} else if r.err = bt.Check(ctx, key, 2); r.err == nil {
					r.did, r.err = true, b.write(ctx, bt, key, 2)
				}
				errB <- r.err
				resB <- r
			}()
			b.waitBlocked(t, id, errB)
			// A resumes after its lease ended and commits.
			if err := a.Commit(ctx); err != nil {
				t.Fatalf("the paused holder's commit: %v", err)
			}
			r := <-resB
			if r.err != nil {
				t.Fatalf("B after A's commit: %v", r.err)
			}
			if err := bt.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			want, wantDid := "[1 2]", true // both ran, in token order
			if guard {
				want, wantDid = "[1]", false // the unique record stopped the second run
			}
			if got := b.written(t, key); fmt.Sprint(got) != want || r.did != wantDid {
				t.Errorf("guard=%v: business rows %v, B did the work %v; want %s, %v", guard, got, r.did, want, wantDid)
			}
			if m := b.mark(t, key); m != 2 {
				t.Errorf("guard=%v: mark %d, want 2", guard, m)
			}
		}
	}, "postgres/sql", "postgres/pgx", "mysql")
}

// TestIdleTimeoutEndsPausedHolder: the server-side idle-in-transaction
// timeout the documentation recommends ends the transaction of a holder
// paused after Check, which frees the key for the next holder; the paused
// holder's write never lands and its COMMIT fails.
func TestIdleTimeoutEndsPausedHolder(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		conn, err := b.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		set := "SET idle_in_transaction_session_timeout = '200ms'"
		if b.dialect == fence.MySQL {
			set = "SET SESSION idle_transaction_timeout = 1" // whole seconds
		}
		if _, err := conn.ExecContext(ctx, set); err != nil {
			t.Fatal(err)
		}
		a, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.f.Check(ctx, a, "k", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ExecContext(ctx, b.q("INSERT INTO "+b.biz+" (fence_key, token) VALUES (?, ?)"), "k", 1); err != nil {
			t.Fatal(err)
		}
		// A pauses. B's Check waits for A's row lock until the server ends
		// A's idle transaction.
		if err := checkTx(ctx, b, "k", 2); err != nil {
			t.Fatalf("B: %v", err)
		}
		err = a.Commit()
		if err == nil {
			t.Fatal("the paused holder's COMMIT succeeded after the server ended its transaction")
		}
		class := retry.Classify(err)
		t.Logf("paused holder's commit: %v (retry class %v)", err, class)
		if !strings.Contains(err.Error(), "25P03") && class != retry.TransportUnavailable && class != retry.ClientTransportError {
			t.Errorf("paused holder's commit: %v, want SQLSTATE 25P03 or a closed connection, as documented", err)
		}
		if got := b.written(t, "k"); fmt.Sprint(got) != "[2]" {
			t.Errorf("business rows %v, want only B's [2]", got)
		}
	}, "postgres/sql", "mysql")
}

// TestLockTimeoutRetried: the lock wait timeout the documentation
// recommends makes the next holder's Check fail while the row is held
// (PostgreSQL 55P03, MySQL 1205); package retry classifies it ABORTED and
// re-runs the transaction, which passes once the row is free.
func TestLockTimeoutRetried(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		a, err := b.begin(ctx, sql.LevelDefault)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Rollback(ctx)
		if err := a.Check(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		set, code := "SET LOCAL lock_timeout = '50ms'", "55P03"
		if b.dialect == fence.MySQL {
			set, code = "SET SESSION innodb_lock_wait_timeout = 1", "1205"
		}
		var first error
		attempts := 0
		err = retry.Policy{Rand: func(int64) int64 { return 0 }}.Do(ctx, func(ctx context.Context) error {
			attempts++
			x, err := b.begin(ctx, sql.LevelDefault)
			if err != nil {
				return err
			}
			defer x.Rollback(ctx)
			if err := x.Exec(ctx, set); err != nil {
				return err
			}
			err = x.Check(ctx, "k", 2)
			if attempts == 1 {
				first = err
				// The holder of the row finishes; the retry finds it free.
				if cerr := a.Commit(ctx); cerr != nil {
					t.Errorf("A: %v", cerr)
				}
			}
			if err != nil {
				return err
			}
			return x.Commit(ctx)
		})
		if first == nil || !strings.Contains(first.Error(), code) || retry.Classify(first) != retry.Aborted {
			t.Fatalf("first attempt: %v (class %v), want %s classified ABORTED", first, retry.Classify(first), code)
		}
		if err != nil || attempts != 2 {
			t.Fatalf("attempts=%d err=%v, want the retry to pass", attempts, err)
		}
		if m := b.mark(t, "k"); m != 2 {
			t.Errorf("mark %d, want 2", m)
		}
	}, "postgres/sql", "postgres/pgx", "mysql")
}

// TestDDLDocumented: the package documentation publishes each dialect's
// table definition exactly as DDL returns it.
func TestDDLDocumented(t *testing.T) {
	src, err := os.ReadFile("../../../../fence/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		doc.WriteString(strings.TrimSpace(strings.TrimPrefix(line, "//")) + "\n")
	}
	for _, d := range []fence.Dialect{fence.Postgres, fence.MySQL, fence.SQLite} {
		f, err := fence.New(d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc.String(), "\n"+f.DDL()+"\n") {
			t.Errorf("doc.go does not publish the %v table definition %q", d, f.DDL())
		}
		if !strings.HasPrefix(f.DDL(), "CREATE TABLE IF NOT EXISTS "+fence.DefaultTable+" (") {
			t.Errorf("%v DDL %q", d, f.DDL())
		}
	}
}
