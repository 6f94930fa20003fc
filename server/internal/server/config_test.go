package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// A ping interval below 1 ms would be announced in Y as 0 ms, which means
// "no pings": configuration refuses it (protocol decision 4).
func TestConfigRejectsSubMillisecondPingInterval(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Nanosecond, 500 * time.Microsecond, time.Millisecond - 1} {
		cfg := server.DefaultConfig()
		cfg.PingInterval = d
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "ping_interval") {
			t.Errorf("ping_interval %v: %v, want an error naming ping_interval", d, err)
		}
	}
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Second} {
		cfg := server.DefaultConfig()
		cfg.PingInterval = d
		if err := cfg.Validate(); err != nil {
			t.Errorf("ping_interval %v: %v", d, err)
		}
	}
}
