package dbproc

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// Server is a throwaway server as a harness (pgtest, mysqltest) gives it.
type Server interface {
	Stopper
	DSN() string
	NewDatabase(tb testing.TB) string
	// Proc is its process; nil for a server the harness did not start.
	Proc() *Proc
}

// Contract is what CheckContract needs of a harness: its two ways to get a
// server, and its database's words for a query, a table and a count.
type Contract[S Server] struct {
	Start, Shared func(testing.TB) S
	// Query returns the one value q selects on dsn.
	Query func(t *testing.T, dsn, q string) string
	// Exec runs stmt on dsn on a connection left open until t ends.
	Exec func(t *testing.T, dsn, stmt string)
	// CountTable counts the tables named only_in_a in the current database.
	CountTable string
}

// CheckContract checks what every harness promises: Shared is one server;
// NewDatabase gives each caller its own database, dropped at the end even
// with a connection left open; Start's server runs as an unprivileged user
// when the tests run as root, and Stop ends it, deletes its directory and
// may be called again.
func CheckContract[S Server](t *testing.T, c Contract[S]) {
	t.Run("shared", func(t *testing.T) {
		srv := c.Shared(t)
		if Server(c.Shared(t)) != Server(srv) {
			t.Fatal("Shared started a second server")
		}
	})
	t.Run("new database isolated", func(t *testing.T) {
		srv := c.Shared(t)
		a, b := srv.NewDatabase(t), srv.NewDatabase(t)
		if a == b {
			t.Fatal("same DSN twice")
		}
		// Left open on purpose: the drop at cleanup must still succeed.
		c.Exec(t, a, "CREATE TABLE only_in_a (x int)")
		if n := c.Query(t, b, c.CountTable); n != "0" {
			t.Fatalf("table visible in the other database: %s", n)
		}
	})
	t.Run("start and stop", func(t *testing.T) {
		srv := c.Start(t)
		if c.Query(t, srv.DSN(), "SELECT 'up'") != "up" {
			t.Fatal("no answer")
		}
		p := srv.Proc()
		if p == nil {
			t.Fatal("Start gave a server it did not start")
		}
		if os.Geteuid() == 0 {
			fi, err := os.Stat(fmt.Sprintf("/proc/%d", p.Pid()))
			if err != nil {
				t.Fatal(err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
				t.Errorf("the server runs as root")
			}
		}
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p.Dir()); !os.IsNotExist(err) {
			t.Errorf("directory %s left behind: %v", p.Dir(), err)
		}
		if err := srv.Stop(); err != nil { // Start's cleanup calls it again
			t.Fatal(err)
		}
	})
}
