package clienttest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"
)

// patience bounds every wait: a deadline against hangs, never a timing
// assertion.
const patience = 20 * time.Second

var quiet = ticketing.WithLogger(slog.New(slog.DiscardHandler))

func connect(t *testing.T, addrs string, opts ...ticketing.Option) *ticketing.Broker {
	t.Helper()
	b, err := ticketing.Connect(addrs, append([]ticketing.Option{quiet}, opts...)...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond until it holds (a deadline, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
