package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestFenceOrdersWritesNotEarlierReads pins down the limit of fencing, and the
// rule that follows: a read the write depends on belongs in the fenced
// transaction, after the check.
//
// Worker 1 takes the key (1 s lease), reads the balance and is paused. Worker
// 2 gets the key after worker 1's lease expired. Worker 1 then wakes and
// writes, fenced, before worker 2 writes anything: no larger token has been
// stored yet, so the fence accepts worker 1's withdrawal (correctly: it is
// ordered before everything worker 2 will commit). Then worker 2 writes.
//
//   - read=before-check: worker 2 read the balance before worker 1's write
//     and outside its fenced transaction. Its fenced write is accepted (its
//     token is the largest) and erases worker 1's withdrawal.
//   - read=after-check: worker 2 reads inside its transaction, after the
//     check. It sees worker 1's withdrawal and both operations are applied.
func TestFenceOrdersWritesNotEarlierReads(t *testing.T) {
	c := testcluster.Start(t, 1)
	b1 := connect(t, c.AddrList())
	b2 := connect(t, c.AddrList())
	for _, readInside := range []bool{false, true} {
		name := "read=before-check"
		if readInside {
			name = "read=after-check"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := newStore(t, openSQL, accountsSchema)
			key := "accounts/" + t.Name()
			if err := s.exec(ctx, `INSERT INTO accounts VALUES ($1, $2, 'worker-0', 0)`, account, opening); err != nil {
				t.Fatal(err)
			}

			held := make(chan error, 1)
			w2Holds := make(chan struct{}) // closed once worker 2 holds the key (and, before-check, has read)
			w1Wrote := make(chan error, 1)
			go func() { // worker 1
				t1, err := acquire(ctx, b1, key, 30*time.Second, time.Second, 0)
				if err != nil {
					held <- fmt.Errorf("worker 1: acquire: %w", err)
					return
				}
				balance, err := s.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account)
				held <- err
				if err != nil {
					return
				}
				select { // paused until worker 2 has the key
				case <-w2Holds:
				case <-ctx.Done():
					w1Wrote <- ctx.Err()
					return
				}
				_, err = retried(ctx, s, func(ctx context.Context, tx txn) error {
					if err := tx.check(ctx, key, t1.Token()); err != nil {
						return err
					}
					return tx.exec(ctx, `UPDATE accounts SET balance = $2, updated_by = 'worker-1', updated_token = $3 WHERE id = $1`,
						account, balance-withdrawal, t1.Token())
				})
				w1Wrote <- err
			}()
			if err := <-held; err != nil {
				t.Fatal(err)
			}

			t2, err := acquire(ctx, b2, key, 30*time.Second, 30*time.Second, time.Second)
			if err != nil {
				t.Fatalf("worker 2: acquire: %v", err)
			}
			defer t2.Close()
			var early int64
			if !readInside {
				if early, err = s.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account); err != nil {
					t.Fatal(err)
				}
			}
			close(w2Holds)
			// Worker 1's late write is accepted: no larger token is stored yet.
			if err := <-w1Wrote; err != nil {
				t.Fatalf("worker 1's write, before any larger token was stored: %v", err)
			}

			if _, err := retried(ctx, s, func(ctx context.Context, tx txn) error {
				if err := tx.check(ctx, key, t2.Token()); err != nil {
					return err
				}
				balance := early
				if readInside {
					var err error
					if balance, err = tx.queryInt(ctx, `SELECT balance FROM accounts WHERE id = $1`, account); err != nil {
						return err
					}
				}
				return tx.exec(ctx, `UPDATE accounts SET balance = $2, updated_by = 'worker-2', updated_token = $3 WHERE id = $1`,
					account, balance+deposit, t2.Token())
			}); err != nil {
				t.Fatalf("worker 2's write: %v", err)
			}
			if err := t2.Release(ctx); err != nil {
				t.Errorf("worker 2's release: %v", err)
			}

			got := readAccount(ctx, t, s)
			want := opening - withdrawal + deposit
			if !readInside {
				want = opening + deposit // worker 1's withdrawal lost
			}
			if got.balance != int64(want) || got.updatedBy != "worker-2" {
				t.Fatalf("account = %+v, want balance %d written by worker-2", got, want)
			}
		})
	}
}
