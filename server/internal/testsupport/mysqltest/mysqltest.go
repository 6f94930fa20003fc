// Package mysqltest starts a throwaway MariaDB (or MySQL) server for tests,
// the way internal/pgtest starts PostgreSQL.
//
// The server runs from a temporary directory, listens on a free loopback
// port and on a unix socket in that directory, and is stopped and deleted
// when the test (or the package's test run) ends. It needs the server
// binaries mariadbd (or mysqld) and mariadb-install-db (or
// mysql_install_db) on PATH or in /usr/sbin, /usr/bin (Debian: apt-get
// install mariadb-server; test.sh installs it when it is missing). Missing
// binaries fail the test; they never skip it.
//
// If the environment variable TICKETING_TEST_MYSQL_DSN is set (for example
// root@tcp(127.0.0.1:3306)/test), no server is started: the tests use that
// server instead, and need a user that may create and drop databases.
//
// MariaDB refuses to run as root without --user. When the tests run as
// root, the server runs as the "mysql" user (which the Debian package
// creates), or as "nobody" where there is no such user.
//
// One server shared by all tests of a package, started on first use:
//
//	func TestMain(m *testing.M) { os.Exit(mysqltest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := mysqltest.Shared(t).NewDatabase(t) // a fresh database per test
//		...
//	}
//
// With pgtest in the same package: os.Exit(mysqltest.Run(func() int { return pgtest.Main(m) })).
package mysqltest

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/dbproc"
)

// EnvDSN names an existing server to use instead of starting one.
const EnvDSN = "TICKETING_TEST_MYSQL_DSN"

// Server is a running throwaway server, or the one EnvDSN names.
type Server struct {
	base *mysql.Config // root DSN, no database
	proc *dbproc.Proc  // nil for an external server
	dbs  atomic.Int64  // names databases made by NewDatabase
}

// DSN returns a DSN (go-sql-driver/mysql syntax) for the administrative
// user, over TCP, with no database selected.
func (s *Server) DSN() string { return s.dsn("") }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.base.Addr }

func (s *Server) dsn(db string) string {
	c := s.base.Clone()
	c.DBName = db
	return c.FormatDSN()
}

// NewDatabase creates an empty database, drops it when tb ends, and returns
// its DSN. Tests sharing a server use it to stay out of each other's way.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	// The pid keeps concurrent test binaries apart on an external server.
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), s.dbs.Add(1))
	if err := s.admin("CREATE DATABASE " + name); err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.admin("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Errorf("mysqltest: %v", err)
		}
	})
	return s.dsn(name)
}

func (s *Server) admin(stmt string) error { return adminAt(s.DSN(), stmt) }

func adminAt(dsn, stmt string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// Proc is the server's process; nil for the server EnvDSN names.
func (s *Server) Proc() *dbproc.Proc { return s.proc }

// Stop shuts a started server down and deletes its directory; for the
// server EnvDSN names it does nothing. Safe to call more than once.
func (s *Server) Stop() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Stop()
}

// Start starts a server for tb (or uses EnvDSN's) and stops it when tb
// ends. It fails tb if the server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return dbproc.StartFor(tb, "mysqltest", start)
}

var shared = dbproc.NewShared("mysqltest", start)

// Main runs the package's tests with m.Run and then stops the server that
// Shared started, if any.
func Main(m *testing.M) int { return Run(m.Run) }

// Run is Main for a package whose TestMain also wraps m.Run in something
// else, such as pgtest.Main.
func Run(run func() int) int { return shared.Run(run) }

// Shared returns the package's shared server, starting it on the first call.
// The package's TestMain must run Main (or Run), which stops the server at
// the end. A server that failed to start fails every test that asks for it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	return shared.Get(tb)
}

// binDirs are searched after PATH for the server binaries: Debian keeps
// mariadbd in /usr/sbin, which a non-root PATH may lack.
var binDirs = []string{"/usr/sbin", "/usr/bin", "/usr/local/mysql/bin"}

const installHint = "install the MariaDB server (Debian/Ubuntu: apt-get install mariadb-server; test.sh does it), " +
	"or set " + EnvDSN + " to the DSN of a server to use, such as root@tcp(127.0.0.1:3306)/test"

// credential is who runs the server when the tests run as root: "mysql",
// or "nobody" where there is no mysql user.
func credential() (*syscall.Credential, error) {
	return dbproc.Credential("the server", installHint, "mysql", "nobody")
}

func start() (*Server, error) {
	if dsn := strings.TrimSpace(os.Getenv(EnvDSN)); dsn != "" {
		c, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDSN, err)
		}
		c.DBName = ""
		s := &Server{base: c}
		if err := s.admin("SELECT 1"); err != nil {
			return nil, fmt.Errorf("%s=%q: the server does not answer: %w", EnvDSN, dsn, err)
		}
		return s, nil
	}
	return startLocal()
}

// logFileSize keeps the redo log small (the default is 96 MB): several
// packages' tests run a server each at the same time.
const logFileSize = "8M"

// rootAt is the administrative user's DSN of the server on port.
func rootAt(port int) *mysql.Config {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return c
}

// startLocal initialises a data directory in a new temporary directory and
// starts the server on it.
func startLocal() (*Server, error) {
	server, err := dbproc.FindBinary(binDirs, installHint, "mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	install, err := dbproc.FindBinary(binDirs, installHint, "mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := dbproc.TempDir("mysqltest-", cred)
	if err != nil {
		return nil, err
	}
	const path = ":/usr/sbin:/usr/bin"
	data := filepath.Join(dir, "data")
	// "normal" root authentication: root logs in without a password, over
	// TCP as root@127.0.0.1 too (skip-name-resolve keeps the host an IP).
	cmd := dbproc.Command(dir, cred, path, install, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--innodb-log-file-size="+logFileSize) // passed on to the bootstrap server
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %v\n%s", filepath.Base(install), err, out)
	}
	p, err := dbproc.Launch(dbproc.Spec{Name: filepath.Base(server), Dir: dir, Cred: cred, ExtraPath: path, Binary: server, Log: "server.log",
		Args: func(port int, logPath string) []string {
			return []string{"--no-defaults",
				"--datadir=" + data,
				"--socket=" + filepath.Join(dir, "mysqld.sock"),
				"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
				"--port=" + strconv.Itoa(port),
				"--bind-address=127.0.0.1",
				"--skip-name-resolve",
				"--log-error=" + logPath,
				"--max-connections=300",
				// This is a disposable test fixture, not the product:
				// durability is worthless here and costs commit time.
				"--innodb-flush-log-at-trx-commit=0",
				"--innodb-doublewrite=0",
				"--innodb-buffer-pool-size=64M",
				"--innodb-log-file-size=" + logFileSize,
				"--performance-schema=OFF",
			}
		},
		// SIGTERM is a normal shutdown; open sessions are ended.
		DeathSignal: syscall.SIGKILL, StopSignal: syscall.SIGTERM,
		Ready:       func(port int) error { return adminAt(rootAt(port).FormatDSN(), "SELECT 1") },
		ReadyWithin: 2 * time.Minute,
		PortTaken:   []string{"Address already in use", "Can't start server: Bind"},
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{base: rootAt(p.Port), proc: p}, nil
}
