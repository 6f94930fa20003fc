package ticketing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
)

// Acquire the ticket of an order, fence the protected write with the
// ticket's token in the same transaction, then release the ticket.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// One Broker per process, shared by every goroutine.
	b, err := ticketing.Connect("127.0.0.1:5225", ticketing.WithToken(os.Getenv("TICKETING_TOKEN")))
	if err != nil {
		log.Fatal(err) // bad configuration only; connecting happens in the background
	}
	defer b.Close()

	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	f, err := fence.New(fence.Postgres)
	if err != nil {
		log.Fatal(err)
	}

	// Wait up to 5 s in the key's queue, lease 30 s; the work needs at least 2 s.
	t, err := b.Acquire(ctx, "orders/42", 5*time.Second, 30*time.Second, 2*time.Second)
	if err != nil {
		log.Printf("order 42 not paid: %v", err) // do not enter the critical section
		return
	}
	defer t.Close() // best-effort background release if Release is not reached

	// The work must be done before the ticket's conservative deadline.
	work, cancelWork := context.WithDeadline(ctx, t.Deadline())
	defer cancelWork()
	tx, err := db.BeginTx(work, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // no effect after Commit
	// In the protected write's transaction: the token must be above the
	// key's high-water mark, which it then becomes.
	if err := f.Check(work, tx, t.Key(), t.Token()); err != nil {
		log.Printf("order 42 not paid: %v", err) // fence.ErrStaleToken: a newer holder got the key
		return
	}
	if _, err := tx.ExecContext(work, `UPDATE orders SET status = 'paid' WHERE id = $1`, 42); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	if err := t.Release(ctx); err != nil {
		log.Printf("release: %v", err) // the ticket ends with its lease at the latest
	}
}

// Connect fails only for a bad configuration; connecting is done in the
// background.
func ExampleConnect() {
	_, err := ticketing.Connect("")
	fmt.Println(err)
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))

	_, err = ticketing.Connect("127.0.0.1:5225", ticketing.WithTLS(ticketing.TLSCAFile("/nonexistent/ca.crt")))
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))

	_, err = ticketing.Connect("127.0.0.1:5225", ticketing.WithTLS(ticketing.TLSOff().WithClientCert("client.crt", "client.key")))
	fmt.Println(err)
	// Output:
	// ticketing: connect: no server address given
	// true
	// true
	// ticketing: connect: a client certificate needs TLS: add it to TLSSystemRoots, TLSCAFile or TLSInsecureSkipVerify, not TLSOff
}

// Arguments out of range are rejected before anything is sent.
func ExampleBroker_Acquire_invalidArgument() {
	b, err := ticketing.Connect("127.0.0.1:5225")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	// The budget (45 s) cannot fit in the lease (30 s).
	_, err = b.Acquire(context.Background(), "orders/42", 5*time.Second, 30*time.Second, 45*time.Second)
	fmt.Println(err)
	fmt.Println(errors.Is(err, ticketing.ErrInvalidArgument))
	// Output:
	// ticketing: acquire "orders/42": work budget 45 s (45 s rounded up) cannot fit in a 30 s lease: even a ticket granted at once has at most 29.6 s of conservative time left (1% clock allowance, 0.1 s margin); use a budget of at most 29 s or a longer lease; nothing was sent
	// true
}

// Release a ticket known only by its key and token: here a token stored
// with the job it guards by a process that has since stopped.
func ExampleBroker_ReleaseToken() {
	b, err := ticketing.Connect("127.0.0.1:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var token uint64 = 1234 // read from the job's row
	switch err := b.ReleaseToken(ctx, "orders/42", token); {
	case err == nil:
		fmt.Println("released")
	case errors.Is(err, ticketing.ErrNotHeld):
		fmt.Println("the ticket had already ended") // expired, or released before
	default:
		fmt.Println(err) // outcome unknown: it may stay held until its lease expires
	}
}

// Mutual TLS: verify the servers against a CA and present a client
// certificate.
func ExampleTLSMode_WithClientCert() {
	tlsMode := ticketing.TLSCAFile("/etc/ticketing/ca.crt").
		WithClientCert("/etc/ticketing/client.crt", "/etc/ticketing/client.key")
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225", ticketing.WithTLS(tlsMode))
	if err != nil {
		log.Fatal(err) // e.g. an unreadable certificate or key file
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.WaitReady(ctx); err != nil {
		// errors.Is(err, ticketing.ErrUnauthenticated) when the servers
		// refuse the certificate; the message says why.
		log.Fatal(err)
	}
}

// Back up the cluster's state: stream a snapshot of the leader into a
// file, kept only once it is complete and verified. Restore it with
// "ticketd --restore backup.snap".
func ExampleAdmin_SaveSnapshot() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Any node serves a snapshot of its own applied state; the leader's is
	// the latest (Status tells which node leads).
	a, err := ticketing.DialAdmin(ctx, "10.0.0.1:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	tmp, err := os.CreateTemp(".", "backup.snap.partial-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	info, err := a.SaveSnapshot(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), "backup.snap")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("saved index %d, term %d: %d bytes, sha256 %s\n", info.Index, info.Term, info.Size, info.SHA256)
}
