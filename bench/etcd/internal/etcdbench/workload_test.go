package etcdbench

import "testing"

// The defaults are a careful etcd user's: one clientv3.Client per process
// and concurrency.NewSession's 60 s TTL; -per-conn spreads workers instead.
func TestDefaultsAreTheDocumentedUsage(t *testing.T) {
	var c Config
	c.Workload = Uncontended
	c.ApplyDefaults()
	if c.LeaseTTL != 60 {
		t.Errorf("default session TTL %d s, want 60", c.LeaseTTL)
	}
	if n := c.clientsFor(c.Clients); n != 1 {
		t.Errorf("default: %d clientv3.Clients for %d workers, want 1", n, c.Clients)
	}
	for _, tc := range []struct{ conns, perConn, n, want int }{
		{16, 0, 128, 16}, {16, 0, 4, 4}, {1, 8, 128, 16}, {1, 8, 1, 1},
	} {
		c := Config{Conns: tc.conns, PerConn: tc.perConn}
		if got := c.clientsFor(tc.n); got != tc.want {
			t.Errorf("conns=%d per-conn=%d workers=%d: %d clients, want %d", tc.conns, tc.perConn, tc.n, got, tc.want)
		}
	}
}
