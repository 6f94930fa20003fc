package etcdbench

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// The defaults are a careful etcd user's: one clientv3.Client per process
// and concurrency.NewSession's 60 s TTL (benchkit tests -per-conn).
func TestDefaultsAreTheDocumentedUsage(t *testing.T) {
	var c Config
	c.Workload = benchkit.Uncontended
	c.ApplyDefaults()
	if c.LeaseTTL != 60 {
		t.Errorf("default session TTL %d s, want 60", c.LeaseTTL)
	}
	if n := c.ConnsFor(c.Clients); n != 1 {
		t.Errorf("default: %d clientv3.Clients for %d workers, want 1", n, c.Clients)
	}
}
