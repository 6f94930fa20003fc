package coordtest_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
)

// TestCallReturnsWhileItsFrameCannotBeWritten: a link that stops taking
// bytes (stalled: open, nothing read) fills the kernel's buffers, and a
// request with 1 MiB of data cannot be written. The call must still
// return when its context ends (docs/coordination.md promises it), not
// when the write gives up or the connection is found dead: the servers
// keep the test cluster's long ping interval (5 s), so neither side
// notices the silence for 15 s, longer than the client's write deadline.
func TestCallReturnsWhileItsFrameCannotBeWritten(t *testing.T) {
	_, ps, viaProxy := proxiedWith(t, 1)
	c := newClient(t, viaProxy)
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/stalled", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	s := session(t, c, "/stalled", coordination.WithTimeout(30*time.Second))
	if err := s.CreateSemaphore(ctx, "big", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].Set(nemesis.LinkMode{Stall: true}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{'x'}, 1<<20)
	// A few updates fill the buffers (the first ones are written whole
	// and wait for an answer that does not come); every one must return
	// with its context. 2 s is a bound that catches a call held by the
	// write, not a timing measurement (the promise is 100 ms).
	for i := 0; i < 8; i++ {
		cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err := s.UpdateSemaphore(cctx, "big", data)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("update %d: %v after %v, want the context's error", i, err, took)
		}
		if took > 2*time.Second {
			t.Fatalf("update %d returned %v after it was called, its context having ended after 200ms: the call waited for its frame to be written", i, took)
		}
	}
	// The link is whole: once the stall ends, the session works.
	if err := ps[0].Set(nemesis.LinkMode{}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSemaphore(ctx, "big", []byte("small")); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
}
