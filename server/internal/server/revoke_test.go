package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestReloadEndsAnonymousConnections: a server without authentication
// accepts everyone as the anonymous admin; a reload that configures
// principals ends those connections (E 5), as it ends those of a removed
// token, and client_tokens removed by a reload end theirs.
func TestReloadEndsAnonymousConnections(t *testing.T) {
	c := testcluster.Start(t, 1)
	srv, addr := c.Server(0), c.Addr(0)
	anon := testcluster.Hello(t, addr, "")
	if err := srv.SetAuth([]string{"legacy-1", "legacy-2"}, server.AuthConfig{}); err != nil {
		t.Fatal(err)
	}
	expectFatal(t, anon, wire.CodeUnauthenticated)

	one, two := testcluster.Hello(t, addr, "legacy-1"), testcluster.Hello(t, addr, "legacy-2")
	if err := srv.SetAuth([]string{"legacy-2"}, server.AuthConfig{}); err != nil {
		t.Fatal(err)
	}
	expectFatal(t, one, wire.CodeUnauthenticated)
	expect(t, two.Final(two.Acquire("k", testcluster.Owner(1), 0, 10)), wire.TypeGranted)
}
