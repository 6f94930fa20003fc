package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var s string
	if err := c.QueryRow(ctx, q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func TestShared(t *testing.T) {
	srv := Shared(t)
	if Shared(t) != srv {
		t.Fatal("Shared started a second server")
	}
	if v := query(t, srv.DSN(), "SHOW server_version"); !strings.HasPrefix(v, "15") {
		t.Errorf("server_version %q, want 15.x", v)
	}
	if v := query(t, srv.DSN(), "SHOW fsync"); v != "off" {
		t.Errorf("fsync = %s", v)
	}
}

func TestNewDatabaseIsolated(t *testing.T) {
	srv := Shared(t)
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatal("same DSN twice")
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	// Left open on purpose: the drop at cleanup must still succeed.
	t.Cleanup(func() { c.Close(ctx) })
	if n := query(t, b, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"); n != "0" {
		t.Fatalf("table visible in the other database: %s", n)
	}
}

func TestStartStop(t *testing.T) {
	srv := Start(t)
	if query(t, srv.DSN(), "SELECT 'up'") != "up" {
		t.Fatal("no answer")
	}
	if os.Geteuid() == 0 {
		// As root the server must run as the postgres user.
		fi, err := os.Stat(fmt.Sprintf("/proc/%d", srv.proc.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		cred, _ := credential()
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != cred.Uid {
			t.Errorf("postgres runs as uid %d, want %d", uid, cred.Uid)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.proc.Dir()); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind: %v", srv.proc.Dir(), err)
	}
	if _, err := pgx.Connect(context.Background(), srv.DSN()); err == nil {
		t.Error("server still accepts connections after Stop")
	}
	if err := srv.Stop(); err != nil { // Start's cleanup calls it again
		t.Fatal(err)
	}
}

func TestMissingBinariesFailWithInstallHint(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := binDirs
	binDirs = []string{t.TempDir()}
	t.Cleanup(func() { binDirs = old })
	_, err := start()
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql-15") || !strings.Contains(err.Error(), "initdb") {
		t.Fatalf("err = %v, want a message naming initdb and how to install it", err)
	}
}
