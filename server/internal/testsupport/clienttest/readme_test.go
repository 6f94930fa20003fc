package clienttest_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// readmeUsage is the README's "Using it from Go" block, statement for
// statement (TestReadmeUsageIsThisCode checks it); only the Connect call
// differs, taking the test servers' address and options instead of the
// README's example cluster.
func readmeUsage(ctx context.Context, db *sql.DB, addrs string, opts ...ticketing.Option) error {
	b, err := ticketing.Connect(addrs, opts...)
	// README: the rest is the README's block as written.
	if err != nil {
		return err // configuration error; the connection is made in the background
	}
	defer b.Close()
	// Calls wait for a connection as long as their context allows (wait bounds
	// the key's queue, not the connection): check the address, token and TLS
	// settings once at start-up, with a timeout.
	ready, cancelReady := context.WithTimeout(ctx, 10*time.Second)
	defer cancelReady()
	if err := b.WaitReady(ready); err != nil {
		return err // a wrong port, a refused token or certificate, no leader within 10 s
	}
	f, err := fence.New(fence.Postgres) // once; f.CreateTable(ctx, db) creates its table
	if err != nil {
		return err
	}

	// wait up to 5 s, lease 30 s, and hand the ticket over only with at least 2 s of work time left
	t, err := b.Acquire(ctx, "orders/42", 5*time.Second, 30*time.Second, 2*time.Second)
	if err != nil {
		return err // ErrNotAcquired, ErrCapacity, ErrIndeterminate, ...: do not enter the critical section
	}
	defer t.Close() // bounded best-effort release, if Release below is not reached

	// The work runs under the ticket's context: at the ticket's conservative
	// deadline the transaction is cancelled instead of committing late.
	work, stopWork := t.Context(ctx)
	defer stopWork()
	// In ONE database transaction: reject t.Token() <= stored high-water mark,
	// store t.Token() as the new mark, do the business write, commit.
	// Only then release.
	tx, err := db.BeginTx(work, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	switch err := f.CheckTicket(work, tx, t); {
	case errors.Is(err, fence.ErrTokenCommitted):
		return nil // this ticket's transaction already committed (a retry after a lost reply): done
	case err != nil:
		return err // fence.ErrStaleToken: a newer holder has committed; change nothing
	}
	// read what the write depends on only now, after the check, in this transaction
	if _, err := tx.ExecContext(work, "UPDATE orders SET state = 'paid' WHERE id = 42"); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return t.Release(ctx)
}

// The README's usage block runs as written against a real ticketd and a
// real PostgreSQL: the order is paid, the fence holds the ticket's token and
// the ticket is released.
func TestReadmeUsageRuns(t *testing.T) {
	c := testcluster.Start(t, 1)
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id int PRIMARY KEY, state text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO orders VALUES (42, 'new')"); err != nil {
		t.Fatal(err)
	}
	f, err := fence.New(fence.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}

	if err := readmeUsage(ctx, db, c.Addr(0)); err != nil {
		t.Fatalf("the README's code failed: %v", err)
	}
	var state string
	if err := db.QueryRowContext(ctx, "SELECT state FROM orders WHERE id = 42").Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "paid" {
		t.Errorf("order 42 is %q, want paid", state)
	}
	var mark int64
	if err := db.QueryRowContext(ctx, "SELECT token FROM "+f.Table()+" WHERE fence_key = 'orders/42'").Scan(&mark); err != nil {
		t.Fatalf("the fence stored no mark for orders/42: %v", err)
	}
	b, err := ticketing.Connect(c.Addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info, err := b.Describe(ctx, "orders/42")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held {
		t.Errorf("orders/42 is still held after the README's code returned: %+v", info)
	}
	if mark < 1 {
		t.Errorf("the fence's mark is %d, want the ticket's token", mark)
	}
}

// readmeBlock returns the lines of the README's "Using it from Go" block
// after its Connect statement.
func readmeBlock(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Using it from Go\n\n```go\n(.*?)\n```").FindSubmatch(data)
	if m == nil {
		t.Fatal("README.md has no \"## Using it from Go\" section with a go block")
	}
	lines := strings.Split(string(m[1]), "\n")
	for i, l := range lines {
		if strings.Contains(l, "ticketing.WithTLS(") { // the Connect call's last line
			return lines[i+1:]
		}
	}
	t.Fatal("the README's block has no Connect call with WithTLS")
	return nil
}

// sourceBlock returns readmeUsage's lines after its "README:" marker.
func sourceBlock(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	start := strings.Index(src, "\t// README: the rest")
	end := strings.Index(src[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("readmeUsage lost its README marker")
	}
	return strings.Split(src[start:start+end], "\n")[1:]
}

// The README's block is exactly the code TestReadmeUsageRuns runs.
func TestReadmeUsageIsThisCode(t *testing.T) {
	norm := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	readme, src := norm(readmeBlock(t)), norm(sourceBlock(t))
	for i := 0; i < max(len(readme), len(src)); i++ {
		var r, s string
		if i < len(readme) {
			r = readme[i]
		}
		if i < len(src) {
			s = src[i]
		}
		if r != s {
			t.Fatalf("README.md's \"Using it from Go\" and readmeUsage in readme_test.go differ at line %d after Connect:\nREADME: %s\ntest:   %s", i+1, r, s)
		}
	}
}
