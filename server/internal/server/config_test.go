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

// http.leader_ca without TLS on the client port is a mistake named at start.
func TestLeaderCANeedsClientTLS(t *testing.T) {
	c := server.DefaultConfig()
	c.DataDir = t.TempDir()
	c.HTTP.LeaderCA = "/etc/ticketd/tls/ca.crt"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http.leader_ca") {
		t.Fatalf("Validate: %v, want an error naming http.leader_ca", err)
	}
}
