package dbproc

import (
	"database/sql"
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
// server, the database/sql driver that speaks to it, and its database's
// words for counting a table.
type Contract[S Server] struct {
	Start, Shared func(testing.TB) S
	// Driver is the database/sql driver name for the harness's DSNs.
	Driver string
	// CountTable counts the tables named only_in_a in the current database.
	CountTable string
}

// QueryValue returns the one value q selects on dsn, through driver.
func QueryValue(t *testing.T, driver, dsn, q string) string {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	var s string
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func closeDB(t *testing.T, db *sql.DB) {
	if err := db.Close(); err != nil {
		t.Errorf("closing the connection: %v", err)
	}
}

// execKeepOpen runs stmt on dsn and leaves the connection open until t ends,
// so that a drop at cleanup meets an open session.
func execKeepOpen(t *testing.T, driver, dsn, stmt string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(t, db) })
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
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
		execKeepOpen(t, c.Driver, a, "CREATE TABLE only_in_a (x int)")
		if n := QueryValue(t, c.Driver, b, c.CountTable); n != "0" {
			t.Fatalf("table visible in the other database: %s", n)
		}
	})
	t.Run("start and stop", func(t *testing.T) {
		srv := c.Start(t)
		if QueryValue(t, c.Driver, srv.DSN(), "SELECT 'up'") != "up" {
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
