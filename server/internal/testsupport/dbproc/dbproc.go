// Package dbproc runs throwaway database servers for tests: what pgtest
// (PostgreSQL) and mysqltest (MariaDB) share. A server runs from its own
// temporary directory on a free loopback port, as an unprivileged user when
// the tests run as root (database servers refuse root), and is stopped and
// its directory deleted at the end; a package may share one server among
// its tests (Shared).
package dbproc

import (
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
)

// FindBinary returns the first of names found on PATH, else in dirs; the
// error says what is missing and hint, how to install it.
func FindBinary(dirs []string, hint string, names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	for _, name := range names {
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in %s: %s", strings.Join(names, " or "), strings.Join(dirs, ", "), hint)
}

// Credential is who runs the server when the tests run as root: the first
// of users that exists (nil when not root). server names the server for
// the error, hint says how to get such a user.
func Credential(server, hint string, users ...string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range users {
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
	return nil, fmt.Errorf("running as root, which %s refuses, and there is no user %s to run it as (%v): %s",
		server, strings.Join(users, " or "), errors.Join(errs...), hint)
}

// TempDir makes a new temporary directory for a server, owned by cred.
func TempDir(prefix string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// Command is name with args, run in dir (root's working directory may be
// closed to the server's user) as cred, with a fixed environment whose
// PATH is the tests' with extraPath after it.
func Command(dir string, cred *syscall.Credential, extraPath, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH") + extraPath, "LC_ALL=C", "LANG=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

// Spec says how to run one server.
type Spec struct {
	Name      string // what messages call it
	Dir       string // its temporary directory, deleted by Stop
	Cred      *syscall.Credential
	ExtraPath string // appended to the PATH the server sees
	Binary    string
	// Args are the server's arguments for port, logging to logPath.
	Args func(port int, logPath string) []string
	Log  string // the log file's name in Dir
	// DeathSignal is sent to the server when the test binary dies without
	// cleaning up (a panic, a -timeout); StopSignal is its fast shutdown.
	DeathSignal, StopSignal syscall.Signal
	// Ready is one attempt to reach the server on port.
	Ready       func(port int) error
	ReadyWithin time.Duration
	// PortTaken are the log's words for a port someone else took.
	PortTaken []string
}

// Proc is a running server.
type Proc struct {
	spec Spec
	Port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	stopOnce sync.Once
	stopErr  error
}

var errPortTaken = errors.New("port taken")

// Launch starts the server on a free port and waits until it answers. A
// free port can be taken by someone else before the server binds it: it
// tries again with another, five times at most.
func Launch(spec Spec) (*Proc, error) {
	for try := 0; ; try++ {
		p, err := launch(spec)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errPortTaken) || try == 4 {
			return nil, err
		}
	}
}

func launch(spec Spec) (*Proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(spec.Dir, spec.Log)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	if spec.Cred != nil {
		if err := logFile.Chown(int(spec.Cred.Uid), int(spec.Cred.Gid)); err != nil {
			return nil, err
		}
	}
	cmd := Command(spec.Dir, spec.Cred, spec.ExtraPath, spec.Binary, spec.Args(port, logPath)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Best effort: the kernel sends it when the forking OS thread exits,
	// and the temporary directory is left behind.
	cmd.SysProcAttr.Pdeathsig = spec.DeathSignal
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	p := &Proc{spec: spec, Port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(logPath); err != nil {
		_ = p.stop(false)
		return nil, err
	}
	return p, nil
}

// waitReady polls until the server accepts a connection or exits.
func (p *Proc) waitReady(logPath string) error {
	deadline := time.Now().Add(p.spec.ReadyWithin)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := p.spec.Ready(p.Port)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(logPath)
			for _, words := range p.spec.PortTaken {
				if strings.Contains(string(log), words) {
					return errPortTaken
				}
			}
			return fmt.Errorf("%s exited during startup: %v\n%s", p.spec.Name, p.cmd.ProcessState, log)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s did not accept connections within %v: %v\n%s", p.spec.Name, p.spec.ReadyWithin, err, log)
		}
	}
}

// Pid is the server process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Dir is the server's temporary directory.
func (p *Proc) Dir() string { return p.spec.Dir }

// Stop shuts the server down and deletes its directory. Safe to call more
// than once.
func (p *Proc) Stop() error { return p.stop(true) }

// stop shuts the server down, and deletes its directory when removeDir (a
// failed launch leaves it to the caller, which tries again in it).
func (p *Proc) stop(removeDir bool) error {
	p.stopOnce.Do(func() {
		if err := p.cmd.Process.Signal(p.spec.StopSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.stopErr = fmt.Errorf("stop %s: %w", p.spec.Name, err)
		}
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("%s did not shut down within a minute; killed", p.spec.Name)
		}
		if !removeDir {
			return
		}
		if err := os.RemoveAll(p.spec.Dir); err != nil && p.stopErr == nil {
			p.stopErr = err
		}
	})
	return p.stopErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stopper is a server a test run stops at its end.
type Stopper interface{ Stop() error }

// StartFor starts a server with start for tb and stops it when tb ends;
// pkg names the harness in messages.
func StartFor[S Stopper](tb testing.TB, pkg string, start func() (S, error)) S {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("%s: %v", pkg, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("%s: %v", pkg, err)
		}
	})
	return s
}

// Shared is a package's one server for all its tests, started on first use
// and stopped by Run at the end of the package's tests.
type Shared[S Stopper] struct {
	pkg    string
	start  func() (S, error)
	inMain atomic.Bool
	once   sync.Once
	srv    S
	err    error
	used   bool
}

// NewShared is the shared server of harness pkg, started by start.
func NewShared[S Stopper](pkg string, start func() (S, error)) *Shared[S] {
	return &Shared[S]{pkg: pkg, start: start}
}

// Run runs the package's tests (run, m.Run or something wrapping it) and
// then stops the server Get started, if any, failing the run if that
// fails.
func (sh *Shared[S]) Run(run func() int) int {
	sh.inMain.Store(true)
	code := run()
	if sh.used && sh.err == nil {
		if err := sh.srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", sh.pkg, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Get returns the shared server, starting it on the first call. The
// package's TestMain must call Run (through the harness's Main). A server
// that failed to start fails every test that asks for it.
func (sh *Shared[S]) Get(tb testing.TB) S {
	tb.Helper()
	if !sh.inMain.Load() {
		tb.Fatalf("%[1]s: Shared needs TestMain to call %[1]s.Main: func TestMain(m *testing.M) { os.Exit(%[1]s.Main(m)) }", sh.pkg)
	}
	sh.once.Do(func() { sh.used = true; sh.srv, sh.err = sh.start() })
	if sh.err != nil {
		tb.Fatalf("%s: %v", sh.pkg, sh.err)
	}
	return sh.srv
}
