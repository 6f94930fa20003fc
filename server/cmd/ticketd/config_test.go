package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// writeFile writes a config file into a test temp dir and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ticketd.toml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// validated returns DefaultConfig changed by edit, after Validate, so that
// expectations compare against the same derived defaults loadConfig fills.
func validated(t *testing.T, edit func(*server.Config)) server.Config {
	t.Helper()
	c := server.DefaultConfig()
	if edit != nil {
		edit(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("expected config does not validate: %v", err)
	}
	return c
}

const clusterFile = `
node_id = "n2"
listen = "0.0.0.0:6225"
advertise = "10.0.0.2:6225"
raft_listen = "0.0.0.0:6226"
raft_advertise = "10.0.0.2:6226"
raft_insecure = true
http_listen = ""
data_dir = "/var/lib/ticketd"
client_tokens = ["file-a", "file-b"]
hello_timeout = "2s"
election_timeout = "1500ms"
log_level = "debug"
bootstrap = [
  { id = "n1", raft_addr = "10.0.0.1:6226" },
  { id = "n2", raft_addr = "10.0.0.2:6226" },
]

[tls]
cert = "/tls/n2.crt"
key = "/tls/n2.key"

[limits]
max_held = 10
`

func clusterExpect(c *server.Config) {
	c.NodeID = "n2"
	c.ClientAddr = "0.0.0.0:6225"
	c.AdvertiseClientAddr = "10.0.0.2:6225"
	c.RaftAddr = "0.0.0.0:6226"
	c.AdvertiseRaftAddr = "10.0.0.2:6226"
	c.RaftInsecure = true
	c.HTTPAddr = ""
	c.DataDir = "/var/lib/ticketd"
	c.ClientTokens = []string{"file-a", "file-b"}
	c.HelloTimeout = 2 * time.Second
	c.ElectionTimeout = 1500 * time.Millisecond
	c.LogLevel = "debug"
	c.Bootstrap = []server.Peer{{ID: "n1", RaftAddr: "10.0.0.1:6226"}, {ID: "n2", RaftAddr: "10.0.0.2:6226"}}
	c.TLS = server.TLSFiles{CertFile: "/tls/n2.crt", KeyFile: "/tls/n2.key"}
	c.Limits.MaxHeld = 10
}

func TestLoadConfig(t *testing.T) {
	cluster := writeFile(t, clusterFile)
	tests := []struct {
		name    string
		args    func(t *testing.T) []string
		want    func(*server.Config) // edits applied to DefaultConfig
		wantErr string               // substring; "" means success
		errIs   error
		state   string // initial_cluster_state chosen: "" means new with a bootstrap list, else existing; "-" none (join)
	}{
		{
			name:  "no flags is the default single node",
			args:  func(*testing.T) []string { return nil },
			state: "new",
		},
		{
			name: "flags only",
			args: func(*testing.T) []string {
				return []string{
					"--node-id", "n3", "--listen", "127.0.0.1:7225", "--advertise=127.0.0.2:7225",
					"--raft-listen", "127.0.0.1:7226", "--raft-advertise", "127.0.0.2:7226",
					"--http-listen", "", "--data-dir", "/tmp/d3",
					"--bootstrap", "n1=127.0.0.1:1,n3=127.0.0.2:7226",
					"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem",
					"--raft-tls-cert", "rc.pem", "--raft-tls-key", "rk.pem", "--raft-tls-ca", "rca.pem",
					"--log-level", "warn",
				}
			},
			want: func(c *server.Config) {
				c.NodeID = "n3"
				c.ClientAddr = "127.0.0.1:7225"
				c.AdvertiseClientAddr = "127.0.0.2:7225"
				c.RaftAddr = "127.0.0.1:7226"
				c.AdvertiseRaftAddr = "127.0.0.2:7226"
				c.HTTPAddr = ""
				c.DataDir = "/tmp/d3"
				c.Bootstrap = []server.Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n3", RaftAddr: "127.0.0.2:7226"}}
				c.TLS = server.TLSFiles{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem"}
				c.RaftTLS = server.TLSFiles{CertFile: "rc.pem", KeyFile: "rk.pem", CAFile: "rca.pem"}
				c.LogLevel = "warn"
			},
		},
		{
			name:  "restore",
			args:  func(*testing.T) []string { return []string{"--restore", "/backups/b.snap", "--data-dir", "/tmp/new"} },
			want:  func(c *server.Config) { c.RestoreFile = "/backups/b.snap"; c.DataDir = "/tmp/new" },
			state: "new",
		},
		{
			name:    "raft_tls without ca",
			args:    func(*testing.T) []string { return []string{"--raft-tls-cert", "rc.pem", "--raft-tls-key", "rk.pem"} },
			wantErr: "raft_tls needs ca",
		},
		{
			name: "waiting to be added without peer authentication",
			args: func(*testing.T) []string {
				return []string{"--raft-listen", "10.0.0.1:5226", "--initial-cluster-state", "existing"}
			},
			wantErr: `(initial_cluster_state = "existing": it waits to be added to a cluster.`,
		},
		{
			name: "loopback bootstrap list without peer authentication",
			args: func(*testing.T) []string {
				return []string{"--node-id", "n1", "--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226"}
			},
			wantErr: `(a bootstrap list with other servers), but its Raft peers are not authenticated`,
		},
		{
			name: "cluster_name without raft_tls",
			args: func(*testing.T) []string {
				return []string{"--cluster-name", "alpha", "--raft-secret-file", "s", "--initial-cluster-state", "new"}
			},
			wantErr: `cluster_name binds Raft certificates to the cluster and needs [raft_tls]`,
		},
		{
			name: "cluster_name not a DNS label",
			args: func(*testing.T) []string {
				return []string{"--cluster-name", "Alpha/1", "--raft-secret-file", "s", "--initial-cluster-state", "new"}
			},
			wantErr: `cluster_name "Alpha/1": use 1 to 63 lowercase letters`,
		},
		{
			name:    "restore with join",
			args:    func(*testing.T) []string { return []string{"--restore", "b.snap", "--join"} },
			wantErr: "restore makes a single-node cluster",
		},
		{
			name:    "restore is not a config file key",
			args:    func(*testing.T) []string { return []string{"--config", writeFile(t, "restore = \"b.snap\"\n")} },
			wantErr: `unknown key "restore"`,
		},
		{
			name:  "single dash flags and join",
			args:  func(*testing.T) []string { return []string{"-node-id=n4", "-join", "-raft-secret-file=/s"} },
			want:  func(c *server.Config) { c.NodeID = "n4"; c.Join = true; c.RaftSecretFile = "/s" },
			state: "-",
		},
		{
			name: "file only",
			args: func(*testing.T) []string { return []string{"--config", cluster} },
			want: clusterExpect,
		},
		{
			name: "flags override file",
			args: func(*testing.T) []string {
				return []string{
					"--listen", "127.0.0.1:9225", "--config", cluster,
					"--http-listen", "127.0.0.1:9227", "--client-token", "flag-t",
					"--log-level", "error",
				}
			},
			want: func(c *server.Config) {
				clusterExpect(c)
				c.ClientAddr = "127.0.0.1:9225"
				c.HTTPAddr = "127.0.0.1:9227"
				c.ClientTokens = []string{"flag-t"}
				c.LogLevel = "error"
			},
		},
		{
			name: "flag set to its default still overrides file",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, `node_id = "n9"`+"\n"+`data_dir = "/x"`+"\n"+`raft_secret_file = "/s"`), "--node-id", "n1"}
			},
			want: func(c *server.Config) { c.DataDir = "/x"; c.RaftSecretFile = "/s" },
		},
		{
			name: "flag bootstrap overrides file bootstrap",
			args: func(*testing.T) []string {
				return []string{"--config", cluster, "--bootstrap", "n2=10.0.0.2:6226"}
			},
			want: func(c *server.Config) {
				clusterExpect(c)
				c.Bootstrap = []server.Peer{{ID: "n2", RaftAddr: "10.0.0.2:6226"}}
			},
		},
		{
			name: "repeated client-token",
			args: func(*testing.T) []string {
				return []string{"--client-token", "a", "--client-token=b", "-client-token", "c,d"}
			},
			want:  func(c *server.Config) { c.ClientTokens = []string{"a", "b", "c,d"} },
			state: "new",
		},
		{
			name: "bootstrap as array of tables",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "[[bootstrap]]\nid = \"n1\"\nraft_addr = \"127.0.0.1:5226\"\n")}
			},
			want: func(c *server.Config) { c.Bootstrap = []server.Peer{{ID: "n1", RaftAddr: "127.0.0.1:5226"}} },
		},
		{
			name: "unknown top-level key",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "node_id = \"n1\"\nlisten_addr = \"x:1\"\n")}
			},
			wantErr: `unknown key "listen_addr"`,
		},
		{
			name: "unknown nested key",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "[tls]\ncert = \"a\"\nkey = \"b\"\ncafile = \"c\"\n")}
			},
			wantErr: `unknown key "tls.cafile"`,
		},
		{
			name: "key after a table header belongs to the table",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "[limits]\nmax_held = 5\nlog_level = \"debug\"\n")}
			},
			wantErr: `unknown key "limits.log_level"`,
		},
		{
			name:    "several unknown keys",
			args:    func(*testing.T) []string { return []string{"--config", writeFile(t, "a = 1\nb = 2\n")} },
			wantErr: `unknown keys ["a" "b"]`,
		},
		{
			name:    "integer duration is rejected",
			args:    func(*testing.T) []string { return []string{"--config", writeFile(t, "hello_timeout = 5\n")} },
			wantErr: `hello_timeout: durations are strings such as "5s"`,
		},
		{
			name: "malformed duration",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "ping_interval = \"5 seconds\"\n")}
			},
			wantErr: "ping_interval",
		},
		{
			name:    "wrong type",
			args:    func(*testing.T) []string { return []string{"--config", writeFile(t, "node_id = 7\n")} },
			wantErr: "node_id",
		},
		{
			name:    "TOML syntax error",
			args:    func(*testing.T) []string { return []string{"--config", writeFile(t, "node_id = \"n1\n")} },
			wantErr: "config file ",
		},
		{
			name:    "missing config file",
			args:    func(t *testing.T) []string { return []string{"--config", filepath.Join(t.TempDir(), "nope.toml")} },
			wantErr: "config file: open ",
		},
		{
			name:    "bad bootstrap entry",
			args:    func(*testing.T) []string { return []string{"--bootstrap", "n1=127.0.0.1:5226,n2"} },
			wantErr: `--bootstrap: bootstrap entry "n2": want ID=RAFTADDR`,
		},
		{
			name: "bootstrap without this node",
			args: func(*testing.T) []string {
				return []string{"--node-id", "n3", "--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226"}
			},
			wantErr: `bootstrap does not list this server's node_id "n3"`,
		},
		{
			name: "bootstrap absent: this server",
			args: func(*testing.T) []string {
				return []string{"--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226,n3=127.0.0.1:7226", "--bootstrap-absent", "n1"}
			},
			wantErr: `bootstrap_absent names this server ("n1")`,
		},
		{
			name: "bootstrap absent: not listed",
			args: func(*testing.T) []string {
				return []string{"--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226,n3=127.0.0.1:7226", "--bootstrap-absent", "n4"}
			},
			wantErr: `bootstrap_absent names "n4", which is not in bootstrap`,
		},
		{
			name: "bootstrap absent: no majority left",
			args: func(*testing.T) []string {
				return []string{"--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226,n3=127.0.0.1:7226", "--bootstrap-absent", "n2,n3"}
			},
			wantErr: "bootstrap_absent leaves 1 of the 3 servers of bootstrap",
		},
		{
			name: "bootstrap absent: a two-server list",
			args: func(*testing.T) []string {
				return []string{"--bootstrap", "n1=127.0.0.1:5226,n2=127.0.0.1:6226", "--bootstrap-absent", "n2"}
			},
			wantErr: "bootstrap_absent leaves 1 of the 2 servers of bootstrap",
		},
		{
			name:    "bootstrap with join",
			args:    func(*testing.T) []string { return []string{"--join", "--bootstrap", "n1=127.0.0.1:5226"} },
			wantErr: "bootstrap and join are exclusive",
		},
		{
			name: "join from file with bootstrap flag",
			args: func(*testing.T) []string {
				return []string{"--config", writeFile(t, "join = true\n"), "--bootstrap", "n1=127.0.0.1:5226"}
			},
			wantErr: "bootstrap and join are exclusive",
		},
		{
			name:    "invalid address",
			args:    func(*testing.T) []string { return []string{"--listen", "5225"} },
			wantErr: `listen "5225" is not host:port`,
		},
		{
			name:    "tls cert without key",
			args:    func(*testing.T) []string { return []string{"--tls-cert", "c.pem"} },
			wantErr: "tls: cert and key must be given together",
		},
		{
			name:    "bad log level",
			args:    func(*testing.T) []string { return []string{"--log-level", "loud"} },
			wantErr: `log_level "loud"`,
		},
		{
			name:    "empty client token",
			args:    func(*testing.T) []string { return []string{"--client-token", ""} },
			wantErr: "client_tokens[0]",
		},
		{
			name:    "unknown flag",
			args:    func(*testing.T) []string { return []string{"--listen-addr", "x"} },
			wantErr: "flag provided but not defined: -listen-addr",
		},
		{
			name:    "positional argument",
			args:    func(*testing.T) []string { return []string{"serve"} },
			wantErr: `unexpected argument "serve"`,
		},
		{
			name:  "version",
			args:  func(*testing.T) []string { return []string{"--version", "--listen", "bad"} },
			errIs: errVersion,
		},
		{
			name:  "help",
			args:  func(*testing.T) []string { return []string{"-h"} },
			errIs: flag.ErrHelp,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadConfig(tc.args(t), io.Discard)
			switch {
			case tc.errIs != nil:
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
				return
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("loadConfig: %v", err)
			}
			want := validated(t, tc.want)
			switch {
			case tc.state == "" && len(want.Bootstrap) > 0:
				want.InitialClusterState = "new" // a bootstrap list says so
			case tc.state == "":
				want.InitialClusterState = "existing"
			case tc.state == "-":
			default:
				want.InitialClusterState = tc.state
			}
			// Validate fills in a default logger; compare everything else.
			got.Logger, want.Logger = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config mismatch\n got: %+v\nwant: %+v", got, want)
			}
		})
	}
}

// TestLoadConfigFlagOrderIrrelevant checks that precedence does not depend on
// where --config stands among the flags.
func TestLoadConfigFlagOrderIrrelevant(t *testing.T) {
	p := writeFile(t, "node_id = \"file\"\nraft_secret_file = \"/s\"\n")
	for _, args := range [][]string{
		{"--node-id", "flag", "--config", p},
		{"--config", p, "--node-id", "flag"},
	} {
		c, err := loadConfig(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.NodeID != "flag" {
			t.Errorf("%q: node_id = %q, want flag", args, c.NodeID)
		}
	}
}

// TestExampleConfig keeps examples/ticketd.toml loadable and in step with the
// settings ticketd has.
func TestExampleConfig(t *testing.T) {
	c, err := loadConfig([]string{"--config", filepath.Join("..", "..", "..", "examples", "ticketd.toml")}, io.Discard)
	if err != nil {
		t.Fatalf("examples/ticketd.toml: %v", err)
	}
	if c.NodeID != "n1" || len(c.Bootstrap) != 3 || c.AdvertiseRaftAddr != "10.0.0.1:5226" || !c.TLS.Enabled() || !c.RaftTLS.Enabled() || c.ClusterName != "prod" {
		t.Errorf("unexpected example config: %+v", c)
	}
}

// TestFlagsCoverConfig checks that every flag is wired to the configuration
// (or is one of the flags that are not settings).
func TestFlagsCoverConfig(t *testing.T) {
	fs, _, specs := newFlagSet(io.Discard)
	applied := map[string]bool{}
	for _, s := range specs {
		applied[s.name] = true
		if fs.Lookup(s.name) == nil {
			t.Errorf("spec for undefined flag %q", s.name)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !applied[f.Name] && f.Name != "config" && f.Name != "version" && f.Name != "export-backup" {
			t.Errorf("flag --%s is not applied to the configuration", f.Name)
		}
	})
}

func TestDurationKeys(t *testing.T) {
	var got []string
	for _, k := range durationKeys() {
		got = append(got, strings.Join(k, "."))
	}
	want := []string{"election_timeout", "heartbeat_timeout", "hello_timeout", "idle_ping_interval", "ping_interval", "snapshot_interval"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("durationKeys = %q, want %q", got, want)
	}
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	l := newLogger(&b, "warn", "")
	l.Info("hidden")
	l.Warn("shown", "k", "v")
	if out := b.String(); strings.Contains(out, "hidden") || !strings.Contains(out, "level=WARN msg=shown k=v") {
		t.Errorf("log output %q", out)
	}
}

// TestConfigErrorsNameKeysAndAll: a config with several wrong values is
// reported whole, each by its TOML key with the real minimum.
func TestConfigErrorsNameKeysAndAll(t *testing.T) {
	file := writeFile(t, `heartbeat_timeout = "9ms"
election_timeout = "9ms"
snapshot_interval = "4ms"
ping_interval = "500us"
hello_timeout = 5
initial_cluster_state = "fresh"
listen = "0.0.0.0:5225"
[limits]
max_held = 0
`)
	_, err := loadConfig([]string{"--config", file}, io.Discard)
	if err == nil {
		t.Fatal("accepted")
	}
	// hello_timeout = 5 is reported by the file decoder; the rest by Validate.
	_, err2 := loadConfig([]string{"--config", writeFile(t, strings.Replace(readFile(t, file), "hello_timeout = 5\n", "", 1))}, io.Discard)
	for _, want := range []string{"heartbeat_timeout = \"9ms\": must be at least 10ms", "election_timeout", "snapshot_interval = \"4ms\": must be at least 5ms",
		"ping_interval = \"500µs\": must be at least 1ms", "initial_cluster_state \"fresh\"", "listen \"0.0.0.0:5225\" listens on every interface: set advertise",
		"limits.max_held = 0"} {
		if err2 == nil || !strings.Contains(err2.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err2)
		}
	}
	if !strings.Contains(err.Error(), "hello_timeout: durations are strings") {
		t.Errorf("bare-number duration not reported: %v", err)
	}
	for _, raftName := range []string{"HeartbeatTimeout", "LeaderLeaseTimeout", "SnapshotInterval"} {
		if strings.Contains(err2.Error(), raftName) {
			t.Errorf("error uses Raft's field name %s: %v", raftName, err2)
		}
	}
	// Two duration keys written as numbers: both named.
	_, err = loadConfig([]string{"--config", writeFile(t, "hello_timeout = 5\nping_interval = 7\n")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "hello_timeout") || !strings.Contains(err.Error(), "ping_interval") {
		t.Errorf("want both keys named: %v", err)
	}
	// A bad flag value and a bad setting: both reported.
	_, err = loadConfig([]string{"--restore-min-token", "x", "--listen", "0.0.0.0:1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--restore-min-token") || !strings.Contains(err.Error(), "listens on every interface") {
		t.Errorf("want both the flag and the setting reported: %v", err)
	}
}

// TestInitialClusterStateDefault: only ticketd with a bootstrap list,
// without cluster settings or without peer authentication bootstraps on its
// own; a server configured for a cluster without a bootstrap list waits to
// be added unless told "new".
func TestInitialClusterStateDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "new"},
		{[]string{"--data-dir", "/x", "--listen", "127.0.0.1:1"}, "new"},
		{[]string{"--node-id", "n3"}, "existing"},
		{[]string{"--raft-listen", "127.0.0.1:1"}, "existing"},
		{[]string{"--config", writeFile(t, "node_id = \"n3\"\n")}, "existing"},
		{[]string{"--config", writeFile(t, "initial_cluster_state = \"new\"\n")}, "new"},
		{[]string{"--node-id", "n3", "--initial-cluster-state", "new"}, "new"},
		{[]string{"--node-id", "n3", "--bootstrap", "n3=127.0.0.1:1"}, "new"},
		{[]string{"--config", writeFile(t, "node_id = \"n1\"\nbootstrap = [{id = \"n1\", raft_addr = \"127.0.0.1:1\"}]\n")}, "new"},
		{[]string{"--config", writeFile(t, "node_id = \"n1\"\nbootstrap = [{id = \"n1\", raft_addr = \"127.0.0.1:1\"}]\n"), "--initial-cluster-state", "existing"}, "existing"},
		{[]string{"--restore", "b.snap", "--restore-min-token", "77"}, "new"},
	} {
		// A server that waits to be added needs peer authentication.
		c, err := loadConfig(append(tc.args, "--raft-secret-file", "/s"), io.Discard)
		if err != nil || c.InitialClusterState != tc.want {
			t.Errorf("%q: state %q, %v; want %q", tc.args, c.InitialClusterState, err, tc.want)
		}
	}
	// Without peer authentication a server can only run alone: moving its
	// ports, naming it or giving it a config file keeps it a server of its
	// own instead of one that waits to be added (and is refused for it).
	for _, args := range [][]string{
		{"--listen", "127.0.0.1:1", "--raft-listen", "127.0.0.1:2", "--http-listen", "127.0.0.1:3"},
		{"--node-id", "n3"},
		{"--config", writeFile(t, "node_id = \"n3\"\n")},
	} {
		c, err := loadConfig(args, io.Discard)
		if err != nil || c.InitialClusterState != "new" {
			t.Errorf("%q without peer authentication: state %q, %v; want new", args, c.InitialClusterState, err)
		}
	}
	if c, _ := loadConfig([]string{"--restore", "b.snap", "--restore-min-token", "77"}, io.Discard); c.RestoreMinToken != 77 {
		t.Errorf("restore-min-token not applied: %d", c.RestoreMinToken)
	}
	if _, err := loadConfig([]string{"--restore-min-token", "77"}, io.Discard); err == nil {
		t.Error("restore-min-token without restore accepted")
	}
	if _, err := loadConfig([]string{"--join", "--initial-cluster-state", "new"}, io.Discard); err == nil {
		t.Error("join with initial cluster state new accepted")
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The console is off by default and on with [http] console or
// --http-console; the flag wins over the file.
func TestConsoleSetting(t *testing.T) {
	c, err := loadConfig(nil, io.Discard)
	if err != nil || c.HTTP.Console {
		t.Fatalf("default: console %v, %v", c.HTTP.Console, err)
	}
	file := writeFile(t, "initial_cluster_state = \"new\"\n[http]\nconsole = true\n")
	if c, err = loadConfig([]string{"--config", file}, io.Discard); err != nil || !c.HTTP.Console {
		t.Fatalf("[http] console = true: console %v, %v", c.HTTP.Console, err)
	}
	if c, err = loadConfig([]string{"--config", file, "--http-console=false"}, io.Discard); err != nil || c.HTTP.Console {
		t.Fatalf("--http-console=false over the file: console %v, %v", c.HTTP.Console, err)
	}
	if c, err = loadConfig([]string{"--http-console"}, io.Discard); err != nil || !c.HTTP.Console {
		t.Fatalf("--http-console: console %v, %v", c.HTTP.Console, err)
	}
}

// TestReferenceDocumentsEveryFlag: docs/deployment.md's table of flags
// names every flag of ticketd.
func TestReferenceDocumentsEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	fs, _, _ := newFlagSet(io.Discard)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(string(doc), "| `--"+f.Name) {
			t.Errorf("docs/deployment.md's table of flags has no row for --%s", f.Name)
		}
	})
	if n < 20 {
		t.Fatalf("only %d flags found; the reading is broken", n)
	}
}

// TestExampleConfigMatchesDeploymentDoc: examples/ticketd.toml names the
// certificate files docs/deployment.md makes, and the data directory as it
// is now (no raft.db, which only an older version wrote).
func TestExampleConfigMatchesDeploymentDoc(t *testing.T) {
	example, err := os.ReadFile("../../../examples/ticketd.toml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	files := regexp.MustCompile(`/etc/ticketd/tls/[A-Za-z0-9_.-]+`).FindAllString(string(example), -1)
	if len(files) < 3 {
		t.Fatalf("examples/ticketd.toml names %d certificate files; the reading is broken", len(files))
	}
	for _, f := range files {
		if !strings.Contains(string(doc), f) {
			t.Errorf("examples/ticketd.toml names %s, which docs/deployment.md never makes or uses", f)
		}
	}
	if strings.Contains(string(example), "raft.db") {
		t.Error("examples/ticketd.toml mentions raft.db, which ticketd no longer writes (the log store is raft/wal)")
	}
}
