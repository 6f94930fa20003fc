package ticketing_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ticketing-io/ticketing"
)

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
