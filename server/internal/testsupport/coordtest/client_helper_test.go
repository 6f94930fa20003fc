package coordtest_test

import (
	"testing"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// newCoordClient connects a Ticketing client to addrs with opts and returns
// a coordination client over it (coordination.New); the Ticketing client is
// closed when the test ends, after the test's own deferred closes.
func newCoordClient(tb testing.TB, addrs string, opts ...ticketing.Option) (*coordination.Client, error) {
	b, err := ticketing.Connect(addrs, opts...)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { b.Close() })
	return coordination.New(b)
}
