package coordtest_test

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/testcerts"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// Coordination runs over the ticket port with its TLS and client tokens: a
// client with the CA and the token is served; a wrong token is refused
// promptly with ErrUnauthenticated.
func TestTLSAndToken(t *testing.T) {
	ca := testcerts.New(t)
	cert, key := ca.Issue(t, "server")
	cl := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.TLS = server.TLSFiles{CertFile: cert, KeyFile: key}
		cfg.ClientTokens = []string{"s3cret"}
	}))
	tc := &tls.Config{RootCAs: ca.Pool()}
	ctx := ctxT(t)

	bad, err := coordination.Dial(cl.AddrList(), coordination.WithTLSConfig(tc), coordination.WithToken("wrong")) //nolint:staticcheck // the deprecated constructor keeps working
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.CreateNode(ctx, "/n", coordination.NodeConfig{}); !errors.Is(err, coordination.ErrUnauthenticated) || ctx.Err() != nil {
		t.Fatalf("wrong token: %v", err)
	}

	c, err := coordination.Dial(cl.AddrList(), coordination.WithTLSConfig(tc), coordination.WithToken("s3cret")) //nolint:staticcheck // the deprecated constructor keeps working
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	s := session(t, c, "/n")
	if _, err := s.AcquireSemaphore(ctx, "e", coordination.Ephemeral()); err != nil {
		t.Fatal(err)
	}
}
