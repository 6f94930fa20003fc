package consoletest

import (
	"context"
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
)

// privateCA is a CA of the test's own, trusted by nothing on the machine,
// and the certificates it signs, as PEM files.
type privateCA struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	file   string
	serial int64
}

func newPrivateCA(t *testing.T) *privateCA {
	t.Helper()
	ca := &privateCA{dir: t.TempDir(), serial: 1}
	var err error
	if ca.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "console test private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.file = filepath.Join(ca.dir, "ca.crt")
	writePEMFile(t, ca.file, "CERTIFICATE", der)
	return ca
}

func writePEMFile(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes a server certificate for 127.0.0.1 naming cn (a node id),
// for both the client port and Raft, as docs/deployment.md makes them.
func (ca *privateCA) issue(t *testing.T, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, cn+".crt"), filepath.Join(ca.dir, cn+".key")
	writePEMFile(t, certFile, "CERTIFICATE", der)
	writePEMFile(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// leaderByMetrics finds the leader through /metrics (plain HTTP), for a
// cluster whose client port speaks TLS.
func (c *cluster) leaderByMetrics(t *testing.T) (leader *proc, followers []*proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, followers = nil, nil
		for _, p := range c.procs {
			if scrape(t, p.http)[`ticketing_raft_role{role="leader"}`] == "1" {
				leader = p
			} else {
				followers = append(followers, p)
			}
		}
		if leader != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for a leader, with a deadline
	}
	if leader == nil {
		t.Fatal("no leader within 30 s")
	}
	return leader, followers
}

// TestFollowerConsoleWithPrivateCA: a cluster whose client port and Raft
// use certificates of a private CA (one certificate per server for both,
// as docs/deployment.md makes them, and no tls.ca): a follower's console,
// opened in Chromium, reads the leader's view, checking the leader's
// certificate with the CA it trusts for Raft, rather than showing
// "certificate signed by unknown authority".
func TestFollowerConsoleWithPrivateCA(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := newPrivateCA(t)
	cl := startClusterWith(t, 3, func(p *proc) []string {
		cert, key := ca.issue(t, p.id)
		return []string{"--tls-cert", cert, "--tls-key", key, "--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", ca.file}
	})
	leader, followers := cl.leaderByMetrics(t)
	alloc := newBrowser(t, ctx)
	ops := newTab(t, alloc, monitorToken, screenshotDir(t))
	f := followers[0]
	url := "http://" + f.http + "/console/cluster"
	ops.until(url, "the leader's view on the follower "+f.id, func() bool {
		return ops.count(fmt.Sprintf(`tr.member[data-id=%q] strong`, leader.id)) == 1
	})
	if n := ops.count("#error"); n != 0 {
		t.Errorf("the follower's page shows an error: %s", ops.text("#error"))
	}
	if src := ops.text("#source"); !strings.Contains(src, "Server "+f.id) || !strings.Contains(src, "leader "+leader.id) {
		t.Errorf("the follower's page says %q, want it served by %s from the leader %s", src, f.id, leader.id)
	}
	ops.screenshot("follower-private-ca")
}
