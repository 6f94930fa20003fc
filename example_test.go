package ticketing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// store stands for a database: write is one transaction that checks and
// advances the key's fencing high-water mark together with the business
// write (see fence.Check for PostgreSQL, MySQL and SQLite).
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

// Acquire a ticket, fence the protected write with its token, release.
func Example() {
	// A fake server for the example; in production: ticketing.Connect("10.0.0.1:5225,...").
	locks := faketicketd.NewLocks()
	defer locks.Close()
	srv, err := faketicketd.New(faketicketd.Serve(locks, faketicketd.Ready{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	b, err := ticketing.Connect(srv.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := &store{high: map[string]uint64{}, rows: map[string]string{}}

	// Wait up to 5 s, lease 30 s, the work needs at least 2 s.
	first, err := b.Acquire(ctx, "orders/42", 5*time.Second, 30*time.Second, 2*time.Second)
	if err != nil {
		fmt.Println(err) // do not enter the critical section
		return
	}
	fmt.Println("token:", first.Token(), "enough time:", first.Remaining() >= 2*time.Second)
	fmt.Println("write:", db.write("orders/42", first.Token(), "paid"))
	fmt.Println("release:", first.Release(ctx))

	// While a ticket is held, a zero-wait attempt is simply not acquired.
	second, err := b.Acquire(ctx, "orders/42", 0, 30*time.Second, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Close()
	_, err = b.Acquire(ctx, "orders/42", 0, 30*time.Second, 0)
	fmt.Println("held elsewhere:", errors.Is(err, ticketing.ErrNotAcquired))

	// The new holder writes; a late write under the old token is fenced off.
	fmt.Println("write:", db.write("orders/42", second.Token(), "shipped"))
	fmt.Println("late write:", db.write("orders/42", first.Token(), "paid again"))
	fmt.Println("row:", db.rows["orders/42"])

	// Output:
	// token: 1 enough time: true
	// write: <nil>
	// release: <nil>
	// held elsewhere: true
	// write: <nil>
	// late write: stale token 1, high-water mark is 2
	// row: shipped
}

// Connect fails only for a bad configuration; connecting is done in the
// background.
func ExampleConnect() {
	_, err := ticketing.Connect("")
	fmt.Println(err)
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))

	_, err = ticketing.Connect("127.0.0.1:5225", ticketing.WithTLS(ticketing.TLSCAFile("/nonexistent/ca.crt")))
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))
	// Output:
	// ticketing: connect: no server address given
	// true
	// true
}

// Arguments out of range are rejected before anything is sent.
func ExampleBroker_Acquire_invalidArgument() {
	b, err := ticketing.Connect("127.0.0.1:5225")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	// The budget (45 s) is longer than the lease (30 s).
	_, err = b.Acquire(context.Background(), "orders/42", 5*time.Second, 30*time.Second, 45*time.Second)
	fmt.Println(err)
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))
	// Output:
	// ticketing: acquire "orders/42": work budget 45s is longer than the lease 30s (30 s rounded up): the work could not finish before the lease ends; nothing was sent
	// true
}
