package coordination_test

import (
	"testing"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// newClient connects a Ticketing client to addrs and returns a
// coordination client over it; both are closed when the test ends.
func newClient(t *testing.T, addrs string, opts ...ticketing.Option) *coordination.Client {
	t.Helper()
	b, err := ticketing.Connect(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordination.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		b.Close()
	})
	return c
}
