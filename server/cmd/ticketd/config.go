package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// errVersion is returned by loadConfig when --version was given.
var errVersion = errors.New("version requested")

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// flagSpec binds one command-line flag to the Config field it overrides.
type flagSpec struct {
	name  string
	apply func(*server.Config) error
}

// newFlagSet defines ticketd's flags. Values land in the returned holder;
// loadConfig copies only the flags that were set on the command line onto the
// configuration built from the defaults and the config file.
func newFlagSet(out io.Writer) (*flag.FlagSet, *cmdline, []flagSpec) {
	def := server.DefaultConfig()
	fs := flag.NewFlagSet("ticketd", flag.ContinueOnError)
	fs.SetOutput(out)

	var v server.Config
	var bootstrap, absent, minToken string
	var tokens stringList
	cl := &cmdline{}

	fs.StringVar(&cl.configFile, "config", "", "TOML config `file`; flags given on the command line override it")
	fs.StringVar(&v.ClientAddr, "listen", def.ClientAddr, "client listen `address` (host:port)")
	fs.StringVar(&v.AdvertiseClientAddr, "advertise", "", "client `address` other servers hand out to clients (default: --listen)")
	fs.StringVar(&v.RaftAddr, "raft-listen", def.RaftAddr, "Raft listen `address` (host:port)")
	fs.StringVar(&v.AdvertiseRaftAddr, "raft-advertise", "", "Raft `address` peers reach this server at (default: --raft-listen)")
	fs.StringVar(&v.HTTPAddr, "http-listen", def.HTTPAddr, "HTTP `address` for /healthz, /readyz and /metrics; empty disables it")
	fs.BoolVar(&v.HTTP.Console, "http-console", false, "serve the read-only operator's console at /console/ on the HTTP port")
	fs.BoolVar(&v.HTTP.TLS, "http-tls", false, "serve the HTTP port over TLS with --tls-cert and --tls-key (client certificates verified against --tls-client-ca when given)")
	fs.StringVar(&v.DataDir, "data-dir", def.DataDir, "`directory` holding the Raft log, stable store and snapshots")
	fs.StringVar(&v.NodeID, "node-id", def.NodeID, "unique `id` of this server in the cluster")
	fs.StringVar(&v.InitialClusterState, "initial-cluster-state", "", "what an empty data directory means: `new` bootstraps a new cluster, existing waits to be added (default: new with a bootstrap list, without Raft peer authentication, or with no config file and no cluster flags; else existing)")
	fs.StringVar(&bootstrap, "bootstrap", "", "voters of a new cluster, this server included, as `ID=RAFTADDR,...` (used only with --initial-cluster-state new and an empty data directory)")
	fs.StringVar(&absent, "bootstrap-absent", "", "servers of --bootstrap that will never start, as `ID,...`: founding the new cluster does not wait for them (they stay voters; the rest must be a majority)")
	fs.BoolVar(&v.Join, "join", false, "start with an empty data directory and wait to be added by the leader (ticketctl members add); refused when the data directory holds state")
	fs.StringVar(&v.RestoreFile, "restore", "", "load a backup `file` (ticketctl snapshot save or --export-backup) into a new single-node cluster with a new cluster ID; the data directory must be empty")
	fs.StringVar(&minToken, "restore-min-token", "", "with --restore: resume tokens above `N` (or the backup's last token, if larger) instead of the time-based floor")
	fs.BoolVar(&v.DataDirMoved, "data-dir-moved", false, "for one start: the data directory was moved whole while ticketd was stopped and the original will never be started (ticketd refuses a directory that is not where it was created: it may be an older copy)")
	fs.StringVar(&cl.exportFile, "export-backup", "", "write the state of this server's data directory (the server must be stopped) to `file` as a backup, and exit")
	fs.Var(&tokens, "client-token", "`token` a client must present; repeat for several (default: no authentication)")
	fs.StringVar(&v.TLS.CertFile, "tls-cert", "", "client listener TLS certificate `file` (PEM)")
	fs.StringVar(&v.TLS.KeyFile, "tls-key", "", "client listener TLS private key `file` (PEM)")
	fs.StringVar(&v.TLS.CAFile, "tls-client-ca", "", "CA `file` (PEM) that client certificates must be signed by (mTLS)")
	fs.StringVar(&v.Auth.CertIdentity, "cert-identity", "", "which part of a verified client certificate names a principal: `cn` (default), uri or dns")
	fs.StringVar(&v.RaftTLS.CertFile, "raft-tls-cert", "", "Raft TLS certificate `file` (PEM)")
	fs.StringVar(&v.RaftTLS.KeyFile, "raft-tls-key", "", "Raft TLS private key `file` (PEM)")
	fs.StringVar(&v.RaftTLS.CAFile, "raft-tls-ca", "", "CA `file` (PEM) that servers verify each other's Raft certificates with")
	fs.StringVar(&v.RaftSecretFile, "raft-secret-file", "", "`file` holding the cluster secret that Raft peers prove (ticketd new-raft-secret FILE makes one; mode 0600)")
	fs.StringVar(&v.ClusterName, "cluster-name", "", "with --raft-tls-*: the cluster `name` a peer's certificate must carry (URI SAN ticketing://NAME/node/ID)")
	fs.BoolVar(&v.RaftInsecure, "raft-insecure", false, "accept Raft peers that prove neither --raft-secret-file nor --raft-tls-*: anyone who reaches the Raft port can claim a member's id (a network only the servers reach)")
	fs.StringVar(&v.LogLevel, "log-level", def.LogLevel, "log `level`: debug, info, warn or error")
	fs.StringVar(&v.LogFormat, "log-format", "text", "log `format`: text (key=value) or json (one object a line)")
	fs.BoolVar(&cl.version, "version", false, "print the version and exit")

	specs := []flagSpec{
		{"listen", func(c *server.Config) error { c.ClientAddr = v.ClientAddr; return nil }},
		{"advertise", func(c *server.Config) error { c.AdvertiseClientAddr = v.AdvertiseClientAddr; return nil }},
		{"raft-listen", func(c *server.Config) error { c.RaftAddr = v.RaftAddr; return nil }},
		{"raft-advertise", func(c *server.Config) error { c.AdvertiseRaftAddr = v.AdvertiseRaftAddr; return nil }},
		{"http-listen", func(c *server.Config) error { c.HTTPAddr = v.HTTPAddr; return nil }},
		{"http-console", func(c *server.Config) error { c.HTTP.Console = v.HTTP.Console; return nil }},
		{"http-tls", func(c *server.Config) error { c.HTTP.TLS = v.HTTP.TLS; return nil }},
		{"data-dir", func(c *server.Config) error { c.DataDir = v.DataDir; return nil }},
		{"node-id", func(c *server.Config) error { c.NodeID = v.NodeID; return nil }},
		{"bootstrap", func(c *server.Config) error {
			peers, err := server.ParsePeers(bootstrap)
			if err != nil {
				return fmt.Errorf("--bootstrap: %w", err)
			}
			c.Bootstrap = peers
			return nil
		}},
		{"bootstrap-absent", func(c *server.Config) error {
			c.BootstrapAbsent = nil
			for _, id := range strings.Split(absent, ",") {
				if id = strings.TrimSpace(id); id != "" {
					c.BootstrapAbsent = append(c.BootstrapAbsent, id)
				}
			}
			return nil
		}},
		{"initial-cluster-state", func(c *server.Config) error { c.InitialClusterState = v.InitialClusterState; return nil }},
		{"join", func(c *server.Config) error { c.Join = v.Join; return nil }},
		{"restore", func(c *server.Config) error { c.RestoreFile = v.RestoreFile; return nil }},
		{"restore-min-token", func(c *server.Config) error {
			n, err := strconv.ParseUint(minToken, 10, 64)
			if err != nil || n == 0 {
				return fmt.Errorf("--restore-min-token %q: want a positive integer (a token)", minToken)
			}
			c.RestoreMinToken = n
			return nil
		}},
		{"data-dir-moved", func(c *server.Config) error { c.DataDirMoved = v.DataDirMoved; return nil }},
		{"client-token", func(c *server.Config) error { c.ClientTokens = append([]string(nil), tokens...); return nil }},
		{"tls-cert", func(c *server.Config) error { c.TLS.CertFile = v.TLS.CertFile; return nil }},
		{"tls-key", func(c *server.Config) error { c.TLS.KeyFile = v.TLS.KeyFile; return nil }},
		{"tls-client-ca", func(c *server.Config) error { c.TLS.CAFile = v.TLS.CAFile; return nil }},
		{"cert-identity", func(c *server.Config) error { c.Auth.CertIdentity = v.Auth.CertIdentity; return nil }},
		{"raft-tls-cert", func(c *server.Config) error { c.RaftTLS.CertFile = v.RaftTLS.CertFile; return nil }},
		{"raft-tls-key", func(c *server.Config) error { c.RaftTLS.KeyFile = v.RaftTLS.KeyFile; return nil }},
		{"raft-tls-ca", func(c *server.Config) error { c.RaftTLS.CAFile = v.RaftTLS.CAFile; return nil }},
		{"raft-secret-file", func(c *server.Config) error { c.RaftSecretFile = v.RaftSecretFile; return nil }},
		{"cluster-name", func(c *server.Config) error { c.ClusterName = v.ClusterName; return nil }},
		{"raft-insecure", func(c *server.Config) error { c.RaftInsecure = v.RaftInsecure; return nil }},
		{"log-level", func(c *server.Config) error { c.LogLevel = v.LogLevel; return nil }},
		{"log-format", func(c *server.Config) error { c.LogFormat = v.LogFormat; return nil }},
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: ticketd [flags]
       ticketd hash-token < token-file     (prints token_sha256 for a principal)
       ticketd new-raft-secret [--rotate] FILE
                                           (writes a fresh cluster secret, mode 0600)

ticketd serves tickets (fenced, leased locks) replicated with Raft.
With no flags it runs a single-node server on 127.0.0.1 (client port 5225,
HTTP 5227) with its data in ./ticketd-data. A server without Raft peer
authentication (--raft-secret-file or --raft-tls-*) runs alone and opens
no Raft listener; servers of a cluster share a secret or a CA.

Settings come from the defaults, then the --config file, then the flags
given on the command line, later ones winning. SIGHUP reloads client_tokens
and the [auth] settings (principals, quotas) without a restart, and ends the
connections whose token or certificate is no longer configured. Config file keys are the
ones in examples/ticketd.toml; durations there are strings such as "5s".

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, cl, specs
}

// cmdline holds the flags that are not server settings.
type cmdline struct {
	configFile string
	exportFile string
	version    bool
}

// clusterFlags are the flags that make a server part of a cluster: with
// any of them (or a config file) and no bootstrap list, an empty data
// directory waits to be added unless initial_cluster_state says "new".
var clusterFlags = []string{"node-id", "raft-listen", "raft-advertise", "bootstrap", "join"}

// loadConfig builds the server configuration from command-line arguments:
// defaults, overridden by the --config file, overridden by the flags set on
// the command line. The result has passed Validate. usage receives the help
// text for -h and the flag package's parse errors.
func loadConfig(args []string, usage io.Writer) (server.Config, error) {
	cfg, _, err := loadCmdline(args, usage)
	return cfg, err
}

// loadCmdline is loadConfig that also returns the flags that are not settings.
func loadCmdline(args []string, usage io.Writer) (server.Config, *cmdline, error) {
	fs, cl, specs := newFlagSet(usage)
	if err := fs.Parse(args); err != nil {
		return server.Config{}, cl, err
	}
	if fs.NArg() > 0 {
		return server.Config{}, cl, fmt.Errorf("unexpected argument %q: ticketd takes flags only (see ticketd -h)", fs.Arg(0))
	}
	if cl.version {
		return server.Config{}, cl, errVersion
	}

	cfg := server.DefaultConfig()
	if cl.configFile != "" {
		data, err := os.ReadFile(cl.configFile)
		if err != nil {
			return server.Config{}, cl, fmt.Errorf("config file: %w", err)
		}
		if err := decodeConfigFile(data, &cfg); err != nil {
			return server.Config{}, cl, fmt.Errorf("config file %s: %w", cl.configFile, err)
		}
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, s := range specs {
		if !set[s.name] {
			continue
		}
		if err := s.apply(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if cl.exportFile != "" {
		// --export-backup reads a stopped server's data directory and starts
		// nothing: how the server joins its cluster, and how its Raft peers
		// authenticate, do not matter to it.
		cfg.InitialClusterState, cfg.Bootstrap, cfg.Join = "new", nil, false
	}
	if cfg.InitialClusterState == "" && !cfg.Join {
		// A server bootstraps on its own only when given a bootstrap list,
		// or when it runs with no cluster settings at all (the first command
		// of the README). A server configured as part of a cluster but
		// without a bootstrap list waits to be added, so that one started
		// without its list never forms a cluster alone. (One that lost its
		// data and bootstraps again from its list is refused by its cluster:
		// see internal/node, cluster identity.)
		cfg.InitialClusterState = "new"
		// A server without Raft peer authentication can never have peers
		// (ticketd refuses that), so it runs alone whatever flags moved its
		// ports: waiting to be added would only be refused. A member of a
		// cluster always has its peer authentication configured, so one
		// whose data directory was emptied still waits to be added.
		if len(cfg.Bootstrap) == 0 && !cfg.RunsAlone() {
			if cl.configFile != "" {
				cfg.InitialClusterState = "existing"
			}
			for _, f := range clusterFlags {
				if set[f] {
					cfg.InitialClusterState = "existing"
				}
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return server.Config{}, cl, errors.Join(errs...)
	}
	return cfg, cl, nil
}

// decodeConfigFile decodes a TOML config file on top of cfg. Keys that the
// configuration does not have are an error naming them, and so are
// durations written as bare integers (which TOML would take as nanoseconds).
func decodeConfigFile(data []byte, cfg *server.Config) error {
	md, err := toml.Decode(string(data), cfg)
	if err != nil {
		return err
	}
	var errs []error
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		names := make([]string, len(undecoded))
		for i, k := range undecoded {
			names[i] = k.String()
		}
		if len(names) == 1 {
			errs = append(errs, fmt.Errorf("unknown key %q", names[0]))
		} else {
			errs = append(errs, fmt.Errorf("unknown keys %q", names))
		}
	}
	for _, key := range durationKeys() {
		if md.IsDefined(key...) && md.Type(key...) != "String" {
			errs = append(errs, fmt.Errorf("%s: durations are strings such as \"5s\" or \"500ms\", not %s", strings.Join(key, "."), strings.ToLower(md.Type(key...))))
		}
	}
	return errors.Join(errs...)
}

// durationKeys lists the TOML keys of every time.Duration in server.Config,
// found by reflection so that new settings are covered without a list to keep.
func durationKeys() [][]string {
	var keys [][]string
	var walk func(t reflect.Type, prefix []string)
	walk = func(t reflect.Type, prefix []string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			key := append(append([]string(nil), prefix...), name)
			switch {
			case f.Type == reflect.TypeOf(time.Duration(0)):
				keys = append(keys, key)
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, key)
			}
		}
	}
	walk(reflect.TypeOf(server.Config{}), nil)
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i], ".") < strings.Join(keys[j], ".") })
	return keys
}
