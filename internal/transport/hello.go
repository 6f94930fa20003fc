package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing/internal/hellodiag"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// The hello: the first frame on a connection, and the server's answer to
// it (Y, or a refusal: M, E, B).

// hello is the result of a handshake.
type hello struct {
	interval time.Duration
	idle     time.Duration // ReadyIdlePings: the idle ping interval
	maxIn    uint32
	nodeID   string
	leader   bool
	sessions bool
	// The server's cluster ID, when it reports one (ReadyClusterID; all
	// zero: it has none yet). A server older than cluster IDs reports none.
	cluster        wire.ClusterID
	reportsCluster bool
}

// helloError is a failed handshake. rejected marks refusals that will not go
// away by themselves (auth, version, certificate, connection limit): callers
// get them promptly instead of waiting.
type helloError struct {
	addr     string
	err      error // what callers see
	hint     string
	rejected bool
	reason   string // the kind of refusal, the same from every server; "" = from err
}

func (e *helloError) Error() string  { return e.err.Error() }
func (e *helloError) detail() string { return DetailOf(e.err) }
func (e *helloError) Unwrap() error  { return e.err }

// HelloRefusal is what a failed hello reports to the caller: the server's
// own error (a *ServerError, a *CapacityError, a refused certificate) rather
// than the attempt around it.
func HelloRefusal(err error) error {
	var he *helloError
	if errors.As(err, &he) {
		return he.err
	}
	return err
}

// handshake sends H and reads the server's first frame. ctx bounds the
// diagnosis of a failure (see helloReadError); nc's deadline bounds the rest.
func handshake(ctx context.Context, nc net.Conn, addr, token string, ts *tlsState, flags uint8) (hello, *wire.Reader, error) {
	buf := wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: flags, Text: []byte(token)})
	first := &firstBytes{R: nc}
	r := wire.NewReader(first)
	var f wire.Frame
	if _, err := nc.Write(buf); err != nil {
		// A server that refused the connection may have said why (a TLS
		// alert, an E frame) before closing it.
		if rerr := r.Next(&f); rerr != nil {
			if he := helloReadError(ctx, addr, ts, rerr, first.Bytes()); he.rejected {
				return hello{}, nil, he
			}
		} else if f.Type == wire.TypeError || f.Type == wire.TypeCapacity {
			return helloAnswer(addr, &f, r)
		}
		return hello{}, nil, &helloError{addr: addr, err: fmt.Errorf("sending the hello to %s: %w", addr, err)}
	}
	if err := readHelloAnswer(ctx, nc, r, &f, addr, ts, first); err != nil {
		return hello{}, nil, err
	}
	return helloAnswer(addr, &f, r)
}

// helloSilence is how long a silent answer to the hello is waited for before
// the client checks, on a second connection, whether the address speaks
// another protocol (HTTP, PostgreSQL) instead of failing only at the dial
// timeout.
const helloSilence = time.Second

// readHelloAnswer reads the server's first frame. A peer that stays silent
// for helloSilence, or that closes the connection without a byte, is probed
// for a foreign protocol so that a wrong port is named at once.
func readHelloAnswer(ctx context.Context, nc net.Conn, r *wire.Reader, f *wire.Frame, addr string, ts *tlsState, first *firstBytes) error {
	dl, hasDL := ctx.Deadline()
	if !hasDL || time.Until(dl) > helloSilence {
		nc.SetReadDeadline(time.Now().Add(helloSilence))
		err := r.Next(f)
		if err == nil {
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || first.Len() > 0 || ctx.Err() != nil {
			return helloReadError(ctx, addr, ts, err, first.Bytes())
		}
		if he := foreignProtocol(ctx, addr, ts != nil); he != nil {
			return he
		}
		if hasDL {
			nc.SetReadDeadline(dl)
		} else {
			nc.SetReadDeadline(time.Time{})
		}
	}
	if err := r.Next(f); err != nil {
		return helloReadError(ctx, addr, ts, err, first.Bytes())
	}
	return nil
}

// helloAnswer interprets the server's answer to the hello.
func helloAnswer(addr string, f *wire.Frame, r *wire.Reader) (hello, *wire.Reader, error) {
	switch f.Type {
	case wire.TypeReady:
		h := hello{interval: time.Duration(f.Interval) * time.Millisecond, maxIn: f.Count, nodeID: string(f.Text),
			leader: f.Flags&wire.ReadyLeader != 0, sessions: f.Flags&wire.ReadySessions != 0,
			cluster: f.ClusterID, reportsCluster: f.Flags&wire.ReadyClusterID != 0}
		if f.Flags&wire.ReadyIdlePings != 0 && f.IdleInterval > f.Interval {
			h.idle = time.Duration(f.IdleInterval) * time.Millisecond
		}
		return h, r, nil
	case wire.TypeNotLeader:
		nl := &NotLeaderError{Addr: addr, LeaderAddr: string(f.Text)}
		return hello{}, nil, &helloError{addr: addr, err: nl, hint: nl.LeaderAddr}
	case wire.TypeError:
		se := &ServerError{Addr: addr, Code: ErrorCode(f.Code), Message: string(f.Text)}
		rej := se.Code == ErrorCode(wire.CodeUnauthenticated) || se.Code == ErrorCode(wire.CodeUnsupportedVersion) || se.Code == ErrorCode(wire.CodeInvalidArgument)
		return hello{}, nil, &helloError{addr: addr, err: se, rejected: rej}
	case wire.TypeCapacity:
		return hello{}, nil, &helloError{addr: addr, err: &CapacityError{Addr: addr, Reason: CapacityReason(f.Reason)}, rejected: true}
	}
	return hello{}, nil, &helloError{addr: addr, err: fmt.Errorf("the server %s answered the hello with an unexpected %s frame", addr, f.Type)}
}

// Explaining connections that fail before the hello is answered: TLS on one
// side only, a client certificate the server refuses, a server that does not
// speak the protocol. These are configuration mistakes that do not go away by
// themselves, so most are reported as persistent refusals (helloError
// rejected): WaitReady and calls return them promptly while the broker keeps
// retrying with backoff.

// refusedError is a connection the server refused at the TLS layer, or one
// with a peer that does not speak the protocol as configured. auth marks a
// client certificate the server did not accept (or required and did not
// get): it matches ErrUnauthenticated.
type refusedError struct {
	msg   string
	cause error
	auth  bool
}

func (e *refusedError) Error() string   { return e.msg }
func (e *refusedError) Unwrap() error   { return e.cause }
func (e *refusedError) Is(t error) bool { return e.auth && t == ErrUnauthenticated }

func refused(addr string, auth bool, cause error, format string, args ...any) *helloError {
	// The format, without the address, names the kind of refusal.
	return &helloError{addr: addr, rejected: true, reason: format,
		err: &refusedError{msg: fmt.Sprintf(format, args...), cause: cause, auth: auth}}
}

// firstBytes records the first bytes read from a connection, so that a hello
// answered with something other than a Ticketing frame can be named.
type firstBytes = hellodiag.FirstBytes

// alertCodes maps the text of a TLS alert to its number. crypto/tls reports
// an alert received from the peer as a *net.OpError with Op "remote error"
// around an unexported type whose text is that of tls.AlertError.
var alertCodes = sync.OnceValue(func() map[string]tls.AlertError {
	m := make(map[string]tls.AlertError, 256)
	for i := range 256 {
		m[tls.AlertError(i).Error()] = tls.AlertError(i)
	}
	return m
})

// remoteAlert reports the TLS alert the server sent, if err is one.
func remoteAlert(err error) (tls.AlertError, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	a, ok := alertCodes()[op.Err.Error()]
	return a, ok
}

// TLS alert numbers (RFC 8446, 5246) that may refuse a client certificate.
const (
	alertHandshakeFailure       = 40
	alertBadCertificate         = 42
	alertUnsupportedCertificate = 43
	alertCertificateRevoked     = 44
	alertCertificateExpired     = 45
	alertCertificateUnknown     = 46
	alertUnknownCA              = 48
	alertAccessDenied           = 49
	alertCertificateRequired    = 116
)

// tlsState is what one connection's TLS handshake showed about client
// certificates.
type tlsState struct {
	haveCert bool        // a client certificate is configured
	asked    atomic.Bool // the server asked for one
}

// watchCertRequest makes tc record in the returned state whether the server
// asks for a client certificate. Without one configured, none is sent (as
// without the hook).
func watchCertRequest(tc *tls.Config) *tlsState {
	ts := &tlsState{haveCert: tc.GetClientCertificate != nil}
	get := tc.GetClientCertificate
	tc.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		ts.asked.Store(true)
		if get == nil {
			return &tls.Certificate{}, nil
		}
		return get(cri)
	}
	return ts
}

// alertRefusal explains a TLS alert sent by the server during the handshake
// or in answer to the hello (with TLS 1.3 the server checks the client's
// certificate after the client's side of the handshake is done, so its
// refusal arrives on the first read).
func alertRefusal(addr string, a tls.AlertError, err error, ts *tlsState) *helloError {
	certAlert := false
	switch a {
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateRevoked, alertCertificateExpired,
		alertCertificateUnknown, alertUnknownCA, alertAccessDenied:
		certAlert = true
	}
	switch {
	case a == alertCertificateRequired,
		!ts.haveCert && (certAlert || (a == alertHandshakeFailure && ts.asked.Load())):
		// TLS 1.3 says certificate_required; TLS 1.2 only handshake_failure,
		// after asking for a certificate.
		return refused(addr, true, err, "the server %s requires a client certificate (mutual TLS) and refused the connection without one (%v); configure one with TLSMode.WithClientCert", addr, err)
	case certAlert:
		return refused(addr, true, err, "the server %s did not accept the client certificate (%v): check that it is signed by a CA the server trusts (its tls.ca), not expired, and usable for client authentication", addr, err)
	}
	return refused(addr, false, err, "the server %s refused the TLS connection (%v)", addr, err)
}

// tlsHandshakeError explains a failed TLS handshake.
func tlsHandshakeError(addr string, err error, ts *tlsState) *helloError {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return &helloError{addr: addr, err: fmt.Errorf("TLS handshake with %s failed: %w", addr, err), rejected: true}
	}
	if a, ok := remoteAlert(err); ok {
		return alertRefusal(addr, a, err, ts)
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		if looksLikeFrame(rh.RecordHeader[:]) {
			return refused(addr, false, err, "the server %s does not use TLS: it answered the TLS handshake with a plain Ticketing frame (%v); connect without TLS, or enable TLS on the server", addr, err)
		}
		return refused(addr, false, err, "the server %s does not speak TLS: its first bytes %q are not a TLS record (%v); is it a Ticketing server, and does it use TLS?", addr, rh.RecordHeader[:], err)
	}
	if closedEarly(err) {
		return &helloError{addr: addr, err: fmt.Errorf("the server %s closed the connection during the TLS handshake (is it using TLS?): %w", addr, err)}
	}
	return &helloError{addr: addr, err: fmt.Errorf("TLS handshake with %s failed: %w", addr, err)}
}

// helloReadError explains why no answer to the hello could be read. first
// holds the bytes received before the failure; ts is nil without TLS.
func helloReadError(ctx context.Context, addr string, ts *tlsState, err error, first []byte) *helloError {
	tlsOn := ts != nil
	if a, ok := remoteAlert(err); ok && tlsOn {
		return alertRefusal(addr, a, err, ts)
	}
	var we *wire.Error
	if errors.As(err, &we) {
		if !tlsOn && looksLikeTLS(first) {
			return refused(addr, false, err, "the server %s uses TLS: it answered the plain hello with a TLS record; this client connects without TLS, configure it with WithTLS", addr)
		}
		return refused(addr, false, err, "the server %s answered the hello with bytes that are not a Ticketing frame (%q: %v); is it a Ticketing server, and does it use TLS?", addr, first, err)
	}
	if len(first) == 0 && closedEarly(err) {
		if !tlsOn && speaksTLS(ctx, addr) {
			return refused(addr, false, err, "the server %s uses TLS: it closed the connection on the plain hello (%v) and answers a TLS handshake; this client connects without TLS, configure it with WithTLS", addr, err)
		}
		if he := foreignProtocol(ctx, addr, tlsOn); he != nil {
			return he
		}
		// A Ticketing server answers every hello (Y, M, E or B) before it
		// closes a connection; ticketd's Raft port closes it without a word.
		return refused(addr, false, err, closedWithoutAnswer, addr, err)
	}
	return &helloError{addr: addr, err: fmt.Errorf("no answer to the hello from %s: %w", addr, err)}
}

// closedWithoutAnswer is the refusal of a peer that closed the connection
// without a byte in answer to the hello. From an address that has served a
// session before it is not a refusal (see Broker.attemptFailed): that server
// speaks the protocol and stopped mid-hello.
const closedWithoutAnswer = hellodiag.ClosedWithoutAnswer

func closedEarly(err error) bool { return hellodiag.ClosedEarly(err) }
func looksLikeTLS(b []byte) bool { return hellodiag.LooksLikeTLS(b) }

// looksLikeFrame reports whether the 5 bytes h are the header of a frame a
// Ticketing server sends.
func looksLikeFrame(h []byte) bool {
	if len(h) < wire.HeaderLen+1 {
		return false
	}
	n := binary.BigEndian.Uint32(h)
	return n >= 1 && n <= wire.MaxFrame && strings.IndexByte("YGWQXBRNMEIVPO", h[4]) >= 0
}

func speaksTLS(ctx context.Context, addr string) bool { return hellodiag.SpeaksTLS(ctx, addr) }

// foreignProtocol checks, on fresh connections, whether addr speaks HTTP
// (ticketd's metrics port, a web server) or PostgreSQL, and if so returns a
// refusal that names it. It returns nil when neither answers. Only used
// after the hello met silence or a closed connection, so a working server is
// never probed.
func foreignProtocol(ctx context.Context, addr string, tlsOn bool) *helloError {
	if tlsOn {
		return nil // the probes speak plain TCP
	}
	name, hint := hellodiag.Foreign(ctx, addr)
	if name == "" {
		return nil
	}
	return refused(addr, false, nil, "%s is %s, not a Ticketing server: it did not answer the hello but answers that protocol; %s", addr, name, hint)
}
