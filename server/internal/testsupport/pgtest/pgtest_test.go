package pgtest

import (
	"os"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/ticketing-io/ticketing/server/internal/testsupport/dbproc"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	return dbproc.QueryValue(t, "pgx", dsn, q)
}

func TestContract(t *testing.T) {
	dbproc.CheckContract(t, dbproc.Contract[*Server]{Start: Start, Shared: Shared, Driver: "pgx",
		CountTable: "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'",
	})
}

// The server is PostgreSQL 15, without fsync (a fixture, not the product).
func TestSettings(t *testing.T) {
	srv := Shared(t)
	if v := query(t, srv.DSN(), "SHOW server_version"); !strings.HasPrefix(v, "15") {
		t.Errorf("server_version %q, want 15.x", v)
	}
	if v := query(t, srv.DSN(), "SHOW fsync"); v != "off" {
		t.Errorf("fsync = %s", v)
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
