package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/buildinfo"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// Peer is one voting member of a cluster bootstrapped from configuration.
type Peer = node.Peer

// ParsePeers parses "id=raftaddr,id=raftaddr" as given to --bootstrap.
func ParsePeers(s string) ([]Peer, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []Peer
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("bootstrap entry %q: want ID=RAFTADDR, for example n1=10.0.0.1:5226", part)
		}
		out = append(out, Peer{ID: id, RaftAddr: addr})
	}
	return out, nil
}

// TLSFiles names PEM files for one listener.
type TLSFiles struct {
	CertFile string `toml:"cert"`
	KeyFile  string `toml:"key"`
	// CAFile, when set, makes the peer present a certificate signed by it
	// (mTLS). For Raft traffic it is also the CA that servers verify each other with.
	CAFile string `toml:"ca"`
}

// Enabled reports whether a certificate is configured.
func (t TLSFiles) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Limits bound what one server holds, so that overload is answered with a
// capacity reject instead of unbounded memory.
type Limits struct {
	MaxHeld          int `toml:"max_held"`            // held tickets on the server
	MaxWaitersPerKey int `toml:"max_waiters_per_key"` // queued acquires for one key
	MaxWaiters       int `toml:"max_waiters"`         // queued acquires on the server
	// MaxInFlightPerConn bounds, per connection, the acquires without a final
	// answer and, separately, the other requests (L, U, D, J) without one.
	MaxInFlightPerConn int `toml:"max_in_flight_per_conn"`
	MaxConnections     int `toml:"max_connections"` // open client connections
}

// HTTPConfig configures the HTTP port.
type HTTPConfig struct {
	// Console serves the read-only operator's console under /console/.
	Console bool `toml:"console"`
	// TLS serves the HTTP port over TLS with the client port's certificate
	// ([tls]); with tls.ca, a client certificate that is given is verified
	// and names a principal as it does on the client port.
	TLS bool `toml:"tls"`
	// LeaderCA is the CA file a follower's console verifies the leader's
	// client-port certificate with, when the client port is TLS. Empty: the
	// CAs this server already trusts, raft_tls.ca and tls.ca; with
	// neither, the system's roots.
	LeaderCA string `toml:"leader_ca"`
}

// Config is the whole configuration of one ticketd server. Start from
// DefaultConfig and call Validate (New does) before use.
type Config struct {
	NodeID string `toml:"node_id"`
	// ClientAddr is where clients connect (the binary protocol).
	ClientAddr string `toml:"listen"`
	// AdvertiseClientAddr is the client address other servers hand out in M
	// frames; it defaults to ClientAddr.
	AdvertiseClientAddr string `toml:"advertise"`
	// RaftAddr is where this server listens for Raft traffic; peers reach it
	// at AdvertiseRaftAddr, which defaults to RaftAddr.
	RaftAddr          string `toml:"raft_listen"`
	AdvertiseRaftAddr string `toml:"raft_advertise"`
	// HTTPAddr serves /healthz, /readyz and /metrics; empty disables it.
	HTTPAddr string `toml:"http_listen"`
	// HTTP configures the HTTP port beyond its address ([http]).
	HTTP    HTTPConfig `toml:"http"`
	DataDir string     `toml:"data_dir"`

	// InitialClusterState says what an empty data directory means: "new"
	// bootstraps a new cluster from Bootstrap; "existing" waits until a
	// leader adds this server (ticketctl members add). Ignored once the data
	// directory holds state. Empty means "new" (ticketd's command line picks
	// "existing" when cluster settings are given; see cmd/ticketd).
	InitialClusterState string `toml:"initial_cluster_state"`
	// Bootstrap lists every voter of a new cluster, this server included.
	// Empty means a single-node cluster of this server alone. Used only with
	// InitialClusterState "new" and an empty data directory.
	Bootstrap []Peer `toml:"bootstrap"`
	// BootstrapAbsent names servers of Bootstrap that will never start (a
	// host lost before the cluster first formed): founding does not wait
	// for them. They stay voters of the new cluster's configuration, and
	// the others must be a majority of it.
	BootstrapAbsent []string `toml:"bootstrap_absent"`
	// Join is InitialClusterState "existing" that also refuses a data
	// directory holding state: it waits until the leader adds it.
	Join bool `toml:"join"`

	// RestoreFile, when set, loads a backup (ticketctl snapshot save) into a
	// new single-node cluster with a new cluster ID: the data directory must
	// be empty. Grow the cluster afterwards with ticketctl members add.
	RestoreFile string `toml:"-"`
	// DataDirMoved confirms, for one start, that the data directory was
	// moved whole while ticketd was stopped (it is not a copy): ticketd
	// otherwise refuses a directory that is not where it was created.
	DataDirMoved bool `toml:"-"`
	// RestoreMinToken, when not zero, replaces the restore's time-based
	// token floor: tokens resume above max(RestoreMinToken, the backup's
	// last token).
	RestoreMinToken uint64 `toml:"-"`

	// ClientTokens, when non-empty, are the tokens a client may present in
	// its hello; any other client is refused.
	ClientTokens []string `toml:"client_tokens"`
	TLS          TLSFiles `toml:"tls"`
	// RaftTLS secures and authenticates Raft traffic: every server presents
	// a certificate signed by RaftTLS.CAFile that names its node id (the
	// subject CN, or a URI SAN ticketing://node/ID), and refuses a peer
	// whose certificate names another id.
	RaftTLS TLSFiles `toml:"raft_tls"`
	// RaftSecretFile names the cluster secret's file (one line; a second
	// line, the previous secret, while it is replaced): every peer proves
	// that it holds the secret before any Raft message, without sending
	// it. The file must not be readable by group or others.
	RaftSecretFile string `toml:"raft_secret_file"`
	// ClusterName, with raft_tls, binds Raft certificates to this cluster:
	// a peer's certificate must carry the URI SAN
	// ticketing://NAME/node/ID, so that a certificate from the same CA for
	// a server of another cluster is refused.
	ClusterName string `toml:"cluster_name"`
	// RaftInsecure accepts Raft peers that authenticate neither with
	// raft_tls nor with raft_secret_file: anyone who reaches the Raft port
	// can then claim a member's node id. Only for a network that nothing
	// but the cluster's servers reach.
	RaftInsecure bool `toml:"raft_insecure"`

	// Auth names principals with roles and key prefixes (auth.go).
	Auth AuthConfig `toml:"auth"`

	Limits Limits `toml:"limits"`

	HelloTimeout time.Duration `toml:"hello_timeout"`
	PingInterval time.Duration `toml:"ping_interval"`
	// IdlePingInterval is how often an idle connection (nothing awaiting an
	// answer, never a coordination frame) of a client that follows it is
	// pinged; 0, or not longer than PingInterval, pings every connection
	// every PingInterval.
	IdlePingInterval time.Duration `toml:"idle_ping_interval"`
	// WriteBufferLimit bounds the answers queued for one connection; a
	// client that does not read them is disconnected.
	WriteBufferLimit int `toml:"write_buffer_limit"`

	// SnapshotThreshold is the number of operations (acquires, releases,
	// expiries) after which a snapshot is taken and the log compacted, or the
	// number of tickets held if that is larger (a snapshot copies them all);
	// SnapshotInterval is how often Raft also checks its own entry count.
	SnapshotThreshold uint64        `toml:"snapshot_threshold"`
	SnapshotInterval  time.Duration `toml:"snapshot_interval"`
	// SnapshotRetain is how many snapshots are kept on disk.
	SnapshotRetain int `toml:"snapshot_retain"`

	// HeartbeatTimeout and ElectionTimeout tune failure detection (Raft).
	HeartbeatTimeout time.Duration `toml:"heartbeat_timeout"`
	ElectionTimeout  time.Duration `toml:"election_timeout"`

	LogLevel string `toml:"log_level"`
	// LogFormat is how ticketd writes its log: "text" (key=value, the
	// default) or "json" (one object a line); Raft's records too.
	LogFormat string       `toml:"log_format"`
	Logger    *slog.Logger `toml:"-"`
	// Build is the running binary's build (ticketd fills it); empty, New
	// reads it from the binary without a stamped version.
	Build buildinfo.Info `toml:"-"`
}

// The smallest values Validate accepts. Raft needs its leader lease (half
// the heartbeat timeout) and its snapshot interval to be at least 5 ms.
const (
	MinHeartbeatTimeout = 10 * time.Millisecond
	MinSnapshotInterval = 5 * time.Millisecond
	// Y carries the ping interval in whole ms, and 0 there means "the
	// server sends no pings": a smaller interval would silently turn them off.
	MinPingInterval = time.Millisecond
	// DefaultIdlePingInterval keeps an idle connection's pings under
	// 2.5 µs of server CPU a second (docs/benchmarks.md, idle connections)
	// while a silent peer of an idle connection is still found within a
	// minute.
	DefaultIdlePingInterval = 20 * time.Second
)

// DefaultConfig returns the configuration of a single-node server on loopback:
// what `ticketd` with no flags runs.
func DefaultConfig() Config {
	return Config{
		NodeID:     "n1",
		ClientAddr: "127.0.0.1:5225",
		RaftAddr:   "127.0.0.1:5226",
		HTTPAddr:   "127.0.0.1:5227",
		DataDir:    "./ticketd-data",
		Limits: Limits{
			MaxHeld:            2_000_000,
			MaxWaitersPerKey:   10_000,
			MaxWaiters:         1_000_000,
			MaxInFlightPerConn: 10_000,
			MaxConnections:     20_000,
		},
		HelloTimeout:      5 * time.Second,
		PingInterval:      500 * time.Millisecond,
		IdlePingInterval:  DefaultIdlePingInterval,
		WriteBufferLimit:  4 << 20,
		SnapshotThreshold: 100_000,
		SnapshotInterval:  30 * time.Second,
		SnapshotRetain:    2,
		HeartbeatTimeout:  500 * time.Millisecond,
		ElectionTimeout:   500 * time.Millisecond,
		LogLevel:          "info",
	}
}

// Validate checks the configuration and fills derived defaults. Its errors
// say which setting is wrong and how to fix it; every problem is reported,
// not only the first.
func (c *Config) Validate() error {
	var p problems
	c.checkNodeID(&p)
	c.checkAddresses(&p)
	c.checkDataDir(&p)
	c.fillAdvertised()
	c.checkClusterStart(&p)
	c.checkClientAuth(&p)
	c.checkTLS(&p)
	c.checkLimits(&p)
	c.checkTimings(&p)
	c.checkLogLevel(&p)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Build == (buildinfo.Info{}) {
		c.Build = buildinfo.Read("")
	}
	if len(p) > 0 {
		return fmt.Errorf("invalid configuration: %w", errors.Join(p...))
	}
	return nil
}

// problems collects what is wrong with a configuration.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// checkHostPort checks that the setting name holds host:port (or nothing,
// unless required).
func (p *problems) checkHostPort(name, addr string, required bool) {
	if addr == "" {
		if required {
			p.add("%s is empty", name)
		}
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.add("%s %q is not host:port: %v", name, addr, err)
	}
}

func (c *Config) checkNodeID(p *problems) {
	if c.NodeID == "" {
		p.add("node_id is empty: give every server a unique id (--node-id)")
	}
}

// checkAddresses checks the listen and advertised addresses, and what the
// HTTP port needs.
func (c *Config) checkAddresses(p *problems) {
	p.checkHostPort("listen", c.ClientAddr, true)
	p.checkHostPort("advertise", c.AdvertiseClientAddr, false)
	p.checkHostPort("raft_listen", c.RaftAddr, true)
	p.checkHostPort("raft_advertise", c.AdvertiseRaftAddr, false)
	p.checkHostPort("http_listen", c.HTTPAddr, false)
	if c.HTTP.TLS && !c.TLS.Enabled() {
		p.add("http.tls needs the client port's certificate: set tls.cert and tls.key (--tls-cert, --tls-key)")
	}
	if (c.HTTP.TLS || c.HTTP.Console) && c.HTTPAddr == "" {
		p.add("http.console and http.tls need the HTTP port: set http_listen (--http-listen)")
	}
	p.checkAdvertisable(c.ClientAddr, "listen", c.AdvertiseClientAddr, "advertise")
	p.checkAdvertisable(c.RaftAddr, "raft_listen", c.AdvertiseRaftAddr, "raft_advertise")
}

// checkAdvertisable refuses a wildcard listen address without an advertised
// one: it is no address to hand out, clients (and peers) would be sent to
// [::] or 0.0.0.0.
func (p *problems) checkAdvertisable(listen, listenKey, adv, advKey string) {
	if adv != "" {
		return
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			p.add("%s %q listens on every interface: set %s to the address others reach this server at (for example 10.0.0.1%s)",
				listenKey, listen, advKey, listen[strings.LastIndex(listen, ":"):])
		}
	}
}

func (c *Config) checkDataDir(p *problems) {
	if c.DataDir == "" {
		p.add("data_dir is empty")
	}
}

// fillAdvertised defaults each advertised address to its listen address.
func (c *Config) fillAdvertised() {
	if c.AdvertiseClientAddr == "" {
		c.AdvertiseClientAddr = c.ClientAddr
	}
	if c.AdvertiseRaftAddr == "" {
		c.AdvertiseRaftAddr = c.RaftAddr
	}
}

// checkClusterStart checks how the server starts: a new cluster, joining
// one, the bootstrap list, or restoring a backup.
func (c *Config) checkClusterStart(p *problems) {
	switch c.InitialClusterState {
	case "", "new", "existing":
	default:
		p.add("initial_cluster_state %q: want \"new\" (bootstrap a new cluster on the first start) or \"existing\" (wait to be added with ticketctl members add)", c.InitialClusterState)
	}
	if c.Join && c.InitialClusterState == "new" {
		p.add("join and initial_cluster_state = \"new\" are exclusive: a joining server waits to be added by the leader")
	}
	if len(c.Bootstrap) > 0 {
		c.checkBootstrap(p)
	}
	if len(c.BootstrapAbsent) > 0 {
		c.checkBootstrapAbsent(p)
	}
	if c.RestoreFile != "" && (len(c.Bootstrap) > 1 || c.Join) {
		p.add("restore makes a single-node cluster: start it without bootstrap peers or join, then add members")
	}
	if c.RestoreMinToken > 0 && c.RestoreFile == "" {
		p.add("restore-min-token is used only with restore")
	}
}

// checkBootstrap checks the bootstrap list: distinct ids and addresses, and
// this server among them.
func (c *Config) checkBootstrap(p *problems) {
	if c.Join {
		p.add("bootstrap and join are exclusive: a joining server is added by the leader")
	}
	seen := map[string]bool{}
	addrs := map[string]string{}
	self := false
	for _, peer := range c.Bootstrap {
		if seen[peer.ID] {
			p.add("bootstrap lists node %q twice: every server needs its own node_id", peer.ID)
		}
		seen[peer.ID] = true
		if other, ok := addrs[peer.RaftAddr]; ok {
			p.add("bootstrap gives %q and %q the same raft_addr %s", other, peer.ID, peer.RaftAddr)
		}
		addrs[peer.RaftAddr] = peer.ID
		p.checkHostPort("bootstrap address of "+peer.ID, peer.RaftAddr, true)
		if peer.ID == c.NodeID {
			self = true
		}
	}
	if !self {
		p.add("bootstrap does not list this server's node_id %q", c.NodeID)
	}
}

// checkBootstrapAbsent checks the servers founding does not wait for: each
// one of the bootstrap list, other than this server, and the rest a
// majority of the list (they elect the first leader on their own).
func (c *Config) checkBootstrapAbsent(p *problems) {
	if c.InitialClusterState == "existing" || c.Join {
		p.add("bootstrap_absent is used only to found a new cluster (initial_cluster_state = \"new\" with a bootstrap list)")
	}
	listed := map[string]bool{}
	for _, peer := range c.Bootstrap {
		listed[peer.ID] = true
	}
	absent := map[string]bool{}
	for _, id := range c.BootstrapAbsent {
		switch {
		case id == c.NodeID:
			p.add("bootstrap_absent names this server (%q): list only servers of bootstrap that will never start", id)
		case !listed[id]:
			p.add("bootstrap_absent names %q, which is not in bootstrap", id)
		case absent[id]:
			p.add("bootstrap_absent names %q twice", id)
		}
		absent[id] = true
	}
	if n := len(c.Bootstrap); n-len(absent) <= n/2 {
		p.add("bootstrap_absent leaves %d of the %d servers of bootstrap: the servers that start must be a majority of the list", n-len(absent), n)
	}
}

// checkClientAuth checks the client tokens and the auth section.
func (c *Config) checkClientAuth(p *problems) {
	for i, t := range c.ClientTokens {
		if t == "" || len(t) > 1024 {
			p.add("client_tokens[%d] must be 1..1024 bytes", i)
		}
	}
	c.Auth.validate(c, p.add)
}

// checkTLS checks the certificate files of both ports, and that Raft peers
// are authenticated (raft_tls or raft_secret_file) whenever this server is
// to have any, unless raft_insecure says they need not be. Loopback is no
// exception: any local process can reach a loopback port.
func (c *Config) checkTLS(p *problems) {
	p.checkTLSPair("tls", c.TLS)
	p.checkTLSPair("raft_tls", c.RaftTLS)
	if c.HTTP.LeaderCA != "" && !c.TLS.Enabled() {
		p.add("http.leader_ca %q is set, but the client port has no TLS ([tls]): the console reads from the leader without TLS; remove leader_ca or configure [tls]", c.HTTP.LeaderCA)
	}
	if c.RaftTLS.Enabled() && c.RaftTLS.CAFile == "" {
		p.add("raft_tls needs ca: servers verify each other's certificates against it (each naming its server's node id); without it a server accepts peers that present no certificate and no leader can be elected")
	}
	if c.ClusterName != "" {
		if !validClusterName(c.ClusterName) {
			p.add("cluster_name %q: use 1 to 63 lowercase letters, digits and '-', beginning and ending with a letter or digit (it is the host of the URI SAN ticketing://NAME/node/ID)", c.ClusterName)
		}
		if !c.RaftTLS.Enabled() {
			p.add("cluster_name binds Raft certificates to the cluster and needs [raft_tls]: set raft_tls, or remove cluster_name")
		}
	}
	if !c.RaftAuthenticated() && !c.RaftInsecure && c.hasPeers() {
		p.add("this server is configured to be part of a cluster (%s), but its Raft peers are not authenticated: anyone who reaches its Raft port, on loopback too, could claim a member's node id. "+
			"Make a secret with ticketd new-raft-secret FILE, copy it to every server (mode 0600) and set raft_secret_file (--raft-secret-file); "+
			"or set [raft_tls] with cert, key and ca (each server's certificate naming its node id, see docs/deployment.md); "+
			"or raft_insecure = true on a network that only the cluster's servers reach", c.peersReason())
	}
}

// RaftAuthenticated reports whether Raft peers prove who they are (raft_tls
// or raft_secret_file).
func (c *Config) RaftAuthenticated() bool { return c.RaftTLS.Enabled() || c.RaftSecretFile != "" }

// RunsAlone reports whether this server opens no Raft listener: it has no
// peer authentication (nor raft_insecure), so it may not have peers.
func (c *Config) RunsAlone() bool { return !c.RaftAuthenticated() && !c.RaftInsecure }

// hasPeers reports whether this server is configured to have Raft peers: a
// bootstrap list with other servers, or waiting to be added.
func (c *Config) hasPeers() bool { return c.peersReason() != "" }

func (c *Config) peersReason() string {
	switch {
	case c.Join:
		return "join"
	case c.InitialClusterState == "existing" && c.RestoreFile == "":
		return `initial_cluster_state = "existing": it waits to be added to a cluster. ` +
			`A server of its own leaves initial_cluster_state out or sets it to "new"`
	}
	for _, peer := range c.Bootstrap {
		if peer.ID != c.NodeID {
			return "a bootstrap list with other servers"
		}
	}
	return ""
}

// validClusterName: a DNS label in lowercase.
func validClusterName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

func (p *problems) checkTLSPair(name string, t TLSFiles) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.add("%s: cert and key must be given together", name)
	}
	if t.CAFile != "" && t.CertFile == "" {
		p.add("%s: a CA file needs a certificate and key as well", name)
	}
}

// checkLimits checks the [limits] section and the write buffer.
func (c *Config) checkLimits(p *problems) {
	l := c.Limits
	atLeast := func(key string, v, min int) {
		if v < min {
			p.add("limits.%s = %d: must be at least %d", key, v, min)
		}
	}
	atLeast("max_held", l.MaxHeld, 1)
	atLeast("max_waiters_per_key", l.MaxWaitersPerKey, 0)
	atLeast("max_waiters", l.MaxWaiters, 0)
	atLeast("max_in_flight_per_conn", l.MaxInFlightPerConn, 1)
	atLeast("max_connections", l.MaxConnections, 1)
}

// checkTimings checks the connection timings, the snapshot settings and
// Raft's timeouts.
func (c *Config) checkTimings(p *problems) {
	minDur := func(key string, v, min time.Duration) {
		if v < min {
			p.add("%s = %q: must be at least %v", key, v.String(), min)
		}
	}
	minDur("hello_timeout", c.HelloTimeout, time.Millisecond)
	minDur("ping_interval", c.PingInterval, MinPingInterval)
	if c.IdlePingInterval < 0 || c.IdlePingInterval%time.Millisecond != 0 {
		p.add("idle_ping_interval = %q: must be whole milliseconds (0, or not longer than ping_interval: idle connections are pinged every ping_interval)", c.IdlePingInterval.String())
	}
	if c.WriteBufferLimit < 64<<10 {
		p.add("write_buffer_limit = %d: must be at least 65536 (64 KiB)", c.WriteBufferLimit)
	}
	if c.SnapshotThreshold < 1 {
		p.add("snapshot_threshold = %d: must be at least 1", c.SnapshotThreshold)
	}
	minDur("snapshot_interval", c.SnapshotInterval, MinSnapshotInterval)
	if c.SnapshotRetain < 1 {
		p.add("snapshot_retain = %d: must be at least 1", c.SnapshotRetain)
	}
	minDur("heartbeat_timeout", c.HeartbeatTimeout, MinHeartbeatTimeout)
	if c.ElectionTimeout < c.HeartbeatTimeout || c.ElectionTimeout < MinHeartbeatTimeout {
		p.add("election_timeout = %q: must be at least heartbeat_timeout (%v) and at least %v", c.ElectionTimeout.String(), c.HeartbeatTimeout, MinHeartbeatTimeout)
	}
}

func (c *Config) checkLogLevel(p *problems) {
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		p.add("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "", "text", "json":
	default:
		p.add("log_format %q: want text or json", c.LogFormat)
	}
}

// idlePings is the idle ping interval announced to clients that follow
// one, 0 for none.
func (c *Config) idlePings() time.Duration {
	if c.IdlePingInterval <= c.PingInterval {
		return 0
	}
	return c.IdlePingInterval
}
