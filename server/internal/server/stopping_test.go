package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// A connection accepted while the server stops is told that it stops (E 11:
// reconnect to another server), not that the server is at its connection
// limit (B reason 5), which clients treat as a capacity refusal.
func TestConnectionAcceptedWhileStoppingGetsShuttingDown(t *testing.T) {
	c := testcluster.Start(t, 1)
	undo := server.MarkStopping(c.Server(0))
	defer undo()
	r := testcluster.DialRaw(t, c.Addr(0))
	f := r.Recv()
	if f.Type != wire.TypeError || wire.Code(f.Code) != wire.CodeShuttingDown {
		t.Fatalf("a connection accepted while stopping got %s (code %d, reason %d), want E %d", f.Type, f.Code, f.Reason, wire.CodeShuttingDown)
	}
}
