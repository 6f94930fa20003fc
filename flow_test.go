package ticketing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// store stands for a database: write is one transaction that checks and
// advances the key's fencing high-water mark together with the business
// write (fence.Check does it for PostgreSQL, MySQL and SQLite).
type store struct {
	mu   sync.Mutex
	high map[string]uint64 // fencing high-water mark per key
	rows map[string]string // the business data
}

func (s *store) write(key string, token uint64, value string) error {
	s.mu.Lock() // BEGIN
	defer s.mu.Unlock()
	if token <= s.high[key] {
		return fmt.Errorf("stale token %d, high-water mark is %d", token, s.high[key]) // ROLLBACK
	}
	s.high[key] = token // the new high-water mark
	s.rows[key] = value // the business write
	return nil          // COMMIT
}

// The package example's flow against a fake server: acquire, fence the
// write with the token, release; a later holder's write wins and a late
// write under the old token is fenced off.
func TestAcquireFenceReleaseFlow(t *testing.T) {
	locks := faketicketd.NewLocks()
	defer locks.Close()
	srv := faketicketd.Start(t, faketicketd.Serve(locks, faketicketd.Ready{}))
	b, err := ticketing.Connect(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db := &store{high: map[string]uint64{}, rows: map[string]string{}}

	first, err := b.Acquire(ctx, "orders/42", 5*time.Second, 30*time.Second, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Token() != 1 || first.Remaining() < 2*time.Second {
		t.Errorf("token %d, remaining %v", first.Token(), first.Remaining())
	}
	if err := db.write("orders/42", first.Token(), "paid"); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// While a ticket is held, a zero-wait attempt is simply not acquired.
	second, err := b.Acquire(ctx, "orders/42", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := b.Acquire(ctx, "orders/42", 0, 30*time.Second, 0); !errors.Is(err, ticketing.ErrNotAcquired) {
		t.Errorf("held elsewhere: %v, want ErrNotAcquired", err)
	}

	// The new holder writes; a late write under the old token is fenced off.
	if err := db.write("orders/42", second.Token(), "shipped"); err != nil {
		t.Fatal(err)
	}
	if err := db.write("orders/42", first.Token(), "paid again"); err == nil || err.Error() != "stale token 1, high-water mark is 2" {
		t.Errorf("late write: %v", err)
	}
	if db.rows["orders/42"] != "shipped" {
		t.Errorf("row %q", db.rows["orders/42"])
	}
}
