package clienttest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// WaitReady pointed at a port that does not speak the client protocol
// (ticketd's own Raft and metrics ports, a PostgreSQL server) fails at once
// with a message that names the likely mistake, instead of running to the
// caller's deadline.
func TestWaitReadyFailsFastOnPortsThatDoNotSpeakTheProtocol(t *testing.T) {
	c := testcluster.Start(t, 1)
	pg := pgtest.Start(t)
	cfg := c.Config(0)
	cases := []struct {
		name, addr, want string
	}{
		{"raft port", cfg.RaftAddr, "5225"},
		{"metrics port", cfg.HTTPAddr, "HTTP"},
		{"postgresql", pg.Addr(), "PostgreSQL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := connect(t, tc.addr)
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			err := b.WaitReady(ctx)
			if err == nil {
				t.Fatal("WaitReady succeeded")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitReady ran to the caller's deadline instead of failing at once: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error does not name the likely mistake (%q): %v", tc.want, err)
			}
		})
	}
	// The right port still works.
	b := connect(t, c.Addr(0))
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}
