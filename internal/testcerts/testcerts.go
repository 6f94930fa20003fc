// Package testcerts makes a throwaway certificate authority and certificates
// signed by it, written as PEM files, for tests of TLS and mutual TLS.
//
// Every certificate it issues is valid for 127.0.0.1 and localhost, for
// both server and client authentication, for an hour either side of now.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority whose files live in a test's temp dir.
type CA struct {
	// CAFile is the CA certificate as a PEM file.
	CAFile string
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate

	key *ecdsa.PrivateKey
	dir string
}

var serial atomic.Int64

// New makes a CA in a fresh t.TempDir(). Each CA has its own subject name,
// so two of them are told apart by name, not only by key.
func New(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	n := serial.Add(1)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: fmt.Sprintf("testcerts CA %d", n)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.CAFile = ca.write(t, "ca.crt", "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate and key with common name name, signed by the
// CA, and returns their PEM files (name.crt, name.key in the CA's dir).
func (ca *CA) Issue(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	return ca.IssueSAN(t, name, nil, nil)
}

// IssueSAN is Issue with extra DNS and URI subject alternative names (for
// tests that map a client certificate's SAN to an identity).
func (ca *CA) IssueSAN(t testing.TB, name string, dns []string, uris []*url.URL) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    append([]string{"localhost"}, dns...),
		URIs:        uris,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name+".crt", "CERTIFICATE", der), ca.write(t, name+".key", "PRIVATE KEY", keyDER)
}

// IssueRaft makes a Raft certificate for server id, as docs/deployment.md
// has operators make them: the subject CN and the URI SAN
// ticketing://node/ID name the node id; with a cluster name, the URI SAN is
// ticketing://CLUSTER/node/ID instead (ticketd's cluster_name). The files
// are CLUSTER-ID.crt and .key (ID.crt without a cluster).
func (ca *CA) IssueRaft(t testing.TB, cluster, id string) (certFile, keyFile string) {
	t.Helper()
	u, file := &url.URL{Scheme: "ticketing", Host: "node", Path: "/" + id}, id
	if cluster != "" {
		u, file = &url.URL{Scheme: "ticketing", Host: cluster, Path: "/node/" + id}, cluster+"-"+id
	}
	certFile, keyFile = ca.IssueSAN(t, id, nil, []*url.URL{u})
	// IssueSAN names the files after the CN: give each cluster's its own.
	for _, f := range []*string{&certFile, &keyFile} {
		renamed := filepath.Join(ca.dir, file+filepath.Ext(*f))
		if renamed != *f {
			if err := os.Rename(*f, renamed); err != nil {
				t.Fatal(err)
			}
			*f = renamed
		}
	}
	return certFile, keyFile
}

// TLSCert issues a certificate named name and returns it loaded, for a
// tls.Config.
func (ca *CA) TLSCert(t testing.TB, name string) tls.Certificate {
	t.Helper()
	certFile, keyFile := ca.Issue(t, name)
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Pool returns a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func (ca *CA) write(t testing.TB, file, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, file)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
