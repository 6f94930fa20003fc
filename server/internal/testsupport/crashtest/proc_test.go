package crashtest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// startTimeout bounds how long a (re)started server may take to serve.
const startTimeout = 30 * time.Second

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	return testcluster.FreePort(t)
}

// proc is one ticketd server process, restartable on the same data
// directory and addresses.
type proc struct {
	t        testing.TB
	id       string
	dataDir  string
	logDir   string
	client   string
	raftAddr string
	httpAddr string
	extra    []string            // more flags (config file, bootstrap)
	asUser   *syscall.Credential // run as this user (tests of file permissions)
	asIs     bool                // no --initial-cluster-state: ticketd's default applies
	bin      string              // the ticketd binary; empty: the one TestMain built
	// secret is the raft_secret_file; empty: the test's shared one
	// (testcluster.RaftSecretFile), given to this ticketd unless noSecret
	// (or an older ticketd, or another user, runs).
	secret   string
	noSecret bool

	starts  int
	logFile string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid once done is closed
}

func newProc(t testing.TB, id, base string, extra ...string) *proc {
	p := &proc{t: t, id: id, dataDir: filepath.Join(base, id, "data"), logDir: filepath.Join(base, id),
		client: freePort(t), raftAddr: freePort(t), httpAddr: freePort(t), extra: extra}
	if err := os.MkdirAll(p.logDir, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.running() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) args() []string {
	a := []string{"--listen", p.client, "--raft-listen", p.raftAddr, "--http-listen", p.httpAddr,
		"--data-dir", p.dataDir, "--node-id", p.id, "--log-level", "info"}
	// Servers of these tests bootstrap on their first start unless the test
	// says otherwise (a server with cluster flags waits to be added by default).
	decided := p.asIs
	for _, e := range p.extra {
		if e == "--join" || e == "--initial-cluster-state" || strings.HasPrefix(e, "--initial-cluster-state=") || e == "--restore" {
			decided = true
		}
	}
	if !decided {
		a = append(a, "--initial-cluster-state", "new")
	}
	if p.secret != "" {
		a = append(a, "--raft-secret-file", p.secret)
	} else if !p.noSecret && p.bin == "" && p.asUser == nil {
		a = append(a, "--raft-secret-file", testcluster.RaftSecretFile(p.t))
	}
	return append(a, p.extra...)
}

// start starts the process; it does not wait for it to serve.
func (p *proc) start() {
	p.t.Helper()
	if p.running() {
		p.t.Fatalf("start %s: it is running", p.id)
	}
	p.starts++
	p.logFile = filepath.Join(p.logDir, fmt.Sprintf("ticketd.%d.log", p.starts))
	f, err := os.Create(p.logFile)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	bin := p.bin
	if bin == "" {
		bin = ticketdBin
	}
	cmd := exec.Command(bin, p.args()...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if p.asUser != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = p.asUser
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.id, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() { p.waitErr = cmd.Wait(); close(done) }()
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.t.Helper()
	if !p.running() {
		p.t.Fatalf("kill %s: not running (%v)\n%s", p.id, p.waitErr, p.logTail(30))
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill %s: %v", p.id, err)
	}
	<-p.done
}

// stop asks the process to shut down (SIGTERM) and waits for it.
func (p *proc) stop() {
	p.t.Helper()
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("%s did not stop within 40 s of SIGTERM\n%s", p.id, p.logTail(30))
	}
}

// exitCode is the exit status once the process has ended (-1 for a signal).
func (p *proc) exitCode() int {
	if p.cmd == nil || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logFile)
	return string(b)
}

func (p *proc) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s\n---", p.logFile, strings.Join(lines, "\n"))
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// readyz reports whether GET /readyz answers 200.
func (p *proc) readyz() bool {
	resp, err := httpClient.Get("http://" + p.httpAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

var errExited = errors.New("the process exited")

// waitReady polls /readyz until it answers 200, the process exits, or d passes.
func (p *proc) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if !p.running() {
			return fmt.Errorf("%w (%v, exit code %d)", errExited, p.waitErr, p.exitCode())
		}
		if p.readyz() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v", p.id, d)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

// mustReady is waitReady that fails the test with the server's log.
func (p *proc) mustReady() {
	p.t.Helper()
	if err := p.waitReady(startTimeout); err != nil {
		p.t.Fatalf("%s (start %d) did not come up without manual repair: %v\n%s", p.id, p.starts, err, p.logTail(40))
	}
}

// cluster is a set of ticketd processes bootstrapped together.
type cluster struct {
	t     testing.TB
	procs []*proc
}

// clusterConfig is the TOML file every server of a test cluster reads: fast
// failure detection, and snapshots often enough that kills land during them.
// The clients answer pings only while they wait for an answer, so the ping
// interval is long enough for a paused client to keep its connection.
const clusterConfig = `heartbeat_timeout = "400ms"
ping_interval = "30s"
election_timeout = "400ms"
snapshot_threshold = 64
snapshot_interval = "200ms"
snapshot_retain = 2
`

func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	return startClusterConfig(t, n, clusterConfig)
}

// plannedConfig is clusterConfig for tests of planned operations (rolling
// restarts): failure detection slow enough that a loaded machine causes no
// election of its own, since such an election is not planned and may leave
// an acquire indeterminate. A planned leadership transfer does not wait for
// these timeouts.
const plannedConfig = `heartbeat_timeout = "3s"
ping_interval = "30s"
election_timeout = "3s"
snapshot_threshold = 64
snapshot_interval = "200ms"
snapshot_retain = 2
`

// startClusterConfig is startCluster with the given configuration file.
func startClusterConfig(t testing.TB, n int, config string) *cluster {
	t.Helper()
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t}
	for i := 0; i < n; i++ {
		c.procs = append(c.procs, newProc(t, fmt.Sprintf("n%d", i+1), base, "--config", cfgFile))
	}
	if n > 1 {
		var peers []string
		for _, p := range c.procs {
			peers = append(peers, p.id+"="+p.raftAddr)
		}
		for _, p := range c.procs {
			p.extra = append(p.extra, "--bootstrap", strings.Join(peers, ","))
		}
	}
	for _, p := range c.procs {
		p.start()
	}
	for _, p := range c.procs {
		p.mustReady()
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("%s", p.logTail(25))
			}
		}
	})
	return c
}

func (c *cluster) addrs() []string {
	var out []string
	for _, p := range c.procs {
		out = append(out, p.client)
	}
	return out
}

// leader waits until a running server serves clients as leader and returns its index.
func (c *cluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		for i, p := range c.procs {
			if !p.running() {
				continue
			}
			if st, err := adminStatus(p.client); err == nil && st.Role == "leader" && serves(p.client) {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
	var b bytes.Buffer
	for _, p := range c.procs {
		fmt.Fprintf(&b, "%s running=%v\n%s\n", p.id, p.running(), p.logTail(15))
	}
	c.t.Fatalf("no serving leader within %v\n%s", startTimeout, b.String())
	return -1
}
