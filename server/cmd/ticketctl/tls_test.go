package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Against a server that requires client certificates, --tls-cert and
// --tls-key make every command work; without them, or without TLS, the
// failure says why.
func TestEndToEndMutualTLS(t *testing.T) {
	ca := testcerts.New(t)
	serverCert, serverKey := ca.Issue(t, "server")
	clientCert, clientKey := ca.Issue(t, "client")
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: serverCert, KeyFile: serverKey, CAFile: ca.CAFile}
	}))
	addr := "--addr=" + c.Addr(0)
	mtls := []string{addr, "--tls-ca", ca.CAFile, "--tls-cert", clientCert, "--tls-key", clientKey}

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
		{"no client certificate", []string{addr, "--tls-ca", ca.CAFile}, []string{"authentication failed", "client certificate", "--tls-cert"}},
		{"no TLS", []string{addr}, []string{"uses TLS", "add --tls-ca FILE, --tls or --tls-insecure"}},
		{"unreadable key", []string{addr, "--tls-ca", ca.CAFile, "--tls-cert", clientCert, "--tls-key", ca.CAFile}, []string{"client certificate"}},
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
