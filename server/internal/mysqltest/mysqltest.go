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

	"github.com/go-sql-driver/mysql"
)

// EnvDSN names an existing server to use instead of starting one.
const EnvDSN = "TICKETING_TEST_MYSQL_DSN"

// Server is a running throwaway server, or the one EnvDSN names.
type Server struct {
	base *mysql.Config // root DSN, no database
	dir  string        // temporary directory; empty for an external server
	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has exited
	dbs  atomic.Int64  // names databases made by NewDatabase

	stopOnce sync.Once
	stopErr  error
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

func (s *Server) admin(stmt string) error {
	db, err := sql.Open("mysql", s.DSN())
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// Start starts a server for tb (or uses EnvDSN's) and stops it when tb
// ends. It fails tb if the server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("mysqltest: %v", err)
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
// Shared started, if any.
func Main(m *testing.M) int { return Run(m.Run) }

// Run is Main for a package whose TestMain also wraps m.Run in something
// else, such as pgtest.Main.
func Run(run func() int) int {
	shared.inMain.Store(true)
	code := run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "mysqltest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the package's shared server, starting it on the first call.
// The package's TestMain must run Main (or Run), which stops the server at
// the end. A server that failed to start fails every test that asks for it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if !shared.inMain.Load() {
		tb.Fatal("mysqltest: Shared needs TestMain to call mysqltest.Main: func TestMain(m *testing.M) { os.Exit(mysqltest.Main(m)) }")
	}
	shared.once.Do(func() { shared.srv, shared.err = start() })
	if shared.err != nil {
		tb.Fatalf("mysqltest: %v", shared.err)
	}
	return shared.srv
}

// binDirs are searched after PATH for the server binaries: Debian keeps
// mariadbd in /usr/sbin, which a non-root PATH may lack.
var binDirs = []string{"/usr/sbin", "/usr/bin", "/usr/local/mysql/bin"}

const installHint = "install the MariaDB server (Debian/Ubuntu: apt-get install mariadb-server; test.sh does it), " +
	"or set " + EnvDSN + " to the DSN of a server to use, such as root@tcp(127.0.0.1:3306)/test"

// findBinary returns the first of names found on PATH or in binDirs.
func findBinary(names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	for _, name := range names {
		for _, d := range binDirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("none of %s found on PATH or in %s: %s",
		strings.Join(names, ", "), strings.Join(binDirs, ", "), installHint)
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

// startLocal initialises a data directory in a new temporary directory and
// starts the server on it.
func startLocal() (*Server, error) {
	server, err := findBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	install, err := findBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mysqltest-")
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
	// "normal" root authentication: root logs in without a password, over
	// TCP as root@127.0.0.1 too (skip-name-resolve keeps the host an IP).
	cmd := command(dir, cred, install, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--innodb-log-file-size="+logFileSize) // passed on to the bootstrap server
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", filepath.Base(install), err, out)
	}
	// A free port can be taken by someone else before the server binds it;
	// try again with another.
	for try := 0; ; try++ {
		s, err := launch(dir, data, server, cred)
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

// logFileSize keeps the redo log small (the default is 96 MB): several
// packages' tests run a server each at the same time.
const logFileSize = "8M"

func launch(dir, data, server string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	if cred != nil {
		if err := logFile.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	cmd := command(dir, cred, server, "--no-defaults",
		"--datadir="+data,
		"--socket="+filepath.Join(dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(dir, "mysqld.pid"),
		"--port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--skip-name-resolve",
		"--log-error="+logPath,
		"--max-connections=300",
		// This is a disposable test fixture, not the product: durability is
		// worthless here and costs commit time.
		"--innodb-flush-log-at-trx-commit=0",
		"--innodb-doublewrite=0",
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size="+logFileSize,
		"--performance-schema=OFF",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If the test binary dies without cleaning up (a panic, a -timeout),
	// take the server down too. Best effort: the kernel sends it when the
	// forking OS thread exits, and the temporary directory is left behind.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(server), err)
	}
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{base: c, dir: dir, cmd: cmd, done: make(chan struct{})}
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
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.admin("SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			if strings.Contains(string(log), "Address already in use") || strings.Contains(string(log), "Can't start server: Bind") {
				return errPortTaken
			}
			return fmt.Errorf("server exited during startup: %v\n%s", s.cmd.ProcessState, log)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("server did not accept connections within two minutes: %v\n%s", err, log)
		}
	}
}

// Stop shuts a started server down and deletes its directory; for the
// server EnvDSN names it does nothing. Safe to call more than once.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		// SIGTERM is a normal shutdown; open sessions are ended.
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("stop server: %w", err)
		}
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("server did not shut down within a minute; killed")
		}
		if err := os.RemoveAll(s.dir); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// credential returns the identity to run the server as when the tests run
// as root: "mysql", or "nobody" where there is no mysql user. Nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"mysql", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("user %s has non-numeric uid %q or gid %q", name, u.Uid, u.Gid)
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, which the server refuses, and there is no unprivileged user to run it as (%v)", errors.Join(errs...))
}

func command(dir string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir // root's working directory may be closed to the server's user
	cmd.Env = []string{"PATH=" + os.Getenv("PATH") + ":/usr/sbin:/usr/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}
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
