package consoletest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Tokens of the principals of the test clusters; the configuration holds
// only their hashes.
const (
	monitorToken = "console-test-monitor-token-0123456789"
	appToken     = "console-test-app-token-0123456789"
)

func freePort(t testing.TB) string {
	t.Helper()
	return testcluster.FreePort(t)
}

// proc is one ticketd process.
type proc struct {
	id, client, raft, http string
	args                   []string // ticketd's command line
	logPath                string   // its stdout and stderr, appended at each start
	cmd                    *exec.Cmd
	done                   chan struct{}
}

// start runs ticketd with p's command line (again, after kill: same
// addresses and data directory).
func (p *proc) start(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(ticketdBin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); log.Close(); close(done) }(p.cmd)
}

// kill ends the process at once (SIGKILL) and waits until it has.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// cluster is n ticketd processes bootstrapped as one cluster, with the
// console on and two principals: "ops" (monitor) and "app" (client on
// every key).
type cluster struct {
	t     testing.TB
	procs []*proc
}

func (c *cluster) addrs() string {
	var a []string
	for _, p := range c.procs {
		a = append(a, p.client)
	}
	return strings.Join(a, ",")
}

func startCluster(t testing.TB, n int, extraTOML ...string) *cluster {
	t.Helper()
	return startClusterWith(t, n, nil, extraTOML...)
}

// startClusterWith is startCluster with more flags for each server
// (perProc may be nil).
func startClusterWith(t testing.TB, n int, perProc func(p *proc) []string, extraTOML ...string) *cluster {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "ticketd.toml")
	toml := fmt.Sprintf(`[http]
console = true

[[auth.principals]]
name = "ops"
role = "monitor"
token_sha256 = [%q]

[[auth.principals]]
name = "app"
role = "client"
key_prefixes = [""]
token_sha256 = [%q]
`, server.HashToken(monitorToken), server.HashToken(appToken)) + strings.Join(extraTOML, "\n")
	if err := os.WriteFile(conf, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t}
	var boot []string
	for i := 0; i < n; i++ {
		p := &proc{id: fmt.Sprintf("n%d", i+1), client: freePort(t), raft: freePort(t), http: freePort(t)}
		c.procs = append(c.procs, p)
		boot = append(boot, p.id+"="+p.raft)
	}
	for _, p := range c.procs {
		p.logPath = filepath.Join(dir, p.id+".log")
		p.args = []string{"--config", conf, "--node-id", p.id, "--listen", p.client, "--raft-listen", p.raft,
			"--http-listen", p.http, "--data-dir", filepath.Join(dir, p.id), "--bootstrap", strings.Join(boot, ","),
			"--raft-secret-file", testcluster.RaftSecretFile(t), "--initial-cluster-state", "new", "--log-level", "info"}
		if perProc != nil {
			p.args = append(p.args, perProc(p)...)
		}
		p.start(t)
		t.Cleanup(func() {
			p.kill()
			if t.Failed() {
				b, _ := os.ReadFile(p.logPath)
				t.Logf("%s log:\n%s", p.id, b)
			}
		})
	}
	c.waitReady()
	return c
}

// waitReady waits until every server answers /readyz with 200 (a leader is
// known and serving).
func (c *cluster) waitReady() {
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range c.procs {
		for {
			resp, err := http.Get("http://" + p.http + "/readyz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("server %s not ready within 60 s (last error %v)", p.id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// leader returns the leading server, asking each for its status.
func (c *cluster) leader() (leader *proc, followers []*proc) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		leader, followers = nil, nil
		for _, p := range c.procs {
			a, err := ticketing.DialAdmin(ctx, p.client, ticketing.WithToken(monitorToken))
			if err != nil {
				continue
			}
			st, err := a.Status(ctx)
			_ = a.Close()
			if err == nil && st.Role == "leader" {
				leader = p
			} else {
				followers = append(followers, p)
			}
		}
		if leader != nil {
			return leader, followers
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no leader within 30 s")
	return nil, nil
}

// broker is a client of the "app" principal.
func (c *cluster) broker(ctx context.Context) *ticketing.Broker {
	c.t.Helper()
	b, err := ticketing.Connect(c.addrs(), ticketing.WithToken(appToken))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { b.Close() })
	if err := b.WaitReady(ctx); err != nil {
		c.t.Fatal(err)
	}
	return b
}
