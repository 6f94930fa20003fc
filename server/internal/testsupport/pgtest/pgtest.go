// Package pgtest starts a throwaway PostgreSQL server for tests.
//
// The server runs from a temporary directory, listens on a free loopback
// port and on a unix socket in that directory, and is stopped and deleted
// when the test (or the package's test run) ends. It needs the PostgreSQL
// server binaries initdb and postgres, version 15 by intention, on PATH or
// in /usr/lib/postgresql/15/bin (Debian: apt-get install postgresql-15).
// Missing binaries fail the test; they never skip it.
//
// PostgreSQL refuses to run as root. When the tests run as root, the server
// runs as the "postgres" user, which the Debian package creates.
//
// One server per test:
//
//	func TestX(t *testing.T) {
//		srv := pgtest.Start(t)
//		db, err := sql.Open("pgx", srv.NewDatabase(t))
//		...
//	}
//
// One server shared by all tests of a package, started on first use:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.Shared(t).NewDatabase(t) // a fresh database per test
//		...
//	}
package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/dbproc"
)

// Server is a running throwaway PostgreSQL server.
type Server struct {
	proc *dbproc.Proc
	dbs  atomic.Int64 // names databases made by NewDatabase
}

// DSN returns a connection URL for the superuser "postgres" (no password)
// and the database "postgres", over TCP to 127.0.0.1.
func (s *Server) DSN() string { return s.dsn("postgres") }

// Addr is the server's host:port on the loopback interface.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.proc.Port) }

func (s *Server) dsn(db string) string { return dsnAt(s.proc.Port, db) }

func dsnAt(port int, db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db)
}

// NewDatabase creates an empty database, drops it when tb ends, and returns
// its DSN. Tests sharing a server use it to stay out of each other's way.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test_%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.admin(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE ends connections the test left open.
		if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s.dsn(name)
}

func (s *Server) admin(ctx context.Context, stmt string) error {
	c, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx) }()
	if _, err := c.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// Proc is the server's process.
func (s *Server) Proc() *dbproc.Proc { return s.proc }

// Stop shuts the server down and deletes its directory. Start and Main call
// it; it is safe to call more than once.
func (s *Server) Stop() error { return s.proc.Stop() }

// Start starts a server for tb and stops it when tb ends. It fails tb if the
// server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return dbproc.StartFor(tb, "pgtest", start)
}

var shared = dbproc.NewShared("pgtest", start)

// Main runs the package's tests with m.Run and then stops the server that
// Shared started, if any. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int { return shared.Run(m.Run) }

// Shared returns the package's shared server, starting it on the first call.
// The package's TestMain must run Main, which stops the server at the end.
// A server that failed to start fails every test that asks for it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	return shared.Get(tb)
}

// binDirs are searched after PATH for the server binaries.
var binDirs = []string{"/usr/lib/postgresql/15/bin"}

const installHint = "install the PostgreSQL 15 server (Debian/Ubuntu: apt-get install postgresql-15) " +
	"and put /usr/lib/postgresql/15/bin on PATH"

// credential is who runs postgres when the tests run as root.
func credential() (*syscall.Credential, error) {
	return dbproc.Credential("PostgreSQL", installHint, "postgres")
}

// start runs initdb into a new temporary directory and starts postgres.
func start() (*Server, error) {
	initdb, err := dbproc.FindBinary(binDirs, installHint, "initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := dbproc.FindBinary(binDirs, installHint, "postgres")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := dbproc.TempDir("pgtest-", cred)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	cmd := dbproc.Command(dir, cred, "", initdb, "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	p, err := dbproc.Launch(dbproc.Spec{Name: "postgres", Dir: dir, Cred: cred, Binary: postgres, Log: "postgres.log",
		Args: func(port int, _ string) []string {
			return []string{"-D", data,
				"-p", strconv.Itoa(port),
				"-c", "listen_addresses=127.0.0.1",
				"-c", "unix_socket_directories=" + dir,
				// This is a disposable test fixture, not the product:
				// durability is worthless here and costs startup and
				// commit time.
				"-c", "fsync=off",
				"-c", "synchronous_commit=off",
				"-c", "full_page_writes=off",
				"-c", "max_connections=200",
			}
		},
		// SIGQUIT is postgres's immediate shutdown, SIGINT its fast one
		// (open sessions are ended).
		DeathSignal: syscall.SIGQUIT, StopSignal: syscall.SIGINT,
		Ready: func(port int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := pgx.Connect(ctx, dsnAt(port, "postgres"))
			if err != nil {
				return err
			}
			return c.Close(context.Background())
		},
		ReadyWithin: time.Minute,
		PortTaken:   []string{"could not bind", "already in use"},
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{proc: p}, nil
}
