package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// TestNodeConfigRefusedBeforeSending: contradictory modes and periods the
// wire cannot carry as given are BAD_REQUEST naming the field, and nothing
// is sent (the address is never dialled).
func TestNodeConfigRefusedBeforeSending(t *testing.T) {
	c := newClient(t, "127.0.0.1:1") // nothing listens: a dial would fail otherwise
	defer c.Close()
	ctx := context.Background()
	for field, cfg := range map[string]coordination.NodeConfig{
		"ReadStrict and ReadRelaxed":     {ReadStrict: true, ReadRelaxed: true},
		"AttachStrict and AttachRelaxed": {AttachStrict: true, AttachRelaxed: true},
		"SelfCheckPeriod":                {SelfCheckPeriod: 100 * time.Microsecond},
		"SessionGracePeriod":             {SessionGracePeriod: 1500 * time.Microsecond},
	} {
		for name, call := range map[string]func() error{
			"create": func() error { return c.CreateNode(ctx, "/n", cfg) },
			"alter":  func() error { return c.AlterNode(ctx, "/n", cfg) },
		} {
			err := call()
			if !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "nothing was sent") {
				t.Errorf("%s with %s: %v", name, field, err)
			}
		}
	}
}

// TestSessionTimeoutBounds: a session timeout outside MinSessionTimeout to
// MaxSessionTimeout is refused before dialling.
func TestSessionTimeoutBounds(t *testing.T) {
	c := newClient(t, "127.0.0.1:1")
	defer c.Close()
	for _, d := range []time.Duration{time.Millisecond, coordination.MinSessionTimeout - 1, coordination.MaxSessionTimeout + 1} {
		if _, err := c.Session(context.Background(), "/n", coordination.WithTimeout(d)); !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("timeout %v: %v", d, err)
		}
	}
}

// TestSentinelsShared: the transport sentinels are the Ticketing client's.
func TestSentinelsShared(t *testing.T) {
	for c, tk := range map[error]error{coordination.ErrIndeterminate: ticketing.ErrIndeterminate, coordination.ErrUnavailable: ticketing.ErrUnavailable,
		coordination.ErrUnauthenticated: ticketing.ErrUnauthenticated, coordination.ErrClosed: ticketing.ErrClosed, coordination.ErrNotAcquired: ticketing.ErrNotAcquired} {
		if err := fmt.Errorf("wrapped: %w", c); !errors.Is(err, tk) {
			t.Errorf("%v does not match the Ticketing client's %v", c, tk)
		}
	}
}
