// Package hellodiag tells why a connection failed before a Ticketing
// server answered its hello: TLS on one side only, a peer that closed the
// connection without a word, or a peer that speaks another protocol (an
// HTTP server such as ticketd's metrics port, PostgreSQL). The Ticketing
// client and the coordination client both use it, so that a wrong port is
// reported in the same words by both.
package hellodiag

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// FirstBytes records the first bytes read through it, so that an answer
// that is not a Ticketing frame can be named.
type FirstBytes struct {
	R   io.Reader
	buf [8]byte
	n   int
}

func (f *FirstBytes) Read(p []byte) (int, error) {
	n, err := f.R.Read(p)
	if f.n < len(f.buf) && n > 0 {
		f.n += copy(f.buf[f.n:], p[:n])
	}
	return n, err
}

// Bytes are the first bytes read (up to 8).
func (f *FirstBytes) Bytes() []byte { return f.buf[:f.n] }

// Len is how many first bytes were recorded.
func (f *FirstBytes) Len() int { return f.n }

// ClosedEarly reports a connection the peer closed or reset.
func ClosedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// LooksLikeTLS reports whether b starts like a TLS record: a content type
// (change cipher spec, alert, handshake, application data) and major
// version 3.
func LooksLikeTLS(b []byte) bool {
	return len(b) >= 2 && b[0] >= 20 && b[0] <= 23 && b[1] == 3
}

// LooksLikeHTTP reports whether b starts like an HTTP answer.
func LooksLikeHTTP(b []byte) bool { return strings.HasPrefix(string(b), "HTTP/") }

// SpeaksTLS reports whether addr answers a TLS handshake. It explains a
// plain hello that the server closed without a word, which is what a TLS
// server does with it. Nothing is sent over the probe's session and the
// server's certificate does not matter: only that it answered in TLS.
func SpeaksTLS(ctx context.Context, addr string) bool {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer nc.Close()
	err = tls.Client(nc, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}).HandshakeContext(ctx)
	if err == nil {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" // a TLS alert
}

// probeTimeout bounds each probe of Foreign.
const probeTimeout = time.Second

// Foreign checks, on fresh connections, whether addr speaks HTTP or
// PostgreSQL, and if so returns the protocol's name ("an HTTP server") and
// a hint for the user; empty strings when neither answers. It is only for
// after a hello met silence or a closed connection, so a working server is
// never probed.
func Foreign(ctx context.Context, addr string) (name, hint string) {
	type result struct{ name, hint string }
	out := make(chan result, 2)
	probe := func(req []byte, match func([]byte) bool, name, hint string) {
		if b := probeAnswer(ctx, addr, req); match(b) {
			out <- result{name, hint}
			return
		}
		out <- result{}
	}
	go probe([]byte("GET / HTTP/1.0\r\n\r\n"), LooksLikeHTTP,
		"an HTTP server", "ticketd's metrics port (5227 by default) speaks HTTP; clients use the client port (5225 by default)")
	// PostgreSQL answers an SSLRequest with one byte, S or N.
	go probe([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}, func(b []byte) bool { return len(b) == 1 && (b[0] == 'S' || b[0] == 'N') },
		"a PostgreSQL server", "clients use ticketd's client port (5225 by default)")
	var found result
	for range 2 {
		if found = <-out; found.name != "" {
			break // the other probe ends with its timeout; out is buffered
		}
	}
	return found.name, found.hint
}

// probeAnswer sends req on a new connection to addr and returns the first
// bytes of the answer (nil on any failure or silence).
func probeAnswer(ctx context.Context, addr string, req []byte) []byte {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	if _, err := nc.Write(req); err != nil {
		return nil
	}
	buf := make([]byte, 16)
	n, _ := io.ReadAtLeast(nc, buf, 1)
	return buf[:n]
}

// ClosedWithoutAnswer is the explanation (a format with the address and
// the error) of a peer that closed the connection without a byte in answer
// to the hello.
const ClosedWithoutAnswer = "the server %s closed the connection without answering the hello (%v): a Ticketing server answers every hello, so this is another service or a proxy without a backend; is it ticketd's client port (5225 by default)? Its Raft port (5226) and metrics port (5227) are not for clients"
