package mysqltest

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

func TestShared(t *testing.T) {
	srv := Shared(t)
	if Shared(t) != srv {
		t.Fatal("Shared started a second server")
	}
	if v := query(t, srv.DSN(), "SELECT @@default_storage_engine"); v != "InnoDB" {
		t.Errorf("default storage engine %q, want InnoDB", v)
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") && os.Getenv(EnvDSN) == "" {
		t.Errorf("listens on %s, want loopback", srv.Addr())
	}
}

func TestNewDatabaseIsolated(t *testing.T) {
	srv := Shared(t)
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatal("same DSN twice")
	}
	db, err := sql.Open("mysql", a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	// Left open on purpose: the drop at cleanup must still succeed.
	t.Cleanup(func() { db.Close() })
	if n := query(t, b, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'only_in_a'"); n != "0" {
		t.Fatalf("table visible in the other database: %s", n)
	}
}

func TestStartStop(t *testing.T) {
	if os.Getenv(EnvDSN) != "" {
		t.Setenv(EnvDSN, "") // this test is about the server it starts itself
	}
	srv := Start(t)
	if query(t, srv.DSN(), "SELECT 'up'") != "up" {
		t.Fatal("no answer")
	}
	if os.Geteuid() == 0 {
		// As root the server must run as an unprivileged user.
		fi, err := os.Stat(fmt.Sprintf("/proc/%d", srv.proc.Pid()))
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
	if _, err := os.Stat(srv.proc.Dir()); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind: %v", srv.proc.Dir(), err)
	}
	db, err := sql.Open("mysql", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err == nil {
		t.Error("server still accepts connections after Stop")
	}
	if err := srv.Stop(); err != nil { // Start's cleanup calls it again
		t.Fatal(err)
	}
}

// TestExternalDSN: with the variable set, the named server is used and no
// process is started.
func TestExternalDSN(t *testing.T) {
	srv := Shared(t)
	t.Setenv(EnvDSN, srv.DSN())
	ext := Start(t)
	if ext.proc != nil || ext.Addr() != srv.Addr() {
		t.Fatalf("started a server (%v) or uses %s, want %s", ext.proc, ext.Addr(), srv.Addr())
	}
	if query(t, ext.NewDatabase(t), "SELECT DATABASE()") == "" {
		t.Fatal("no database selected")
	}
	t.Setenv(EnvDSN, "root@tcp(127.0.0.1:1)/")
	if _, err := start(); err == nil || !strings.Contains(err.Error(), EnvDSN) {
		t.Fatalf("unreachable server: %v, want an error naming %s", err, EnvDSN)
	}
}

func TestMissingBinariesFailWithInstallHint(t *testing.T) {
	t.Setenv(EnvDSN, "")
	t.Setenv("PATH", t.TempDir())
	old := binDirs
	binDirs = []string{t.TempDir()}
	t.Cleanup(func() { binDirs = old })
	_, err := start()
	if err == nil || !strings.Contains(err.Error(), "apt-get install mariadb-server") || !strings.Contains(err.Error(), "mariadbd") {
		t.Fatalf("err = %v, want a message naming mariadbd and how to install it", err)
	}
}
