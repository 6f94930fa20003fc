package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Raw protocol sessions, for the operations the client library does not
// offer: release by key and token (release.go) and snapshot save
// (snapshot.go). Their errors match the client library's sentinel errors so
// that they map to the same exit codes.

// aLongTimeAgo is a deadline in the past: setting it unblocks I/O at once.
var aLongTimeAgo = time.Unix(1, 0)

// cliError is an error with the ticketing sentinels it matches.
type cliError struct {
	msg   string
	kinds []error
}

func (e *cliError) Error() string   { return e.msg }
func (e *cliError) Unwrap() []error { return e.kinds }

func releaseError(kind error, format string, args ...any) error {
	return &cliError{msg: fmt.Sprintf(format, args...), kinds: []error{kind}}
}

// clientTLS builds the TLS configuration the global flags ask for, as the
// client library does; nil means plain TCP.
func (e *env) clientTLS() (*tls.Config, error) {
	switch {
	case e.g.tlsCA != "":
		pem, err := os.ReadFile(e.g.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("cannot read the TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the TLS CA file %s holds no PEM certificate", e.g.tlsCA)
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
	case e.g.tlsInsecure:
		return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}, nil
	case e.g.tls:
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	}
	return nil, nil
}

// helloSession connects to addr and completes the hello (flags: 0 or
// wire.HelloAdmin). When the node is not the leader and the session is not
// an admin one, it returns the leader's address the node named, if any.
func helloSession(ctx context.Context, addr string, tc *tls.Config, token string, flags uint8) (net.Conn, *wire.Reader, string, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, "", releaseError(ticketing.ErrUnavailable, "cannot connect to %s: %v", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if tc != nil {
		c := tc.Clone()
		if !c.InsecureSkipVerify {
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tn := tls.Client(nc, c)
		if err := tn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, nil, "", releaseError(ticketing.ErrUnavailable, "TLS handshake with %s failed: %v", addr, err)
		}
		nc = tn
	}
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: flags, Text: []byte(token)})); err != nil {
		nc.Close()
		return nil, nil, "", releaseError(ticketing.ErrUnavailable, "sending the hello to %s: %v", addr, err)
	}
	r := wire.NewReader(nc)
	var f wire.Frame
	if err := r.Next(&f); err != nil {
		nc.Close()
		return nil, nil, "", releaseError(ticketing.ErrUnavailable, "no answer to the hello from %s: %v", addr, err)
	}
	switch f.Type {
	case wire.TypeReady:
		return nc, r, "", nil
	case wire.TypeNotLeader:
		nc.Close()
		leader := string(f.Text)
		return nil, nil, leader, releaseError(ticketing.ErrUnavailable, "%s is not the leader (leader: %q)", addr, leader)
	case wire.TypeError:
		nc.Close()
		kind := ticketing.ErrUnavailable
		if f.Code == uint16(wire.CodeUnauthenticated) {
			kind = ticketing.ErrUnauthenticated
		}
		return nil, nil, "", releaseError(kind, "server %s refused the session: %s (code %d): %s", addr, wire.Code(f.Code), f.Code, f.Text)
	case wire.TypeCapacity:
		nc.Close()
		return nil, nil, "", releaseError(ticketing.ErrCapacity, "server %s refused the session: %s", addr, ticketing.CapacityReason(f.Reason))
	}
	nc.Close()
	return nil, nil, "", releaseError(ticketing.ErrUnavailable, "server %s answered the hello with an unexpected %s frame", addr, f.Type)
}
