package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Config is how a client connects. The fronts build it from their options;
// DefaultConfig has the defaults.
type Config struct {
	Token       string
	TLS         *tls.Config // nil: plain TCP
	Logger      *slog.Logger
	DialTimeout time.Duration
	Dialer      func(ctx context.Context, network, addr string) (net.Conn, error) // nil: a net.Dialer
	BackoffBase time.Duration
	BackoffMax  time.Duration
	AnswerGrace time.Duration // least time a request waits for its answer on a live connection
	ClientPing  time.Duration // our ping interval when the server sends none
	DialStagger time.Duration // before dialing the next address while one attempt is still running
	Pin         *Pin          // the cluster this client serves; nil: the first one reported

	OnBackoff    func(time.Duration) // tests: called when the client backs off
	OnLateAnswer func()              // tests: called when the reader has taken an abandoned call's answer off the table
}

// Defaults (package ticketing documents them).
const (
	DefaultPort        = "5225"
	DefaultDialTimeout = 5 * time.Second
	DefaultAnswerGrace = 10 * time.Second
	DefaultClientPing  = 500 * time.Millisecond
	DefaultBackoffMax  = 500 * time.Millisecond
	DialStagger        = 250 * time.Millisecond
	// defaultBackoffBase is the first reconnect delay; it doubles per
	// failed round up to the cap.
	defaultBackoffBase = 25 * time.Millisecond
)

// DefaultConfig is the configuration with every default and a logger that
// discards: a library does not write into the application's logs uninvited.
func DefaultConfig() Config {
	return Config{
		Logger:      slog.New(slog.DiscardHandler),
		DialTimeout: DefaultDialTimeout,
		BackoffBase: defaultBackoffBase,
		BackoffMax:  DefaultBackoffMax,
		AnswerGrace: DefaultAnswerGrace,
		ClientPing:  DefaultClientPing,
		DialStagger: DialStagger,
		Pin:         &Pin{},
	}
}

// Check reports a configuration the client cannot use.
func (c *Config) Check() error {
	if len(c.Token) > wire.MaxToken {
		return ConfigError(nil, "the token is %d bytes, at most %d are allowed", len(c.Token), wire.MaxToken)
	}
	if c.DialTimeout <= 0 {
		return ConfigError(nil, "the dial timeout must be positive")
	}
	return nil
}

// ParseAddrs splits a comma-separated list of host:port addresses; a host
// without a port gets DefaultPort.
func ParseAddrs(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(a); err == nil {
			if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || n == 0 || host == "" {
				return nil, ConfigError(nil, "address %q needs a host and a port 1..65535 (or a host alone for port %s)", a, DefaultPort)
			}
		} else {
			// A host alone (name, IPv4, [IPv6] or bare IPv6) means the
			// default port.
			host := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
			if host == "" || strings.ContainsAny(host, "[]/ ") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
				return nil, ConfigError(nil, "address %q is not host or host:port", a)
			}
			a = net.JoinHostPort(host, DefaultPort)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, ConfigError(nil, "no server address given")
	}
	return out, nil
}
