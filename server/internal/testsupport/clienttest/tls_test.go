package clienttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"

	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

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
func refusedPromptly(t *testing.T, b *ticketing.Broker) error {
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

// A real server requiring client certificates (tls.ca): a client presenting
// one signed by that CA is served (tickets, admin, snapshot); one without a
// certificate, or with a certificate from another CA, is refused promptly
// with ErrUnauthenticated and says why; a plain client is told the server
// uses TLS.
func TestMutualTLSRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	p := newPKI(t)
	rogue := newPKI(t)
	c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: p.serverCert, KeyFile: p.serverKey, CAFile: p.ca}
	}))
	addr := c.Addr(0)
	mtls := ticketing.WithTLS(ticketing.TLSCAFile(p.ca).WithClientCert(p.clientCert, p.clientKey))

	t.Run("client certificate", func(t *testing.T) {
		b := connect(t, addr, mtls)
		ctx := ctxFor(t)
		tk, err := b.Acquire(ctx, "mtls", 0, 10*time.Second, 0)
		if err != nil {
			t.Fatalf("acquire over mutual TLS: %v", err)
		}
		if err := b.ReleaseToken(ctx, "mtls", tk.Token()); err != nil {
			t.Fatalf("ReleaseToken: %v", err)
		}
		if err := b.ReleaseToken(ctx, "mtls", tk.Token()); !errors.Is(err, ticketing.ErrNotHeld) {
			t.Fatalf("second ReleaseToken: %v, want ErrNotHeld", err)
		}

		a, err := ticketing.DialAdmin(ctx, addr, quiet, mtls)
		if err != nil {
			t.Fatalf("DialAdmin over mutual TLS: %v", err)
		}
		defer a.Close()
		var buf bytes.Buffer
		info, err := a.SaveSnapshot(ctx, &buf)
		if err != nil {
			t.Fatalf("SaveSnapshot: %v", err)
		}
		sum := sha256.Sum256(buf.Bytes())
		if info.Size != int64(buf.Len()) || info.Size == 0 || info.SHA256 != hex.EncodeToString(sum[:]) || info.Index == 0 || info.Term == 0 {
			t.Errorf("snapshot info %+v for %d bytes", info, buf.Len())
		}
		if st, err := a.Status(ctx); err != nil || st.Role != "leader" {
			t.Errorf("status after the snapshot: %+v, %v", st, err)
		}
	})

	refusals := []struct {
		name string
		mode ticketing.TLSMode
		want string
	}{
		{"no client certificate", ticketing.TLSCAFile(p.ca), "requires a client certificate"},
		{"certificate from another CA", ticketing.TLSCAFile(p.ca).WithClientCert(rogue.clientCert, rogue.clientKey), "did not accept the client certificate"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			b := connect(t, addr, ticketing.WithTLS(tc.mode))
			err := refusedPromptly(t, b)
			if !errors.Is(err, ticketing.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), addr) {
				t.Errorf("WaitReady: %v, want ErrUnauthenticated saying %q", err, tc.want)
			}
			_, err = b.Acquire(ctxFor(t), "k", 0, 5*time.Second, 0)
			if !errors.Is(err, ticketing.ErrUnauthenticated) || !strings.Contains(err.Error(), "not sent") {
				t.Errorf("Acquire: %v", err)
			}
			_, err = ticketing.DialAdmin(ctxFor(t), addr, quiet, ticketing.WithTLS(tc.mode))
			if !errors.Is(err, ticketing.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DialAdmin: %v", err)
			}
		})
	}

	t.Run("plain client", func(t *testing.T) {
		b := connect(t, addr)
		err := refusedPromptly(t, b)
		if !errors.Is(err, ticketing.ErrUnavailable) || !strings.Contains(err.Error(), "uses TLS") || !strings.Contains(err.Error(), "WithTLS") {
			t.Errorf("WaitReady: %v, want an error saying the server uses TLS", err)
		}
		_, err = ticketing.DialAdmin(ctxFor(t), addr, quiet)
		if !errors.Is(err, ticketing.ErrUnavailable) || !strings.Contains(err.Error(), "uses TLS") {
			t.Errorf("DialAdmin: %v", err)
		}
	})
}

// A TLS client against a real plain server is told the server does not use
// TLS, promptly.
func TestTLSClientAgainstPlainRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	c := testcluster.Start(t, 1)
	b := connect(t, c.Addr(0), ticketing.WithTLS(ticketing.TLSInsecureSkipVerify()))
	err := refusedPromptly(t, b)
	if !errors.Is(err, ticketing.ErrUnavailable) || !strings.Contains(err.Error(), "does not use TLS") {
		t.Errorf("WaitReady: %v, want an error saying the server does not use TLS", err)
	}
	_, err = ticketing.DialAdmin(ctxFor(t), c.Addr(0), quiet, ticketing.WithTLS(ticketing.TLSInsecureSkipVerify()))
	if !errors.Is(err, ticketing.ErrUnavailable) || !strings.Contains(err.Error(), "does not use TLS") {
		t.Errorf("DialAdmin: %v", err)
	}
}
