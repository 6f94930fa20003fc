package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
)

var releaseCmd = &command{
	name:    "release",
	args:    "KEY TOKEN",
	summary: "release KEY if TOKEN still holds it",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) != 2 {
				return usageErrorf("release takes KEY TOKEN, got %d arguments", len(args))
			}
			token, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || token == 0 {
				return usageErrorf("release: TOKEN %q is not a ticket token (a positive integer)", args[1])
			}
			return runRelease(e, args[0], token)
		}
	},
}

func init() {
	commandDetails["release"] = `A release never ends a different grant: it succeeds only while TOKEN is
KEY's current holder.

Exit codes: 0 released; 2 not held (the ticket expired or was released
before); 3 capacity reject; 4 indeterminate (the answer was lost: the
ticket may still be held until its lease expires); 1 other.
`
}

type releaseResult struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Released bool   `json:"released"`
}

func runRelease(e *env, key string, token uint64) error {
	ctx, cancel := e.context(0)
	defer cancel()
	if err := releaseToken(ctx, e, key, token); err != nil {
		return err
	}
	res := releaseResult{Key: key, Token: token, Released: true}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "released key %s token %d\n", key, token)
	})
}

// The client library releases only the Tickets it acquired itself, while
// ticketctl releases a ticket that another process acquired, by key and
// token. releaseToken therefore speaks the protocol (docs/protocol.md)
// directly: one connection to the leader (following M), one L frame, one
// final answer. Its errors match the client library's sentinel errors so
// that they map to the same exit codes.

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

func releaseToken(ctx context.Context, e *env, key string, token uint64) error {
	if len(key) == 0 || len(key) > ticketing.MaxKey {
		return releaseError(ticketing.ErrInvalidArgument, "release: the key must be 1..%d bytes", ticketing.MaxKey)
	}
	tc, err := e.clientTLS()
	if err != nil {
		return err
	}
	queue := e.addrList()
	if len(queue) == 0 {
		return usageErrorf("--addr is empty")
	}
	hops := len(queue) + 3
	var lastErr error
	for len(queue) > 0 && hops > 0 {
		addr := queue[0]
		queue = queue[1:]
		hops--
		nc, r, leader, err := helloSession(ctx, addr, tc, e.g.token)
		if err != nil {
			lastErr = err
			if leader != "" {
				queue = append([]string{leader}, queue...)
			}
			if errors.Is(err, ticketing.ErrUnauthenticated) || ctx.Err() != nil {
				return err
			}
			continue
		}
		return releaseOn(ctx, nc, r, addr, key, token)
	}
	return fmt.Errorf("release of token %d for key %q: no leader reachable through %s: %w", token, key, e.g.addrs, lastErr)
}

// helloSession connects to addr and completes the hello. When the node is
// not the leader it returns the leader's address it named, if any.
func helloSession(ctx context.Context, addr string, tc *tls.Config, token string) (net.Conn, *wire.Reader, string, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, "", releaseError(ticketing.ErrUnavailable, "cannot connect to %s: %v", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
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
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Text: []byte(token)})); err != nil {
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

// releaseOn sends one release on an established session and waits for its
// final answer. Once L may have been sent, a lost answer is indeterminate.
func releaseOn(ctx context.Context, nc net.Conn, r *wire.Reader, addr, key string, token uint64) error {
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	const id = 1
	lost := func(why string, args ...any) error {
		return releaseError(ticketing.ErrIndeterminate,
			"release of token %d for key %q: outcome unknown: %s; the ticket may still be held until its lease expires",
			token, key, fmt.Sprintf(why, args...))
	}
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeRelease, ID: id, Token: token, Key: []byte(key)})); err != nil {
		return lost("sending to %s failed: %v", addr, err)
	}
	for {
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			return lost("no answer from %s: %v", addr, err)
		}
		switch f.Type {
		case wire.TypePing:
			if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})); err != nil {
				return lost("connection to %s failed: %v", addr, err)
			}
			continue
		case wire.TypeNotLeader:
			return lost("%s stopped leading before answering", addr)
		case wire.TypeError:
			return lost("%s ended the session: %s (code %d): %s", addr, wire.Code(f.Code), f.Code, f.Text)
		}
		if f.ID != id {
			continue
		}
		switch f.Type {
		case wire.TypeReleased:
			return nil
		case wire.TypeNotHeld:
			return releaseError(ticketing.ErrNotHeld, "release of token %d for key %q: the token does not hold the key (it expired or was released before)", token, key)
		case wire.TypeCapacity:
			return releaseError(ticketing.ErrCapacity, "release of token %d for key %q: rejected by a server capacity limit: %s", token, key, ticketing.CapacityReason(f.Reason))
		}
		return lost("%s answered with an unexpected %s frame", addr, f.Type)
	}
}
