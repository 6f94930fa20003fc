package ticketing

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// A server that has served a session speaks the protocol: when it later
// closes a connection without answering the hello (it stopped, or crashed,
// between accepting the connection and answering), that is a failed
// reconnect, not the refusal "this is another service". Calls keep waiting
// for the connection while their context allows, also when it is the only
// listed server.
func TestServerStoppingMidHelloIsNotAForeignPort(t *testing.T) {
	l := newLocks(t)
	serve := faketicketd.Serve(l, faketicketd.Ready{})
	var stopping atomic.Bool
	var closedOnce sync.Once
	closedSilently := make(chan struct{})
	var first atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if c.Index == 0 {
			first.Store(c)
			serve(c)
			return
		}
		if stopping.Load() {
			f, err := c.Read()
			if err == nil && f.Type == wire.TypeHello {
				c.Close() // the hello is never answered
				closedOnce.Do(func() { close(closedSilently) })
			}
			c.Close()
			return
		}
		serve(c)
	})
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	stopping.Store(true)
	first.Load().Close()
	<-closedSilently
	waitUntil(t, "the silent close is the broker's last connection error", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.cur == nil && b.lastErr != nil && strings.Contains(b.lastErr.Error(), "without answering the hello")
	})
	got := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "k", 0, 10*time.Second, 0)
		if err == nil {
			err = tk.Release(ctx)
		}
		got <- err
	}()
	waitUntil(t, "the acquire waits for a connection (or failed)", func() bool {
		return len(got) > 0 || b.connWaiters.Load() > 0
	})
	if len(got) > 0 {
		t.Fatalf("acquire while the server restarts: %v; want it to wait for the connection", <-got)
	}
	stopping.Store(false) // the server is back
	if err := <-got; err != nil {
		t.Fatalf("acquire after the restart: %v", err)
	}
}
