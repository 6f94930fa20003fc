package coordtest_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// countingBroker connects a Ticketing client to addrs that counts the TCP
// connections it opens, and a coordination client over it.
func countingBroker(t *testing.T, addrs string) (*ticketing.Broker, *coordination.Client, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	var d net.Dialer
	b, err := ticketing.Connect(addrs, ticketing.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := coordination.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return b, c, &dials
}

// TestOneConnectionForTicketsAndCoordination: node requests, sessions and
// tickets of one broker go over its one connection to the leader; the
// broker's dialer (an option of the Ticketing client) is the one used.
func TestOneConnectionForTicketsAndCoordination(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)
	b, c, dials := countingBroker(t, cl.AddrList())
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeNode(ctx, "/n"); err != nil {
		t.Fatal(err)
	}
	var sessions []*coordination.Session
	for range 4 {
		sessions = append(sessions, session(t, c, "/n", coordination.WithTimeout(5*time.Second)))
	}
	if err := sessions[0].CreateSemaphore(ctx, "pool", 2, nil); err != nil {
		t.Fatal(err)
	}
	for i, s := range sessions[:2] {
		if _, err := s.AcquireSemaphore(ctx, "pool"); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	tk, err := b.Acquire(ctx, "ticket", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSessions(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 {
		t.Fatalf("%d sessions listed, want 4", len(list))
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections opened for a ticket, node requests and 4 sessions, want 1 (the broker's)", n)
	}
}

// TestClosingTheBrokerEndsSessions: a session over a broker ends with
// ErrClosed when the broker is closed; node requests fail with ErrClosed.
func TestClosingTheBrokerEndsSessions(t *testing.T) {
	cl := testcluster.Start(t, 1)
	ctx := ctxT(t)
	b, c, _ := countingBroker(t, cl.AddrList())
	if err := c.CreateNode(ctx, "/n", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(ctx, "/n", coordination.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	<-recvDone(t, ctx, s.Context())
	if err := context.Cause(s.Context()); !errors.Is(err, coordination.ErrClosed) {
		t.Fatalf("session after the broker closed: %v, want ErrClosed", err)
	}
	if _, err := c.DescribeNode(ctx, "/n"); !errors.Is(err, coordination.ErrClosed) {
		t.Fatalf("describe node after the broker closed: %v, want ErrClosed", err)
	}
}

// recvDone returns ctx.Done(), failing the test when the test's context
// ends first.
func recvDone(t *testing.T, test, ctx context.Context) <-chan struct{} {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-test.Done():
		t.Fatalf("still running: %v", test.Err())
	}
	return ctx.Done()
}
