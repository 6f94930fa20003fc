package ticketing

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of TLS modes, client certificates and handshake mismatches (doc.go,
// "Connections"; docs/protocol.md, "TLS").

// makeCA returns a self-signed CA and a server certificate for 127.0.0.1
// signed by it.
func makeCA(t *testing.T) (caPEM []byte, server tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ticketing test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ticketd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestTLSModes(t *testing.T) {
	caPEM, cert := makeCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}),
		faketicketd.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))

	for name, mode := range map[string]TLSMode{"CA file": TLSCAFile(caFile), "insecure": TLSInsecureSkipVerify()} {
		t.Run(name, func(t *testing.T) {
			b := connect(t, srv.Addr(), WithTLS(mode))
			ctx := ctxFor(t)
			tk, err := b.Acquire(ctx, "tls-"+name, time.Second, 10*time.Second, 0)
			if err != nil {
				t.Fatalf("acquire over %v: %v", mode, err)
			}
			if err := tk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("system roots", func(t *testing.T) {
		// It constructs; our test CA is not a system root, so the refusal is
		// reported promptly as a certificate problem.
		b := connect(t, srv.Addr(), WithTLS(TLSSystemRoots()))
		err := b.WaitReady(ctxFor(t))
		var cv *tls.CertificateVerificationError
		if !errors.As(err, &cv) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("WaitReady: %v, want a certificate verification error", err)
		}
	})
	t.Run("plain client against TLS server", func(t *testing.T) {
		// The server closes the plain hello; a TLS handshake shows why.
		err := refusedPromptly(t, connect(t, srv.Addr()))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "uses TLS") || !strings.Contains(err.Error(), "WithTLS") {
			t.Fatalf("WaitReady: %v, want an error saying the server uses TLS", err)
		}
	})
	t.Run("bad CA files", func(t *testing.T) {
		if _, err := Connect(srv.Addr(), WithTLS(TLSCAFile(filepath.Join(dir, "missing.crt")))); err == nil {
			t.Errorf("an unreadable CA file was accepted")
		}
		empty := filepath.Join(dir, "empty.crt")
		os.WriteFile(empty, []byte("not a certificate"), 0o600)
		if _, err := Connect(srv.Addr(), WithTLS(TLSCAFile(empty))); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("a CA file without certificates: %v", err)
		}
	})
}

// pki is a test CA with a server and a client certificate for 127.0.0.1,
// all as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	ca := testcerts.New(t)
	p := pki{ca: ca.CAFile}
	p.serverCert, p.serverKey = ca.Issue(t, "server")
	p.clientCert, p.clientKey = ca.Issue(t, "client")
	return p
}

// refusedPromptly waits for WaitReady with a long context and checks that it
// returned an error before the context ended.
func refusedPromptly(t *testing.T, b *Broker) error {
	t.Helper()
	ctx := ctxFor(t)
	err := b.WaitReady(ctx)
	if err == nil {
		t.Fatal("WaitReady succeeded")
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady waited for its context instead of reporting the refusal: %v", err)
	}
	t.Logf("WaitReady: %v", err)
	return err
}

// Client certificate problems are configuration errors of Connect and
// DialAdmin.
func TestClientCertificateConfigErrors(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t)
	other := newPKI(t)
	missing := filepath.Join(dir, "missing.pem")
	for name, mode := range map[string]TLSMode{
		"TLS off":                TLSOff().WithClientCert(p.clientCert, p.clientKey),
		"missing certificate":    TLSCAFile(p.ca).WithClientCert(missing, p.clientKey),
		"missing key":            TLSSystemRoots().WithClientCert(p.clientCert, missing),
		"key of another cert":    TLSInsecureSkipVerify().WithClientCert(p.clientCert, other.clientKey),
		"certificate only":       TLSCAFile(p.ca).WithClientCert(p.clientCert, ""),
		"CA file as certificate": TLSCAFile(p.ca).WithClientCert(p.ca, p.clientKey),
	} {
		t.Run(name, func(t *testing.T) {
			if b, err := Connect("127.0.0.1:1", quiet, WithTLS(mode)); err == nil {
				b.Close()
				t.Fatalf("Connect accepted %v", mode)
			} else if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("Connect: %v", err)
			}
			if _, err := DialAdmin(context.Background(), "127.0.0.1:1", WithTLS(mode)); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("DialAdmin: %v", err)
			}
		})
	}
	b, err := Connect("127.0.0.1:1", quiet, WithTLS(TLSCAFile(p.ca).WithClientCert(p.clientCert, p.clientKey)))
	if err != nil {
		t.Fatalf("a valid client certificate: %v", err)
	}
	b.Close()
	if s := TLSCAFile(p.ca).WithClientCert(p.clientCert, p.clientKey).String(); !strings.Contains(s, p.clientCert) {
		t.Errorf("String() = %q", s)
	}
}

// What a plain client is told by servers that do not answer its hello with
// a Ticketing frame (fake servers for the cases a real one does not show).
func TestPlainHelloMismatches(t *testing.T) {
	t.Run("TLS alert", func(t *testing.T) {
		// Some TLS servers answer a plain hello with an alert record.
		srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
			c.Read()
			c.SendRaw([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46})
			<-c.Done()
		})
		err := refusedPromptly(t, connect(t, srv.Addr()))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "uses TLS") {
			t.Errorf("WaitReady: %v", err)
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
			c.Read()
			c.SendRaw([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			<-c.Done()
		})
		err := refusedPromptly(t, connect(t, srv.Addr()))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not a Ticketing frame") || !strings.Contains(err.Error(), "HTTP") {
			t.Errorf("WaitReady: %v", err)
		}
	})
	t.Run("closed without a word, not TLS", func(t *testing.T) {
		// A Ticketing server answers every hello; a peer that closes the
		// connection without a byte is another service (ticketd's Raft
		// port) or a proxy without a backend: said promptly, and the
		// broker keeps trying.
		srv := faketicketd.Start(t, func(c *faketicketd.Conn) { c.Read() })
		err := refusedPromptly(t, connect(t, srv.Addr()))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "closed the connection without answering the hello") ||
			!strings.Contains(err.Error(), "5225") {
			t.Errorf("WaitReady: %v", err)
		}
		waitUntil(t, "the broker keeps trying", func() bool { return srv.Accepted() >= 3 })
	})
}

// With TLS 1.2 the server refuses a missing client certificate during the
// handshake itself (with TLS 1.3, on the first read): the same error.
func TestMutualTLSRefusedDuringHandshake(t *testing.T) {
	p := newPKI(t)
	cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	srv := faketicketd.Start(t, faketicketd.Serve(newLocks(t), faketicketd.Ready{}), faketicketd.WithTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, MaxVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	}))
	err = refusedPromptly(t, connect(t, srv.Addr(), WithTLS(TLSCAFile(p.ca))))
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "requires a client certificate") {
		t.Errorf("WaitReady: %v", err)
	}
	rogue := newPKI(t)
	err = refusedPromptly(t, connect(t, srv.Addr(), WithTLS(TLSCAFile(p.ca).WithClientCert(rogue.clientCert, rogue.clientKey))))
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "did not accept the client certificate") {
		t.Errorf("WaitReady with a certificate from another CA: %v", err)
	}
	b := connect(t, srv.Addr(), WithTLS(TLSCAFile(p.ca).WithClientCert(p.clientCert, p.clientKey)))
	if err := b.WaitReady(ctxFor(t)); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
}

// A TLS client whose server answers in plain frames is told so.
func TestTLSHelloMismatches(t *testing.T) {
	t.Run("plain frame", func(t *testing.T) {
		srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
			c.SendRaw(wire.Append(nil, &wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeFrameTooLarge), Text: []byte("too large")}))
			<-c.Done()
		})
		err := refusedPromptly(t, connect(t, srv.Addr(), WithTLS(TLSInsecureSkipVerify())))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not use TLS") {
			t.Errorf("WaitReady: %v", err)
		}
	})
	t.Run("other bytes", func(t *testing.T) {
		srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
			c.SendRaw([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			<-c.Done()
		})
		err := refusedPromptly(t, connect(t, srv.Addr(), WithTLS(TLSInsecureSkipVerify())))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not speak TLS") || !strings.Contains(err.Error(), "SSH") {
			t.Errorf("WaitReady: %v", err)
		}
	})
}
