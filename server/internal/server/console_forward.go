package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/console"
)

// consoleFromLeader reads the view of q from the leader over the client
// port: an admin session (the path ticketctl takes) that sends the admin op
// "console" with the caller's token, or with none but this server's client
// certificate when the cluster's client port is TLS.
func (s *Server) consoleFromLeader(ctx context.Context, token string, q console.Query) (*console.View, error) {
	addr := s.leaderClientAddr()
	if addr == "" {
		return nil, fmt.Errorf("this server (%s) knows no leader to read from; try again in a moment", s.cfg.NodeID)
	}
	tc, err := s.forwardTLS()
	if err != nil {
		return nil, err
	}
	req := adminwire.Request{Op: adminwire.OpConsole, Page: q.Page, Prefix: q.Prefix, After: q.After, Last: q.Last}
	if q.SortLeft {
		req.Sort, req.End = adminwire.SortLeft, q.AfterEnd
	}
	data, err := adminQuery(ctx, addr, tc, token, req)
	if err != nil {
		return nil, fmt.Errorf("reading from the leader at %s: %w", addr, err)
	}
	var v console.View
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("the leader at %s answered a view that does not decode: %w", addr, err)
	}
	return &v, nil
}

// forwardTLS is the TLS configuration of the admin session to the leader:
// nil when the client port is plain; else presenting this server's
// certificate and trusting the CA set for it (http.leader_ca), else the
// CAs this server trusts already (raft_tls.ca, which signs the servers'
// certificates in a private-CA cluster, and tls.ca), else the system's
// roots.
func (s *Server) forwardTLS() (*tls.Config, error) {
	if !s.cfg.TLS.Enabled() {
		return nil, nil
	}
	cs := s.console
	cs.tlsOnce.Do(func() {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
		if err != nil {
			cs.tlsErr = fmt.Errorf("load TLS certificate for reading from the leader: %w", err)
			return
		}
		c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		cas := []string{s.cfg.HTTP.LeaderCA}
		if cas[0] == "" {
			cas = []string{s.cfg.RaftTLS.CAFile, s.cfg.TLS.CAFile}
		}
		for _, f := range cas {
			if f == "" {
				continue
			}
			pem, err := os.ReadFile(f)
			if err != nil {
				cs.tlsErr = fmt.Errorf("read the CA file %s for checking the leader's certificate: %w", f, err)
				return
			}
			if c.RootCAs == nil {
				c.RootCAs = x509.NewCertPool()
			}
			if !c.RootCAs.AppendCertsFromPEM(pem) {
				cs.tlsErr = fmt.Errorf("the CA file %s for checking the leader's certificate holds no PEM certificate", f)
				return
			}
		}
		cs.tlsCfg = c
	})
	return cs.tlsCfg, cs.tlsErr
}

// adminQuery sends one admin request on a new admin session with the
// server at addr and returns its answer: the StatusChunk pieces joined (op
// console), checked against the final ConsoleDone.
func adminQuery(ctx context.Context, addr string, tc *tls.Config, token string, req adminwire.Request) ([]byte, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = nc.Close() }()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if tc != nil {
		host, _, _ := net.SplitHostPort(addr)
		c := tc.Clone()
		c.ServerName = host
		tlsConn := tls.Client(nc, c)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tlsConn
	}
	write := func(f *wire.Frame) error { _, err := nc.Write(wire.Append(nil, f)); return err }
	if err := write(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin, Text: []byte(token)}); err != nil {
		return nil, err
	}
	rd := wire.NewReader(nc)
	var f wire.Frame
	if err := rd.Next(&f); err != nil {
		return nil, fmt.Errorf("no answer to the hello: %w", err)
	}
	switch f.Type {
	case wire.TypeReady:
	case wire.TypeError:
		return nil, fmt.Errorf("the leader refused the session: %s", f.Text)
	default:
		return nil, fmt.Errorf("unexpected answer %s to the hello", f.Type)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	const id = 1
	if err := write(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: body}); err != nil {
		return nil, err
	}
	var out []byte
	for {
		if err := rd.Next(&f); err != nil {
			return nil, fmt.Errorf("the answer was cut off: %w", err)
		}
		switch f.Type {
		case wire.TypePing:
			if err := write(&wire.Frame{Type: wire.TypePong, Nonce: f.Nonce}); err != nil {
				return nil, err
			}
		case wire.TypeForbidden:
			return nil, fmt.Errorf("the leader refused the read: the principal may not read the console there")
		case wire.TypeError:
			return nil, fmt.Errorf("the leader ended the session: %s", f.Text)
		case wire.TypeAdminReply:
			switch f.Code {
			case adminwire.StatusChunk:
				out = append(out, f.Text...)
			case adminwire.StatusOK:
				var done adminwire.ConsoleDone
				if err := adminwire.Decode("the final answer", f.Text, &done); err != nil {
					return nil, err
				}
				if done.Size != len(out) {
					return nil, fmt.Errorf("the answer has %d bytes, the leader sent %d", len(out), done.Size)
				}
				return out, nil
			case adminwire.StatusNotLeader:
				return nil, errNotLeaderNow
			default:
				var e adminwire.ErrorReply
				if adminwire.Decode("the failure", f.Text, &e) == nil && e.Error != "" {
					return nil, fmt.Errorf("%s", e.Error)
				}
				return nil, fmt.Errorf("status %d: %s", f.Code, f.Text)
			}
		}
	}
}

// httpTLSConfig is the HTTP port's TLS: the client port's certificate, and
// a client certificate verified when one is given (a scraper or a browser
// without one still gets /metrics, and the console asks for a token).
func httpTLSConfig(client *tls.Config) *tls.Config {
	c := client.Clone()
	if c.ClientCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}
