package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// The business data: one bank account. Worker 1 withdraws, worker 2
// deposits; done one after the other, the balance ends at
// opening - withdrawal + deposit.
const (
	accountsSchema = `CREATE TABLE accounts (
		id            text   PRIMARY KEY,
		balance       bigint NOT NULL,
		updated_by    text   NOT NULL,
		updated_token bigint NOT NULL
	)`
	account    = "acct-1"
	opening    = 100
	withdrawal = 30 // worker 1
	deposit    = 50 // worker 2
)

type accountRow struct {
	balance   int64
	updatedBy string
	token     int64
}

func readAccount(ctx context.Context, t *testing.T, s store) accountRow {
	t.Helper()
	var r accountRow
	err := s.queryRow(ctx, `SELECT balance, updated_by, updated_token FROM accounts WHERE id = $1`, account).
		Scan(&r.balance, &r.updatedBy, &r.token)
	if err != nil {
		t.Fatalf("read account %s: %v", account, err)
	}
	return r
}

// TestPausedHolder is the proof. Worker 1 takes the account's ticket with a
// 1 s lease and reads the balance; then it is paused (blocked on a channel)
// until worker 2 has committed. Worker 2 asks for the same key with a wait:
// the server grants it only once worker 1's lease has expired, with a larger
// token, and worker 2 deposits. Worker 1 then wakes, still believing it holds
// the key, and writes the balance it computed before the pause.
//
//   - fence=on: worker 1's transaction is fenced with its token. fence rejects
//     it with ErrStaleToken, retry.Do does not retry it (1 attempt), and the
//     account shows only worker 2's deposit. Worker 1 then starts over with a
//     new ticket, and both operations are applied.
//   - fence=off: the same run with a plain read-modify-write. Worker 1's write
//     commits and erases worker 2's deposit: the lost update the fence
//     prevents.
//
// Each combination runs on a 1-node and a 3-node cluster, and through
// database/sql (pgx stdlib) and native pgx.
func TestPausedHolder(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, nodes)
			b1 := connect(t, c.AddrList()) // worker 1's process
			b2 := connect(t, c.AddrList()) // worker 2's process
			for _, d := range drivers {
				for _, fenced := range []bool{true, false} {
					name := d.name + "/fence=off"
					if fenced {
						name = d.name + "/fence=on"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						s := newStore(t, d.open, accountsSchema)
						pausedHolder(t, b1, b2, s, "accounts/"+t.Name(), fenced)
					})
				}
			}
		})
	}
}

// worker1Read is what worker 1 has once it holds the key and has read.
type worker1Read struct {
	ticket  *ticketing.Ticket
	balance int64
	err     error
}

// worker1Wrote is worker 1's write after the pause.
type worker1Wrote struct {
	remaining time.Duration // the ticket's Remaining() when it woke
	attempts  int
	err       error
}

func pausedHolder(t *testing.T, b1, b2 *ticketing.Broker, s store, key string, fenced bool) {
	ctx := testCtx(t)
	if err := s.exec(ctx, `INSERT INTO accounts VALUES ($1, $2, 'worker-0', 0)`, account, opening); err != nil {
		t.Fatal(err)
	}

	read := make(chan worker1Read, 1)
	w2Committed := make(chan struct{}) // closed once worker 2's transaction committed
	wrote := make(chan worker1Wrote, 1)

	// Worker 1: a 1 s lease, a read, the pause, the write.
	go func() {
		t1, err := acquire(ctx, b1, key, 30*time.Second, time.Second, 0)
		if err != nil {
			read <- worker1Read{err: fmt.Errorf("worker 1: acquire %s: %w", key, err)}
			return
		}
		balance, err := s.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account)
		read <- worker1Read{ticket: t1, balance: balance, err: err}
		if err != nil {
			return
		}

		// The pause (a GC pause, a stopped VM): worker 1 does nothing until
		// worker 2, which can only have got the key after worker 1's lease
		// expired, has committed.
		select {
		case <-w2Committed:
		case <-ctx.Done():
			wrote <- worker1Wrote{err: ctx.Err()}
			return
		}

		// Worker 1 wakes and finishes what it started: balance - withdrawal,
		// computed from the balance it read under its (former) ticket.
		var w worker1Wrote
		w.remaining = t1.Remaining()
		w.attempts, w.err = retried(ctx, s, func(ctx context.Context, tx txn) error {
			if fenced {
				if err := tx.check(ctx, key, t1.Token()); err != nil {
					return err
				}
			}
			return tx.exec(ctx, `UPDATE accounts SET balance = $2, updated_by = 'worker-1', updated_token = $3 WHERE id = $1`,
				account, balance-withdrawal, t1.Token())
		})
		wrote <- w
	}()

	r1 := <-read
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	t1 := r1.ticket
	if r1.balance != opening {
		t.Fatalf("worker 1 read balance %d, want %d", r1.balance, opening)
	}

	// Worker 2 waits in the key's queue: Acquire returns only when the server
	// has expired worker 1's lease and granted the key to worker 2.
	t2, err := acquire(ctx, b2, key, 30*time.Second, 30*time.Second, time.Second)
	if err != nil {
		t.Fatalf("worker 2: acquire %s: %v", key, err)
	}
	if t2.Token() <= t1.Token() {
		t.Fatalf("worker 2's token %d is not above worker 1's %d", t2.Token(), t1.Token())
	}
	// Worker 2 follows the rule: fence first, then read and write in the
	// same transaction.
	attempts, err := retried(ctx, s, func(ctx context.Context, tx txn) error {
		if fenced {
			if err := tx.check(ctx, key, t2.Token()); err != nil {
				return err
			}
		}
		balance, err := tx.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account)
		if err != nil {
			return err
		}
		return tx.exec(ctx, `UPDATE accounts SET balance = $2, updated_by = 'worker-2', updated_token = $3 WHERE id = $1`,
			account, balance+deposit, t2.Token())
	})
	if err != nil {
		t.Fatalf("worker 2's deposit: %v after %d attempts", err, attempts)
	}
	close(w2Committed)

	w1 := <-wrote
	// Not a timing check: the client's deadline is never later than the
	// server's end of the lease, and the server granted worker 2 after that.
	if w1.remaining >= 0 {
		t.Errorf("worker 1 woke with Remaining() = %v, want < 0 (its lease ended before worker 2 got the key)", w1.remaining)
	}
	if err := t1.Release(ctx); !errors.Is(err, ticketing.ErrNotHeld) {
		t.Errorf("worker 1's release after the pause: %v, want ErrNotHeld", err)
	}
	got := readAccount(ctx, t, s)

	if !fenced {
		// The lost update: worker 1's write went through and erased worker 2's
		// deposit.
		if w1.err != nil {
			t.Fatalf("unfenced write of worker 1: %v", w1.err)
		}
		want := accountRow{balance: opening - withdrawal, updatedBy: "worker-1", token: int64(t1.Token())}
		if got != want {
			t.Fatalf("account = %+v, want %+v (worker 2's deposit lost)", got, want)
		}
		t.Logf("without fence: balance %d instead of %d, worker 2's deposit of %d was lost",
			got.balance, opening-withdrawal+deposit, deposit)
		if err := t2.Release(ctx); err != nil {
			t.Errorf("worker 2's release: %v", err)
		}
		return
	}

	// Fenced: worker 1's stale write was rejected, not retried, and changed
	// nothing; the account shows only worker 2's deposit.
	wantStaleOnce(t, w1.err, w1.attempts, key, t1.Token(), t2.Token())
	want := accountRow{balance: opening + deposit, updatedBy: "worker-2", token: int64(t2.Token())}
	if got != want {
		t.Fatalf("account = %+v, want %+v (only worker 2's deposit)", got, want)
	}
	if mark, err := fenceMark(ctx, s, key); err != nil || mark != t2.Token() {
		t.Fatalf("fence mark = %d, %v; want worker 2's token %d", mark, err, t2.Token())
	}
	if err := t2.Release(ctx); err != nil {
		t.Fatalf("worker 2's release: %v", err)
	}

	// Worker 1 starts over with a new ticket, reading inside the fenced
	// transaction this time: both operations end up applied, once each.
	t3, err := acquire(ctx, b1, key, 30*time.Second, 30*time.Second, time.Second)
	if err != nil {
		t.Fatalf("worker 1: acquire again: %v", err)
	}
	if attempts, err := retried(ctx, s, func(ctx context.Context, tx txn) error {
		if err := tx.check(ctx, key, t3.Token()); err != nil {
			return err
		}
		balance, err := tx.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account)
		if err != nil {
			return err
		}
		return tx.exec(ctx, `UPDATE accounts SET balance = $2, updated_by = 'worker-1', updated_token = $3 WHERE id = $1`,
			account, balance-withdrawal, t3.Token())
	}); err != nil {
		t.Fatalf("worker 1's second try: %v after %d attempts", err, attempts)
	}
	if err := t3.Release(ctx); err != nil {
		t.Errorf("worker 1's second release: %v", err)
	}
	got = readAccount(ctx, t, s)
	want = accountRow{balance: opening - withdrawal + deposit, updatedBy: "worker-1", token: int64(t3.Token())}
	if got != want {
		t.Fatalf("after worker 1's second try: account = %+v, want %+v", got, want)
	}
}
