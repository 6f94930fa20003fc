package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ticketing-io/ticketing"
)

// Ports inside every node's namespace. ticketd listens on loopback only;
// the proxies listen on the node's bridge address and forward to it.
const (
	clientPort = 5225
	raftPort   = 5226
	httpPort   = 5227
)

// BuildTicketd builds cmd/ticketd of this module into dir and returns the
// binary's path.
func BuildTicketd(dir string, race bool) (string, error) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			gotool = filepath.Join(root, "bin", "go")
		} else {
			return "", fmt.Errorf("the go command is not on PATH: %w", err)
		}
	}
	out := filepath.Join(dir, "ticketd")
	// The stall hook (package stallhook) is built in for the
	// stall-after-commit fault; ticketd for production never has it.
	args := []string{"build", "-tags", "stallhook", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/ticketing-io/ticketing/server/cmd/ticketd")
	b, err := exec.Command(gotool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", gotool, strings.Join(args, " "), err, b)
	}
	return out, nil
}

// ClusterConfig is the TOML every server reads besides its own addresses.
// Raft timeouts and the ping interval are left at ticketd's defaults (what
// the failover figures are measured with); snapshots are frequent so that
// kills land during them.
const ClusterConfig = `snapshot_threshold = 200
snapshot_interval = "1s"
snapshot_retain = 2
log_level = "info"
`

// Node is one ticketd process in its namespace, restartable on the same data
// directory.
type Node struct {
	Index int
	ID    string
	ns    string
	bin   string
	dir   string
	cfg   string

	Client *Proxy // clients reach the server through it (advertised address)
	Raft   *Proxy // peers reach the server's Raft through it (advertised address)
	ctl    *Proxy // root-namespace loopback -> the server, never faulted: status
	http   *http.Client

	mu      sync.Mutex
	starts  int
	logFile string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	paused  bool
	mounted bool // dataDir is a tmpfs mount of its own
	killed  bool // the harness ended the current process (not a crash)
	stall   bool // the stall hook is armed or holds the core (stall_linux.go)
	up      int  // proxies of the current start whose server port listens
}

// Cluster is n ticketd servers bootstrapped together, each in its namespace.
type Cluster struct {
	Net   *Net
	Nodes []*Node
}

// StartCluster creates the network, writes each server's configuration,
// starts the proxies and the servers, and waits until every server is ready.
func StartCluster(ctx context.Context, bin, dir string, n int) (*Cluster, error) {
	return startCluster(ctx, bin, dir, n, nil)
}

// startCluster is StartCluster that calls started (when not nil) once
// every server process has been started, before waiting for them.
func startCluster(ctx context.Context, bin, dir string, n int, started func(*Cluster)) (*Cluster, error) {
	nt, err := NewNet(n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Net: nt}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close() // the start's error is the one to report
		}
	}()
	// Every server proves the cluster secret, made by ticketd's own
	// generator, to its peers, as a deployment's servers do.
	secretFile := filepath.Join(dir, "raft-secret")
	if out, err := exec.Command(bin, "new-raft-secret", secretFile).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ticketd new-raft-secret: %v: %s", err, out)
	}
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, fmt.Sprintf("{ id = %q, raft_addr = %q }", fmt.Sprintf("n%d", i+1), fmt.Sprintf("%s:%d", nt.Addr(i), raftPort)))
	}
	for i := 0; i < n; i++ {
		nd := &Node{Index: i, ID: fmt.Sprintf("n%d", i+1), ns: nt.NS(i), bin: bin, dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))}
		if err := os.MkdirAll(nd.dir, 0o750); err != nil {
			return nil, err
		}
		// The data directory is a small tmpfs of its own, so that the
		// disk-full fault can fill it without touching anything else.
		if err := os.MkdirAll(nd.dataDir(), 0o750); err != nil {
			return nil, err
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+dataDirSize, "tmpfs", nd.dataDir()).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mount a tmpfs on %s: %v: %s", nd.dataDir(), err, out)
		}
		nd.mounted = true
		nd.cfg = filepath.Join(nd.dir, "ticketd.toml")
		conf := ClusterConfig + fmt.Sprintf(`node_id = %q
listen = "127.0.0.1:%d"
advertise = "%s:%d"
raft_listen = "127.0.0.1:%d"
raft_advertise = "%s:%d"
raft_secret_file = %q
http_listen = "127.0.0.1:%d"
data_dir = %q
bootstrap = [%s]
`, nd.ID, clientPort, nt.Addr(i), clientPort, raftPort, nt.Addr(i), raftPort, secretFile, httpPort, nd.dataDir(), strings.Join(peers, ", "))
		if err := os.WriteFile(nd.cfg, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		dial := DialerIn(nd.ns)
		listenIn := func(addr string) func() (net.Listener, error) {
			return func() (net.Listener, error) { return ListenIn(nd.ns, addr) }
		}
		var err error
		if nd.Client, err = NewProxy(nd.ID+"/client", listenIn(fmt.Sprintf("%s:%d", nt.Addr(i), clientPort)), fmt.Sprintf("127.0.0.1:%d", clientPort), dial); err != nil {
			return nil, err
		}
		if nd.Raft, err = NewProxy(nd.ID+"/raft", listenIn(fmt.Sprintf("%s:%d", nt.Addr(i), raftPort)), fmt.Sprintf("127.0.0.1:%d", raftPort), dial); err != nil {
			return nil, err
		}
		// The control path listens on the root namespace's loopback: only
		// the harness uses it, and no fault touches it.
		ctlAddr := ""
		listenCtl := func() (net.Listener, error) {
			if ctlAddr == "" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err == nil {
					ctlAddr = ln.Addr().String()
				}
				return ln, err
			}
			return net.Listen("tcp", ctlAddr)
		}
		if nd.ctl, err = NewProxy(nd.ID+"/ctl", listenCtl, fmt.Sprintf("127.0.0.1:%d", clientPort), dial); err != nil {
			return nil, err
		}
		nd.http = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		if err := nd.Start(); err != nil {
			return nil, err
		}
	}
	if started != nil {
		started(c)
	}
	for _, nd := range c.Nodes {
		if err := nd.WaitReady(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// dataDirSize is the size of each server's data directory (a tmpfs): far
// more than a run writes, small enough to fill at once.
const dataDirSize = "64m"

func (nd *Node) dataDir() string { return filepath.Join(nd.dir, "data") }

// Close kills every server, stops the proxies, unmounts the data
// directories (after copying them next to the logs, for a failed run's
// post-mortem) and removes the network.
func (c *Cluster) Close() error {
	var errs []error
	for _, nd := range c.Nodes {
		nd.kill()
		for _, p := range []*Proxy{nd.Client, nd.Raft, nd.ctl} {
			if p != nil {
				p.Close()
			}
		}
		if nd.mounted {
			os.Remove(filepath.Join(nd.dataDir(), fillerName))
			if out, err := exec.Command("cp", "-a", nd.dataDir(), nd.dataDir()+".copy").CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("copy %s out of its filesystem: %v: %s", nd.dataDir(), err, out))
			}
			if out, err := exec.Command("umount", nd.dataDir()).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("umount %s: %v: %s", nd.dataDir(), err, out))
			}
		}
	}
	return errors.Join(append(errs, c.Net.Close())...)
}

// fillerName is the file the disk-full fault fills the data directory with.
const fillerName = "nemesis-filler"

// FillDisk fills the server's data directory until no byte is left.
func (nd *Node) FillDisk() error {
	f, err := os.OpenFile(filepath.Join(nd.dataDir(), fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // filling the disk is the point: a failed close changes nothing
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// FreeDisk removes what FillDisk wrote.
func (nd *Node) FreeDisk() error {
	err := os.Remove(filepath.Join(nd.dataDir(), fillerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Crashed reports whether the process ended without the harness ending it.
func (nd *Node) Crashed() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.done != nil && !nd.runningLocked() && !nd.killed
}

// ClientAddrs are the servers' advertised client addresses (their client
// proxies), as a client's address list.
func (c *Cluster) ClientAddrs() string {
	var a []string
	for _, nd := range c.Nodes {
		a = append(a, nd.Client.Addr())
	}
	return strings.Join(a, ",")
}

// Start starts the server process; it does not wait for it to serve. Its
// proxies refuse connections until the server listens on the port behind
// each, as the server's own port would, then forward normally.
func (nd *Node) Start() error {
	if err := nd.down(); err != nil {
		return err
	}
	if err := nd.start(); err != nil {
		return err
	}
	nd.mu.Lock()
	gen, done := nd.starts, nd.done
	nd.mu.Unlock()
	for _, p := range []struct {
		proxy *Proxy
		port  int
	}{{nd.Client, clientPort}, {nd.Raft, raftPort}} {
		go nd.upWhenListening(gen, done, p.proxy, p.port)
	}
	return nil
}

// upWhenListening opens proxy once the server of start gen listens on port.
func (nd *Node) upWhenListening(gen int, done chan struct{}, proxy *Proxy, port int) {
	dial := DialerIn(nd.ns)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := dial(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		cancel()
		if err == nil {
			c.Close()
			nd.mu.Lock()
			if nd.starts == gen && nd.runningLocked() {
				_ = proxy.Set(LinkMode{}) // a proxy that cannot listen shows as an unreachable node
				nd.up++
			}
			nd.mu.Unlock()
			return
		}
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond): // polling the port until the process ends
		}
	}
}

func (nd *Node) start() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.runningLocked() {
		return fmt.Errorf("start %s: it is running", nd.ID)
	}
	nd.starts++
	nd.logFile = filepath.Join(nd.dir, fmt.Sprintf("ticketd.%d.log", nd.starts))
	f, err := os.Create(nd.logFile)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	// ip netns exec execs ticketd in the namespace: the pid is ticketd's.
	cmd := exec.Command("ip", "netns", "exec", nd.ns, nd.bin, "--config", nd.cfg)
	cmd.Stdout, cmd.Stderr = f, f
	// Die with the harness, so that a killed test leaves no ticketd behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", nd.ID, err)
	}
	done := make(chan struct{})
	nd.cmd, nd.done, nd.paused, nd.up, nd.killed = cmd, done, false, 0, false
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		nd.waitErr = err
		nd.mu.Unlock()
		close(done)
	}()
	return nil
}

func (nd *Node) runningLocked() bool {
	if nd.done == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive (paused counts as alive).
func (nd *Node) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.runningLocked()
}

// Listening reports whether the running server listens on both proxied
// ports (its proxies forward).
func (nd *Node) Listening() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.runningLocked() && nd.up == 2
}

// Paused reports whether the process is stopped with SIGSTOP.
func (nd *Node) Paused() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.paused && nd.runningLocked()
}

func (nd *Node) signal(sig syscall.Signal) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.runningLocked() {
		return fmt.Errorf("signal %v to %s: not running", sig, nd.ID)
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, nd.ID, err)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGQUIT:
		nd.killed = true
	case syscall.SIGSTOP:
		nd.paused = true
	case syscall.SIGCONT:
		nd.paused = false
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (nd *Node) Kill() error {
	if err := nd.signal(syscall.SIGKILL); err != nil {
		return err
	}
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	<-done
	return nd.down()
}

// down makes the proxies refuse connections, as the dead server's own ports
// would (connection refused rather than accepted and then closed).
func (nd *Node) down() error {
	return errors.Join(nd.Client.Set(LinkMode{Refuse: true}), nd.Raft.Set(LinkMode{Refuse: true}))
}

func (nd *Node) kill() {
	if nd.Running() {
		_ = nd.signal(syscall.SIGKILL) // it may have exited meanwhile; done is awaited below
		nd.mu.Lock()
		done := nd.done
		nd.mu.Unlock()
		<-done
	}
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (nd *Node) Pause() error  { return nd.signal(syscall.SIGSTOP) }
func (nd *Node) Resume() error { return nd.signal(syscall.SIGCONT) }

// Terminate sends SIGTERM (a graceful shutdown) and waits up to d for the
// process to end, then kills it.
func (nd *Node) Terminate(d time.Duration) error {
	if err := nd.signal(syscall.SIGTERM); err != nil {
		return err
	}
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	select {
	case <-done:
		return nd.down()
	case <-time.After(d):
	}
	// Hung: SIGQUIT makes the Go runtime write every goroutine's stack to
	// the log before it exits, for the report.
	_ = nd.signal(syscall.SIGQUIT) // it may have exited meanwhile
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		nd.kill()
	}
	nd.mu.Lock()
	file := nd.logFile
	nd.mu.Unlock()
	return errors.Join(fmt.Errorf("%s did not stop within %v of SIGTERM; its goroutines (SIGQUIT) are in %s", nd.ID, d, file), nd.down())
}

// WaitReady polls the server's /readyz (inside its namespace, not through
// any faulted path) until it answers 200, the process exits, or ctx ends.
func (nd *Node) WaitReady(ctx context.Context) error {
	for {
		nd.mu.Lock()
		running, done, werr := nd.runningLocked(), nd.done, nd.waitErr
		nd.mu.Unlock()
		if !running && done != nil {
			return fmt.Errorf("%s exited (%v)\n%s", nd.ID, werr, nd.LogTail(20))
		}
		if resp, err := nd.http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort)); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w\n%s", nd.ID, ctx.Err(), nd.LogTail(20))
		case <-time.After(50 * time.Millisecond): // polling a condition, bounded by ctx
		}
	}
}

// Status asks the server for its view of the cluster over the control path.
func (nd *Node) Status(ctx context.Context) (ticketing.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	a, err := ticketing.DialAdmin(ctx, nd.ctl.Addr(), ticketing.WithDialTimeout(2*time.Second))
	if err != nil {
		return ticketing.Status{}, err
	}
	defer a.Close()
	return a.Status(ctx)
}

// LogTail is the last n lines of the current log file.
func (nd *Node) LogTail(n int) string {
	nd.mu.Lock()
	file := nd.logFile
	nd.mu.Unlock()
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s\n---", file, strings.Join(lines, "\n"))
}

// ErrNoLeader: no running server reported itself leader in time.
var ErrNoLeader = errors.New("nemesis: no leader")

// Leader returns the index of a running, unpaused server that says it is the
// leader, polling until ctx ends. When several say so (an old leader that
// has not stepped down yet), the one with the highest term wins.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		best, term := -1, uint64(0)
		for i, nd := range c.Nodes {
			if !nd.Running() || nd.Paused() {
				continue
			}
			st, err := nd.Status(ctx)
			if err == nil && st.Role == "leader" && st.Term >= term {
				best, term = i, st.Term
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling a condition, bounded by ctx
		}
	}
}

// ControlDialer dials, for a server's advertised client address, that
// server's control path instead (root namespace loopback, never faulted):
// an observer's client follows the leader as any client does, but no fault
// reaches it.
func (c *Cluster) ControlDialer() DialFunc {
	m := map[string]string{}
	for _, nd := range c.Nodes {
		m[nd.Client.Addr()] = nd.ctl.Addr()
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := m[addr]; ok {
			addr = a
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
