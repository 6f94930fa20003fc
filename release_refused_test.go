package ticketing

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// A release retries its exact token across reconnects for ReleaseBound.
// A refusal of the reconnect that does not go away by itself in the
// broker's eyes but is transient in fact (here the server's connection
// limit, B reason 5, from the only listed server) is one more failed
// reconnect: the release waits for the connection within its bound instead
// of giving up at once and leaving the ticket held for its whole lease.
func TestReleaseWaitsThroughRefusedReconnect(t *testing.T) {
	l := newLocks(t)
	serve := faketicketd.Serve(l, faketicketd.Ready{})
	var refusing atomic.Bool
	var refusedOnce sync.Once
	refused := make(chan struct{})
	var first atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if c.Index == 0 {
			first.Store(c)
			serve(c)
			return
		}
		if refusing.Load() {
			c.Send(wire.Frame{Type: wire.TypeCapacity, Reason: wire.CapacityConnections})
			c.Close()
			refusedOnce.Do(func() { close(refused) })
			return
		}
		serve(c)
	})
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	refusing.Store(true)
	first.Load().Close() // the session drops; the reconnect meets the limit
	<-refused
	waitUntil(t, "the refusal is the broker's answer to calls", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.cur == nil && b.refusedByAll() != nil
	})
	got := make(chan error, 1)
	go func() { got <- tk.Release(ctx) }()
	waitUntil(t, "the release waits for a connection (or returned)", func() bool {
		return len(got) > 0 || b.connWaiters.Load() > 0
	})
	if len(got) > 0 {
		err := <-got
		t.Fatalf("release during a refused reconnect: %v; want it to wait for the connection within ReleaseBound", err)
	}
	refusing.Store(false) // the server has room again
	if err := <-got; err != nil {
		t.Fatalf("release after the reconnect: %v, want it released", err)
	}
	if _, held := l.Holder("k"); held {
		t.Error("the key is still held after Release returned nil")
	}
}
