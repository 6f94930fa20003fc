package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// Server is one running ticketd: a Raft node, the client listener and the
// HTTP endpoints.
type Server struct {
	cfg     Config
	log     *slog.Logger
	node    *node.Node
	core    *core.Core
	metrics *metrics
	auth    atomic.Pointer[authTable] // swapped whole by SetAuth
	// logLimit rate-limits the audit and handshake records that clients cause.
	logLimit *logLimiter
	// usage is what each principal uses, by name (quota.go).
	usageMu sync.Mutex
	usage   map[string]*principalUsage

	ln     net.Listener
	httpLn net.Listener
	http   *http.Server

	mu        sync.Mutex
	conns     map[*conn]struct{}
	pinger    *pinger // pings every connection past its hello (pinger.go)
	serving   bool
	servingCh chan struct{} // closed while serving; replaced when serving stops
	closed    bool
	// transferTo is the id of the voter that a leadership transfer started
	// here was sent to, until Raft names the new leader: M names it meanwhile
	// instead of nothing.
	transferTo atomic.Pointer[string]

	wg   sync.WaitGroup
	stop chan struct{}

	watchGate sync.Mutex // tests hold it to delay the leadership watcher

	console *consoleState // the operator's console (console.go), nil when off
}

// New validates cfg, opens the data directory, starts Raft and begins serving
// clients. The returned server runs until Shutdown.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, conns: make(map[*conn]struct{}), servingCh: make(chan struct{}), stop: make(chan struct{})}
	s.pinger = newPinger(cfg.PingInterval, cfg.idlePings())
	s.initConsole()
	s.logLimit = newLogLimiter(cfg.Logger)
	s.usage = make(map[string]*principalUsage)

	creds, err := loadCredentials(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.open(creds); err != nil {
		return nil, err
	}
	s.goRun(s.core.Run)
	s.watchLeaders()
	s.goRun(func() { s.logLimit.run(s.stop) })
	s.goRun(s.watchLeadership)
	s.goRun(func() { s.pinger.run(s.stop) })
	s.goRun(s.acceptLoop)
	raftListen := s.node.RaftAddr()
	switch {
	case cfg.RaftInsecure:
		s.log.Warn("raft_insecure: Raft peers that prove nothing are accepted; anyone who reaches the Raft address can claim a member's node id and disrupt or join the cluster. "+
			"Set raft_secret_file (ticketd new-raft-secret FILE) or [raft_tls] on every server, then remove raft_insecure",
			"raft", raftListen)
	case cfg.RunsAlone():
		raftListen = "none"
		s.log.Info("no Raft peer authentication configured: this server runs alone and opens no Raft listener. " +
			"To grow it, give every server the same raft_secret_file (ticketd new-raft-secret FILE) or [raft_tls]")
	}
	s.log.Info("ticketd started", "node", cfg.NodeID, "version", s.cfg.Build.Version, "commit", s.cfg.Build.Commit, "go", s.cfg.Build.Go,
		"listen", s.ln.Addr().String(), "raft", raftListen, "http", cfg.HTTPAddr, "data_dir", cfg.DataDir,
		"tls", creds.client != nil, "raft_tls", creds.raft != nil, "auth", len(cfg.ClientTokens) > 0 || len(cfg.Auth.Principals) > 0)
	return s, nil
}

// credentials are what a server reads before it opens anything: the TLS
// configurations of the client port and of Raft, and the cluster secrets.
type credentials struct {
	client, raft *tls.Config
	raftSecrets  [][]byte
}

func loadCredentials(cfg Config) (c credentials, err error) {
	if c.raft, err = raftTLSConfig(cfg.RaftTLS); err != nil {
		return c, err
	}
	if cfg.RaftSecretFile != "" {
		if c.raftSecrets, err = ReadRaftSecrets(cfg.RaftSecretFile); err != nil {
			return c, err
		}
	}
	c.client, err = clientTLSConfig(cfg.TLS)
	return c, err
}

// undoList is what the startup opened so far, undone newest first when a
// later step fails: New's one cleanup path.
type undoList []func()

func (u *undoList) add(fn func()) { *u = append(*u, fn) }

func (u undoList) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// open runs the startup's steps that can fail, in order: check a restore's
// backup and directory, listen for clients, open the node (Raft and the
// state machine), restore the backup into it, wire the core, listen for
// HTTP. When a step fails, what the earlier ones opened is closed again.
func (s *Server) open(creds credentials) (err error) {
	var undo undoList
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	raftDir := filepath.Join(s.cfg.DataDir, "raft")
	backup, err := s.checkRestore(raftDir)
	if err != nil {
		return err
	}
	if err := s.listenClients(creds.client); err != nil {
		return err
	}
	undo.add(func() { s.ln.Close() })
	if backup != nil {
		// A start with a restore is all or nothing: a failure of any later
		// step leaves the data directory as it was found, empty, so that a
		// later start without --restore cannot serve a half-made cluster,
		// and the same command can be run again.
		undo.add(func() {
			if rerr := removeContents(raftDir); rerr != nil {
				s.log.Error("could not clean up after the failed restore", "dir", raftDir, "err", rerr)
			}
		})
	}
	if err := s.openNode(raftDir, creds); err != nil {
		return err
	}
	undo.add(func() { _ = s.node.Close() })
	if backup != nil {
		if err := s.restore(backup); err != nil {
			return fmt.Errorf("restore %s failed, and the data directory was left empty: %w", s.cfg.RestoreFile, err)
		}
	}
	s.metrics = newMetrics(s)
	s.auth.Store(newAuthTable(&s.cfg))
	s.core = core.New(corePorts(s))
	return s.listenHTTP(creds.client)
}

// checkRestore reads and checks the backup to restore, if any, and that
// the data directory is empty for it, before anything is written there.
func (s *Server) checkRestore(raftDir string) (*fsm.State, error) {
	if s.cfg.RestoreFile == "" {
		return nil, nil
	}
	backup, err := readBackup(s.cfg.RestoreFile)
	if err != nil {
		return nil, err
	}
	if err := checkEmptyForRestore(raftDir, s.cfg); err != nil {
		return nil, err
	}
	return backup, nil
}

// listenClients opens the client port (TLS when configured).
func (s *Server) listenClients(clientTLS *tls.Config) error {
	// No TCP keep-alive on client connections: pings are the liveness
	// check (before the hello, its timeout), and Go's default probes every
	// 15 s would cost an idle connection more than its pings do.
	ln, err := (&net.ListenConfig{KeepAlive: -1}).Listen(context.Background(), "tcp", s.cfg.ClientAddr)
	if err != nil {
		return fmt.Errorf("listen for clients on %s: %w", s.cfg.ClientAddr, err)
	}
	if clientTLS != nil {
		ln = tls.NewListener(ln, clientTLS)
	}
	s.ln = ln
	if _, port, _ := net.SplitHostPort(s.cfg.AdvertiseClientAddr); s.cfg.AdvertiseClientAddr == s.cfg.ClientAddr && port == "0" {
		s.cfg.AdvertiseClientAddr = ln.Addr().String() // resolves :0 in tests
	}
	return nil
}

// openNode opens the Raft log in raftDir and starts Raft.
func (s *Server) openNode(raftDir string, creds credentials) (err error) {
	cfg := s.cfg
	initial := cfg.InitialClusterState
	if cfg.RestoreFile != "" {
		initial = "new" // a restore always makes a new cluster
	}
	s.node, err = node.Open(node.Config{
		ID: cfg.NodeID, Release: cfg.Build.Version, RaftAddr: cfg.RaftAddr, Advertise: cfg.AdvertiseRaftAddr, Dir: raftDir,
		Bootstrap: cfg.Bootstrap, BootstrapAbsent: cfg.BootstrapAbsent, Join: cfg.Join, InitialState: initial, Restoring: cfg.RestoreFile != "", DirMoved: cfg.DataDirMoved, TLS: creds.raft,
		ClusterName: cfg.ClusterName, RaftSecrets: creds.raftSecrets, Insecure: cfg.RaftInsecure, NoRaftListener: cfg.RunsAlone(),
		SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval, SnapshotRetain: cfg.SnapshotRetain,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, Logger: cfg.Logger,
	})
	return err
}

// listenHTTP opens the HTTP port (metrics, health, console), when
// configured, and serves it. It is the last step that can fail.
func (s *Server) listenHTTP(clientTLS *tls.Config) (err error) {
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen for HTTP on %s: %w", s.cfg.HTTPAddr, err)
	}
	if s.cfg.HTTP.TLS {
		s.httpLn = tls.NewListener(s.httpLn, httpTLSConfig(clientTLS))
	}
	s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 5 * time.Second, ConnContext: withHTTPConn}
	s.goRun(func() {
		if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the HTTP listener (metrics, health) stopped", "addr", s.cfg.HTTPAddr, "err", err)
		}
	})
	return nil
}

func (s *Server) goRun(fn func()) {
	s.wg.Add(1)
	go func() { defer s.wg.Done(); fn() }()
}

// ClientAddr is the address the client listener is bound to.
func (s *Server) ClientAddr() net.Addr { return s.ln.Addr() }

// HTTPAddr is the address of the HTTP listener, or nil.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// RaftAddr is the address peers reach this server's Raft at.
func (s *Server) RaftAddr() string { return s.node.RaftAddr() }

// NodeID is this server's id.
func (s *Server) NodeID() string { return s.cfg.NodeID }

// Raft exposes the Raft instance (tests and admin).
func (s *Server) Raft() *raft.Raft { return s.node.Raft() }

// IsServing reports whether this server is the leader and serves clients.
func (s *Server) IsServing() bool { return s.isServing() }

func (s *Server) acceptLoop() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept failed", "err", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: don't spin
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := newConn(s, nc)
		if ok, stopping := s.addConn(c); !ok {
			// A connection accepted while the server stops is told so (E 11,
			// reconnect elsewhere), not that the server is full.
			f := wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityConnections}
			if stopping {
				f = wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeShuttingDown), Text: []byte("the server is shutting down; reconnect to another server")}
			} else {
				s.metrics.capacityRejects.WithLabelValues("connections").Inc()
			}
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = nc.Write(wire.Append(nil, &f))
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// addConn registers c. It refuses it when the server is stopping (stopping
// true) or at its connection limit.
func (s *Server) addConn(c *conn) (ok, stopping bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, true
	}
	if len(s.conns) >= s.cfg.Limits.MaxConnections {
		return false, false
	}
	s.conns[c] = struct{}{}
	s.pinger.join(c)
	s.metrics.connections.Set(float64(len(s.conns)))
	return true, false
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.pinger.leave(c)
	s.metrics.connections.Set(float64(len(s.conns)))
	s.mu.Unlock()
}

func (s *Server) isServing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving
}

// setServing is called by the core when the takeover entry is applied (true)
// or leadership is lost (false). Losing it ends every client connection with
// M, since their waiters and in-flight requests cannot be answered here.
func (s *Server) setServing(on bool) {
	s.mu.Lock()
	if on == s.serving {
		s.mu.Unlock()
		return
	}
	s.serving = on
	var drop []*conn
	if on {
		close(s.servingCh)
	} else {
		s.servingCh = make(chan struct{})
		for c := range s.conns {
			if !c.admin {
				drop = append(drop, c)
			}
		}
	}
	s.mu.Unlock()
	if len(drop) > 0 {
		m := s.notLeaderFrame()
		for _, c := range drop {
			c.fatal(m)
		}
	}
}

// waitServing waits up to d for this server to serve clients as leader. It
// returns at once when the server is not the leader at all.
func (s *Server) waitServing(d time.Duration) bool {
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return true
	}
	ch := s.servingCh
	s.mu.Unlock()
	if s.node.Raft().State() != raft.Leader {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	case <-s.stop:
		return false
	}
}

// notLeaderFrame is M with the leader's client address when this server knows it.
func (s *Server) notLeaderFrame() *wire.Frame {
	return &wire.Frame{Type: wire.TypeNotLeader, Text: []byte(s.leaderClientAddr())}
}

func (s *Server) leaderClientAddr() string {
	_, id := s.node.Raft().LeaderWithID()
	if id != "" {
		s.transferTo.Store(nil) // Raft knows the leader: the hint is no longer needed
	} else if t := s.transferTo.Load(); t != nil && *t != s.cfg.NodeID {
		// Stepped down for a transfer and no leader elected yet: the target
		// is the one about to win, and clients can start dialling it now.
		id = raft.ServerID(*t)
	} else {
		return ""
	}
	var addr string
	s.node.Read(func(st *fsm.State) { addr, _ = st.MemberAddr(string(id)) })
	if string(id) == s.cfg.NodeID && !s.isServing() {
		return "" // we are electing ourselves; don't send clients back here yet
	}
	return addr
}

// leadershipPoll bounds how long a change of leadership that Raft's
// notification channel did not deliver goes unnoticed.
const leadershipPoll = 100 * time.Millisecond

// watchLeadership reports Raft's leadership (role and term) to the core
// whenever it changes. Raft's LeaderCh keeps only the latest value, so
// true -> false -> true can arrive as true -> true: the channel only wakes
// this loop, which then reads Raft's state and term, and a periodic look
// catches what no notification announced.
func (s *Server) watchLeadership() {
	r := s.node.Raft()
	ch := r.LeaderCh()
	t := time.NewTicker(leadershipPoll)
	defer t.Stop()
	var last core.Leadership
	for {
		select {
		case <-s.stop:
			return
		case <-ch:
		case <-t.C:
		}
		// A gate, held only by tests (export_test.go): wait while it is held.
		s.watchGate.Lock()
		s.watchGate.Unlock() //nolint:staticcheck // SA2001: the empty critical section is the gate
		// Serving needs the cluster's ID too, not only Raft's leadership.
		cur := core.Leadership{Leader: s.node.Leads()}
		if cur.Leader {
			cur.Term = r.CurrentTerm()
		}
		if cur != last {
			last = cur
			s.core.LeaderChange(cur)
		}
	}
}

// Close stops the server at once, without handing leadership over and
// without telling clients: to the rest of the cluster it looks like a crash.
// What was committed is on disk (every append is fsynced).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	return s.stopAll(context.Background())
}

// Shutdown stops serving: it hands leadership to another voter when there is
// one, ends client connections with E (shutting down), and closes Raft.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
	r := s.node.Raft()
	leading := r.State() == raft.Leader
	if leading {
		// Drain first: propose nothing more and wait until every batch
		// already proposed is answered, so that no request is in Raft when
		// the sessions end. What is left unanswered was never proposed: a
		// client sends its acquires again, with the same owners, on its
		// next connection (docs/protocol.md, How a connection ends).
		s.drainProposals(ctx)
	}
	s.mu.Lock()
	for c := range s.conns {
		c.fatalErr(wire.CodeShuttingDown, "the server is shutting down; reconnect to another server")
	}
	s.mu.Unlock()
	if leading {
		if cf := r.GetConfiguration(); cf.Error() == nil && voters(cf.Configuration()) > 1 {
			if err := r.LeadershipTransfer().Error(); err != nil {
				s.log.Warn("leadership transfer before shutdown failed", "err", err)
			}
		}
	}
	return s.stopAll(ctx)
}

// voters counts the voters of c: leadership goes only to a voter, never to
// a learner still catching up.
func voters(c raft.Configuration) int {
	n := 0
	for _, m := range c.Servers {
		if m.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// drainTimeout bounds the wait for proposed batches at shutdown: a commit
// that takes longer means a lost majority, which a wait does not fix.
const drainTimeout = 5 * time.Second

// drainProposals stops the leader's core from proposing and waits until
// every batch in flight has been answered (or drainTimeout, or ctx).
func (s *Server) drainProposals(ctx context.Context) {
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-s.core.Quiesce():
	case <-t.C:
		s.log.Warn("stopping with proposed requests still unanswered after the drain", "waited", drainTimeout)
	case <-ctx.Done():
	}
}

func (s *Server) stopAll(ctx context.Context) error {
	s.ln.Close()
	close(s.stop)
	s.core.Stop()
	if s.http != nil {
		_ = s.http.Shutdown(ctx) // past ctx the process is ending anyway
	}
	// Let Raft answer every entry already proposed before shutting it down.
	drain := time.NewTimer(10 * time.Second)
	select {
	case <-s.core.Drained():
	case <-drain.C:
		s.log.Warn("stopping with Raft entries still unanswered")
	}
	drain.Stop()
	err := s.node.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// readBackup reads and checks a whole backup file.
func readBackup(file string) (*fsm.State, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("restore: open backup: %w (nothing was changed)", err)
	}
	defer func() { _ = f.Close() }() // read only
	st, err := fsm.ReadSnapshot(f)
	switch {
	case errors.Is(err, fsm.ErrSnapshotVersion):
		return nil, fmt.Errorf("restore: %s: %w (nothing was changed)", file, err)
	case err != nil:
		return nil, fmt.Errorf("restore: %s is not a valid Ticketing snapshot: %w (nothing was changed)", file, err)
	}
	return st, nil
}

// checkEmptyForRestore refuses a restore into a data directory that holds
// anything in raft/, or a cluster's state anywhere else (raft/ moved aside
// within it): the server it belongs to was a member of a cluster, and a
// restored cluster must never run beside that one.
func checkEmptyForRestore(raftDir string, cfg Config) error {
	entries, err := os.ReadDir(raftDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore: read data directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("refusing to restore %s: the data directory %s already holds state (%s); restore into an empty data directory (nothing was changed)",
			cfg.RestoreFile, cfg.DataDir, entries[0].Name())
	}
	aside, err := os.ReadDir(cfg.DataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore: read data directory: %w", err)
	}
	for _, e := range aside {
		if !e.IsDir() {
			continue
		}
		for _, marker := range []string{"CLUSTER", "MEMBER"} {
			held := filepath.Join(cfg.DataDir, e.Name(), marker)
			if _, err := os.Stat(held); err == nil {
				return fmt.Errorf("refusing to restore %s: the data directory %s holds a cluster's state (%s): this server was a member of a cluster, and a restored cluster is a new one that must never run beside it (clients given both would be granted a key twice). "+
					"Stop every server of that cluster first (or make sure it is gone), then move %s out of the data directory and run the restore again (nothing was changed)",
					cfg.RestoreFile, cfg.DataDir, held, filepath.Join(cfg.DataDir, e.Name()))
			}
		}
	}
	return nil
}

// removeContents empties dir (it was empty or absent before the restore).
func removeContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// restore loads a checked backup into this new single-node cluster before it serves.
func (s *Server) restore(st *fsm.State) error {
	deadline := time.Now().Add(30 * time.Second)
	for s.node.Raft().State() != raft.Leader {
		if time.Now().After(deadline) {
			return fmt.Errorf("this server did not become leader of its new cluster within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Raft restores only once the cluster's configuration entry is applied.
	if err := s.node.Raft().Barrier(30 * time.Second).Error(); err != nil {
		return fmt.Errorf("wait for the new cluster to settle: %w", err)
	}
	if _, err := s.node.RestoreState(st, s.cfg.RestoreMinToken); err != nil {
		return err
	}
	return nil
}

func loadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	return p, nil
}

func clientTLSConfig(t TLSFiles) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		if c.ClientCAs, err = loadCertPool(t.CAFile); err != nil {
			return nil, fmt.Errorf("tls client CA: %w", err)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// raftTLSConfig builds one config for both sides of Raft traffic: servers
// present the same certificate and verify each other against the CA.
func raftTLSConfig(t TLSFiles) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load Raft TLS certificate: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pool, err := loadCertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("raft TLS CA: %w", err)
		}
		c.RootCAs, c.ClientCAs, c.ClientAuth = pool, pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := s.ready(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	if h := s.consoleHandler(); h != nil {
		mux.Handle("/console", h)
		mux.Handle("/console/", h)
	}
	return mux
}

// ready: a member of a cluster with a known leader, and applied up to the
// commit index (a follower that is far behind is not ready).
func (s *Server) ready() (bool, string) {
	r := s.node.Raft()
	if addr, _ := r.LeaderWithID(); addr == "" {
		return false, "no known leader\n"
	}
	if r.State() == raft.Leader && !s.isServing() {
		return false, "leader taking over\n"
	}
	if lag := int64(r.CommitIndex()) - int64(r.AppliedIndex()); lag > 1000 {
		return false, fmt.Sprintf("applying the log: %d entries behind\n", lag)
	}
	return true, ""
}
