package mysqltest

import (
	"os"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/dbproc"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	return dbproc.QueryValue(t, "mysql", dsn, q)
}

func TestContract(t *testing.T) {
	if os.Getenv(EnvDSN) != "" {
		t.Setenv(EnvDSN, "") // Start's server is the one it starts itself
	}
	dbproc.CheckContract(t, dbproc.Contract[*Server]{Start: Start, Shared: Shared, Driver: "mysql",
		CountTable: "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'only_in_a'",
	})
}

// The server is InnoDB's, on loopback.
func TestSettings(t *testing.T) {
	srv := Shared(t)
	if v := query(t, srv.DSN(), "SELECT @@default_storage_engine"); v != "InnoDB" {
		t.Errorf("default storage engine %q, want InnoDB", v)
	}
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") && os.Getenv(EnvDSN) == "" {
		t.Errorf("listens on %s, want loopback", srv.Addr())
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
