package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestIssueVerifies(t *testing.T) {
	ca, other := New(t), New(t)
	certFile, keyFile := ca.Issue(t, "server")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
		opts.Roots = other.Pool()
		if _, err := leaf.Verify(opts); err == nil {
			t.Errorf("verified against another CA")
		}
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil || !x509.NewCertPool().AppendCertsFromPEM(pem) {
		t.Fatalf("CAFile: %v", err)
	}
	if ca.Cert.Subject.CommonName == other.Cert.Subject.CommonName {
		t.Error("two CAs share a name")
	}
	if c := ca.TLSCert(t, "client"); len(c.Certificate) != 1 {
		t.Error("TLSCert")
	}
}

func TestIssueRaftNamesNodeAndCluster(t *testing.T) {
	ca := New(t)
	for _, tc := range []struct{ cluster, want string }{{"", "ticketing://node/n2"}, {"alpha", "ticketing://alpha/node/n2"}, {"beta", "ticketing://beta/node/n2"}} {
		certFile, keyFile := ca.IssueRaft(t, tc.cluster, "n2")
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName != "n2" || len(leaf.URIs) != 1 || leaf.URIs[0].String() != tc.want {
			t.Fatalf("cluster %q: CN %q, URIs %v; want n2 and %s", tc.cluster, leaf.Subject.CommonName, leaf.URIs, tc.want)
		}
	}
}
