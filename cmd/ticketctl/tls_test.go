package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/server"
	"github.com/ticketing-io/ticketing/internal/testcluster"
)

// writePKI writes a CA and a server and a client certificate signed by it
// into dir; it returns the files' paths by name (ca.crt, server.crt, ...).
func writePKI(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	write := func(name, typ string, der []byte) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ticketctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.crt", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		key := newKey()
		usage := x509.ExtKeyUsageServerAuth
		if name == "client" {
			usage = x509.ExtKeyUsageClientAuth
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "PRIVATE KEY", keyDER)
	}
	return files
}

// Against a server that requires client certificates, --tls-cert and
// --tls-key make every command work; without them, or without TLS, the
// failure says why.
func TestEndToEndMutualTLS(t *testing.T) {
	pki := writePKI(t, t.TempDir())
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: pki["server.crt"], KeyFile: pki["server.key"], CAFile: pki["ca.crt"]}
	}))
	addr := "--addr=" + c.Addr(0)
	mtls := []string{addr, "--tls-ca", pki["ca.crt"], "--tls-cert", pki["client.crt"], "--tls-key", pki["client.key"]}

	var got acquireResult
	decodeOne(t, mustCtl(t, exitOK, append([]string{"acquire", "k", "--lease", "30s", "-o", "json"}, mtls...)...), &got)
	mustCtl(t, exitOK, append([]string{"describe", "k"}, mtls...)...)
	mustCtl(t, exitOK, append([]string{"release", "k", fmt.Sprint(got.Token)}, mtls...)...)
	mustCtl(t, exitNotAcquired, append([]string{"release", "k", fmt.Sprint(got.Token)}, mtls...)...)
	mustCtl(t, exitOK, append([]string{"status"}, mtls...)...)
	file := filepath.Join(t.TempDir(), "backup.snap")
	mustCtl(t, exitOK, append([]string{"snapshot", "save", file}, mtls...)...)
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Errorf("snapshot file: %v, %v", fi, err)
	}

	// A TLS client against a plain server is told to drop TLS.
	plain := testcluster.Start(t, 1)
	code, _, stderr := ctl(t, "status", "--addr", plain.Addr(0), "--tls-insecure")
	if code != exitError || !strings.Contains(stderr, "does not use TLS") || !strings.Contains(stderr, "leave out --tls") {
		t.Errorf("TLS against a plain server: exit %d, stderr %q", code, stderr)
	}

	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"no client certificate", []string{addr, "--tls-ca", pki["ca.crt"]}, []string{"authentication failed", "client certificate", "--tls-cert"}},
		{"no TLS", []string{addr}, []string{"uses TLS", "add --tls-ca FILE, --tls or --tls-insecure"}},
		{"unreadable key", []string{addr, "--tls-ca", pki["ca.crt"], "--tls-cert", pki["client.crt"], "--tls-key", pki["ca.crt"]}, []string{"client certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"acquire", "k2", "--lease", "5s"},
				{"release", "k", "1"},
				{"status"},
				{"snapshot", "save", filepath.Join(t.TempDir(), "s.snap")},
			} {
				code, _, stderr := ctl(t, append(args, tc.flags...)...)
				if code != exitError {
					t.Errorf("%q: exit %d, want %d; stderr %q", args, code, exitError, stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("%q: stderr %q lacks %q", args, stderr, w)
					}
				}
			}
		})
	}
}
