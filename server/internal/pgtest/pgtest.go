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
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway PostgreSQL server.
type Server struct {
	dir  string // temporary directory holding data, socket and log
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the postgres process has exited
	dbs  atomic.Int64  // names databases made by NewDatabase

	stopOnce sync.Once
	stopErr  error
}

// DSN returns a connection URL for the superuser "postgres" (no password)
// and the database "postgres", over TCP to 127.0.0.1.
func (s *Server) DSN() string { return s.dsn("postgres") }

// Addr is the server's host:port on the loopback interface.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (s *Server) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
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

// Start starts a server for tb and stops it when tb ends. It fails tb if the
// server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}

var shared struct {
	inMain atomic.Bool
	once   sync.Once
	srv    *Server
	err    error
}

// Main runs the package's tests with m.Run and then stops the server that
// Shared started, if any. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	shared.inMain.Store(true)
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the package's shared server, starting it on the first call.
// The package's TestMain must run Main, which stops the server at the end.
// A server that failed to start fails every test that asks for it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if !shared.inMain.Load() {
		tb.Fatal("pgtest: Shared needs TestMain to call pgtest.Main: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	shared.once.Do(func() { shared.srv, shared.err = start() })
	if shared.err != nil {
		tb.Fatalf("pgtest: %v", shared.err)
	}
	return shared.srv
}

// binDirs are searched after PATH for the server binaries.
var binDirs = []string{"/usr/lib/postgresql/15/bin"}

const installHint = "install the PostgreSQL 15 server (Debian/Ubuntu: apt-get install postgresql-15) " +
	"and put /usr/lib/postgresql/15/bin on PATH"

// findBinary looks for a server binary on PATH, then in binDirs.
func findBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range binDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in %s: %s", name, strings.Join(binDirs, ", "), installHint)
}

// start runs initdb into a new temporary directory and starts postgres.
func start() (*Server, error) {
	initdb, err := findBinary("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := findBinary("postgres")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := command(dir, cred, initdb, "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// A free port can be taken by someone else before postgres binds it;
	// try again with another.
	for try := 0; ; try++ {
		s, err := launch(dir, data, postgres, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		if !errors.Is(err, errPortTaken) || try == 4 {
			return nil, err
		}
	}
}

var errPortTaken = errors.New("port taken")

func launch(dir, data, postgres string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	cmd := command(dir, cred, postgres, "-D", data,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir,
		// This is a disposable test fixture, not the product: durability is
		// worthless here and costs startup and commit time.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If the test binary dies without cleaning up (a panic, a -timeout),
	// take the server down too; SIGQUIT is postgres's immediate shutdown.
	// Best effort: the kernel sends it when the forking OS thread exits, and
	// the temporary directory is left behind.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Server{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(logPath); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls until the server accepts a connection or exits.
func (s *Server) waitReady(logPath string) error {
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := pgx.Connect(ctx, s.DSN())
		cancel()
		if err == nil {
			_ = c.Close(context.Background())
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			if strings.Contains(string(log), "could not bind") || strings.Contains(string(log), "already in use") {
				return errPortTaken
			}
			return fmt.Errorf("postgres exited during startup: %v\n%s", s.cmd.ProcessState, log)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections within a minute: %v\n%s", err, log)
		}
	}
}

// Stop shuts the server down and deletes its directory. Start and Main call
// it; it is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		// SIGINT is a fast shutdown: open sessions are ended.
		if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("stop postgres: %w", err)
		}
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("postgres did not shut down within a minute; killed")
		}
		if err := os.RemoveAll(s.dir); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// credential returns the identity to run the server as: the "postgres"
// user when running as root, since postgres refuses root; nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root, but there is no postgres user to run it as (%v): %s", err, installHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func command(dir string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir // root's working directory may be closed to the postgres user
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "LANG=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
