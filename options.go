package ticketing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
)

// Option configures Connect and DialAdmin.
type Option func(*config)

type config struct {
	transport.Config // how to connect

	tlsMode      TLSMode
	observer     func(key string, token uint64, err error)
	releaseQueue int
	releaseBound time.Duration
	clusterID    string // WithClusterID, as given
}

// Defaults.
const (
	// ReleaseBound is how long a release (explicit, background or
	// compensating) keeps retrying the exact token, across reconnects,
	// measured from the call (or from when the release was queued).
	ReleaseBound = 5 * time.Second
	// DefaultReleaseQueue is the most background releases (Ticket.Close and
	// the client's compensating releases) that may be outstanding at once.
	// Each is sent at once, pipelined over the connection within its
	// in-flight limit; the bound only keeps memory finite.
	DefaultReleaseQueue = 1 << 14
	// DefaultPort is the port of an address given without one.
	DefaultPort = transport.DefaultPort
	// DefaultDialTimeout bounds one connection attempt: TCP, TLS and hello.
	DefaultDialTimeout = transport.DefaultDialTimeout
	// DefaultAnswerGrace is the least time a request waits for its final
	// answer on a connection that is alive (an acquire: in addition to its
	// wait); 3 ping intervals when that is longer. A describe or admin
	// request without an answer by then fails (an acquire is indeterminate).
	DefaultAnswerGrace = transport.DefaultAnswerGrace
	// DefaultClientPing is the interval of the client's own pings, sent only
	// when the server announces a ping interval of 0 (it sends none); 3
	// intervals without any frame from the server end the connection. It is
	// ticketd's default ping interval: a silent server is given up after
	// 1.5 s, within the 2 s failover target (docs/reliability.md).
	DefaultClientPing = transport.DefaultClientPing
	// DefaultBackoffMax caps the reconnect backoff: while an election runs,
	// a client retries at least this often, so it finds the new leader at
	// most this long after it is elected.
	DefaultBackoffMax = transport.DefaultBackoffMax
	// DialStagger is how long the broker waits for one connection attempt
	// before it also starts the next address, in parallel (as happy
	// eyeballs does); a failed attempt starts the next one at once.
	DialStagger = transport.DialStagger
)

func newConfig(opts []Option) (*config, error) {
	cfg := &config{
		Config:       transport.DefaultConfig(),
		releaseQueue: DefaultReleaseQueue,
		releaseBound: ReleaseBound,
	}
	for _, o := range opts {
		o(cfg)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.releaseQueue < 1 {
		return nil, configError(nil, "the release queue size must be at least 1")
	}
	pin, err := transport.NewPin(cfg.clusterID)
	if err != nil {
		return nil, err
	}
	cfg.Pin = pin
	tc, err := cfg.tlsMode.build()
	if err != nil {
		return nil, err
	}
	cfg.TLS = tc
	if cfg.Logger == nil {
		// A library does not write into the application's logs uninvited:
		// without WithLogger, background events go nowhere (the release
		// observer still sees every outcome).
		cfg.Logger = transport.DefaultConfig().Logger
	}
	return cfg, nil
}

// WithToken sets the client token sent in the hello; it must match one of
// the server's client_tokens (at most 1024 bytes).
func WithToken(token string) Option { return func(c *config) { c.Token = token } }

// WithTLS selects the TLS mode: TLSOff (the default), TLSSystemRoots,
// TLSCAFile or TLSInsecureSkipVerify, optionally with a client certificate
// for mutual TLS (TLSMode.WithClientCert).
func WithTLS(m TLSMode) Option { return func(c *config) { c.tlsMode = m } }

// WithReleaseObserver sets a function called with the outcome of every
// background release: those queued by Ticket.Close and the compensating
// releases the client makes on its own (a grant that arrived after its
// acquire was cancelled, or too late for its work budget). err is nil when
// the server answered "released", ErrNotHeld when it answered "not held",
// ErrReleaseDropped
// when the queue was full, and another error when no final answer came
// within ReleaseBound. It runs on the client's own goroutines and must not
// block.
func WithReleaseObserver(f func(key string, token uint64, err error)) Option {
	return func(c *config) { c.observer = f }
}

// WithLogger sets the logger for background events (failed background
// releases at Warn, a release that found the ticket already ended at Debug,
// reconnects at Debug/Info, each kind of reconnect line at most once a
// second). Without it the broker logs nothing: it never writes to
// slog.Default() on its own.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.Logger = l } }

// WithDialTimeout bounds one connection attempt (TCP connect, TLS handshake
// and hello). The default is DefaultDialTimeout.
func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.DialTimeout = d } }

// WithDialer makes the client open its TCP connections with dial instead of
// a net.Dialer: through a proxy or tunnel, from another network namespace,
// or with socket options of its own. dial gets network "tcp" and the
// server's address; ctx carries the dial timeout (WithDialTimeout) and must
// be obeyed. TLS and the hello run over the connection it returns.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.Dialer = dial }
}

// WithReleaseQueue sets how many background releases (Ticket.Close and
// compensating releases) may be outstanding at once (default
// DefaultReleaseQueue). Beyond it, Ticket.Close drops the release and
// reports ErrReleaseDropped.
func WithReleaseQueue(n int) Option { return func(c *config) { c.releaseQueue = n } }

type tlsKind int

const (
	tlsOff tlsKind = iota
	tlsSystem
	tlsCAFile
	tlsInsecure
)

// TLSMode is one of the four TLS modes; build it with TLSOff,
// TLSSystemRoots, TLSCAFile or TLSInsecureSkipVerify, and add a client
// certificate with WithClientCert when the servers require one (mutual TLS).
type TLSMode struct {
	kind     tlsKind
	caFile   string
	certFile string // client certificate (PEM), "" for none
	keyFile  string // its private key (PEM)
}

// TLSOff is plain TCP (the default).
func TLSOff() TLSMode { return TLSMode{kind: tlsOff} }

// TLSSystemRoots is TLS verified against the system's trusted roots.
func TLSSystemRoots() TLSMode { return TLSMode{kind: tlsSystem} }

// TLSCAFile is TLS verified against the CA certificates in a PEM file. The
// file is read by Connect; an unreadable file or one without certificates is
// a configuration error.
func TLSCAFile(path string) TLSMode { return TLSMode{kind: tlsCAFile, caFile: path} }

// TLSInsecureSkipVerify is TLS without any verification of the server's
// certificate. For tests only: it offers no protection against an attacker
// on the network.
func TLSInsecureSkipVerify() TLSMode { return TLSMode{kind: tlsInsecure} }

// WithClientCert returns m presenting the client certificate in certFile,
// with its private key in keyFile (both PEM, as for tls.LoadX509KeyPair), to
// servers that require one (ticketd's tls.ca, mutual TLS):
//
//	ticketing.WithTLS(ticketing.TLSCAFile("ca.crt").WithClientCert("client.crt", "client.key"))
//
// It applies to TLSSystemRoots, TLSCAFile and TLSInsecureSkipVerify; on
// TLSOff it is a configuration error. The files are read once, by Connect or
// DialAdmin: a missing or unreadable file, or a key that does not match the
// certificate, is a configuration error (ErrInvalidArgument). A certificate
// renewed on disk is picked up by the next Broker or Admin. The
// certificate is sent whenever a server asks for one; a server that does not
// accept it refuses the connection, which calls report promptly as
// ErrUnauthenticated while the broker keeps retrying.
func (m TLSMode) WithClientCert(certFile, keyFile string) TLSMode {
	m.certFile, m.keyFile = certFile, keyFile
	return m
}

func (m TLSMode) String() string {
	s := "no TLS"
	switch m.kind {
	case tlsSystem:
		s = "TLS (system roots)"
	case tlsCAFile:
		s = "TLS (CA file " + m.caFile + ")"
	case tlsInsecure:
		s = "TLS (insecure, no verification)"
	}
	if m.certFile != "" || m.keyFile != "" {
		s += " with client certificate " + m.certFile
	}
	return s
}

func (m TLSMode) build() (*tls.Config, error) {
	tc, err := m.buildBase()
	if err != nil || (m.certFile == "" && m.keyFile == "") {
		return tc, err
	}
	switch {
	case tc == nil:
		return nil, configError(nil, "a client certificate needs TLS: add it to TLSSystemRoots, TLSCAFile or TLSInsecureSkipVerify, not TLSOff")
	case m.certFile == "" || m.keyFile == "":
		return nil, configError(nil, "a client certificate needs both files, the certificate and its private key (got certificate %q, key %q)", m.certFile, m.keyFile)
	}
	cert, err := tls.LoadX509KeyPair(m.certFile, m.keyFile)
	if err != nil {
		return nil, configError(err, "cannot load the TLS client certificate %s with key %s", m.certFile, m.keyFile)
	}
	// Sent whatever CAs the server's request names, so that a certificate
	// the server does not trust is refused as such ("bad certificate",
	// "unknown certificate authority") rather than silently left out.
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return tc, nil
}

func (m TLSMode) buildBase() (*tls.Config, error) {
	switch m.kind {
	case tlsOff:
		return nil, nil
	case tlsSystem:
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	case tlsInsecure:
		return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}, nil
	case tlsCAFile:
		pem, err := os.ReadFile(m.caFile)
		if err != nil {
			return nil, configError(err, "cannot read the TLS CA file")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, configError(nil, "the TLS CA file %s holds no PEM certificate", m.caFile)
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
	}
	return nil, configError(nil, "unknown TLS mode")
}

// configError is a bad configuration: it matches ErrInvalidArgument.
func configError(cause error, format string, args ...any) error {
	return transport.ConfigError(cause, format, args...)
}

// parseAddrs splits a comma-separated list of host:port addresses; a host
// without a port gets DefaultPort.
func parseAddrs(s string) ([]string, error) { return transport.ParseAddrs(s) }
