package coordtest_test

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestDescribeOwnersOfMaximalData: a semaphore whose data and whose three
// owners' and one waiter's data are 1 MiB each (4 MiB together, four times
// a frame's bound) is described in full, with a watch, on the describer's
// connection (its session never detaches); meanwhile another client keeps
// acquiring and releasing on the same server, and does not notice.
func TestDescribeOwnersOfMaximalData(t *testing.T) {
	cl := testcluster.Start(t, 1)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/big", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	fill := func(b byte) []byte { return bytes.Repeat([]byte{b}, wire.MaxCoordData) }
	admin := session(t, c, "/big")
	if err := admin.CreateSemaphore(ctx, "s", 3, fill('S')); err != nil {
		t.Fatal(err)
	}
	var owners []uint64
	var leases []*coordination.Lease
	for i := 0; i < 3; i++ {
		s := session(t, newClient(t, cl.AddrList()), "/big")
		l, err := s.AcquireSemaphore(ctx, "s", coordination.Shared(), coordination.Data(fill(byte('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, l.Token())
		leases = append(leases, l)
	}
	queued := make(chan uint64, 1)
	waiter := session(t, newClient(t, cl.AddrList()), "/big")
	go waiter.AcquireSemaphore(ctx, "s", coordination.Shared(), coordination.Data(fill('w')),
		coordination.OnQueued(func(id uint64) { queued <- id }))
	waiterID := recv(t, ctx, queued)

	// Another client on the same server keeps working meanwhile.
	stop := make(chan struct{})
	var rounds atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	other := session(t, newClient(t, cl.AddrList()), "/big")
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := other.AcquireSemaphore(ctx, "other", coordination.Ephemeral())
			if err != nil {
				t.Errorf("other client's acquire: %v", err)
				return
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("other client's release: %v", err)
				return
			}
			rounds.Add(1)
		}
	}()

	var detached atomic.Int64
	d := session(t, newClient(t, cl.AddrList()), "/big", coordination.WithStateCallback(func(s coordination.State) {
		if s != coordination.Attached {
			detached.Add(1)
		}
	}))
	desc, watch, err := d.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true, Waiters: true, WatchOwners: true})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if !bytes.Equal(desc.Data, fill('S')) || desc.Limit != 3 || desc.Count != 3 {
		t.Fatalf("semaphore: limit %d count %d, %d bytes of data", desc.Limit, desc.Count, len(desc.Data))
	}
	if len(desc.Owners) != 3 || len(desc.Waiters) != 1 {
		t.Fatalf("%d owners and %d waiters, want 3 and 1", len(desc.Owners), len(desc.Waiters))
	}
	for i, o := range desc.Owners {
		if o.OrderID != owners[i] || !bytes.Equal(o.Data, fill(byte('a'+i))) {
			t.Fatalf("owner %d: order id %d (want %d), %d bytes of data", i, o.OrderID, owners[i], len(o.Data))
		}
	}
	if w := desc.Waiters[0]; w.OrderID != waiterID || !bytes.Equal(w.Data, fill('w')) {
		t.Fatalf("waiter: order id %d (want %d), %d bytes of data", w.OrderID, waiterID, len(w.Data))
	}
	if n := detached.Load(); n != 0 {
		t.Fatalf("the describer's session left ATTACHED %d times", n)
	}
	// The watch set with the pages fires on an owner change only, once: a
	// data update and a waiter leaving come first and must not fire it.
	if err := admin.UpdateSemaphore(ctx, "s", nil); err != nil {
		t.Fatal(err)
	}
	if err := waiter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leases[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := recv(t, ctx, watch); !ch.OwnersChanged || ch.DataChanged {
		t.Fatalf("the owners watch reported %+v, want an owner change", ch)
	}
	again, _, err := admin.DescribeSemaphore(ctx, "s", coordination.DescribeOptions{Owners: true})
	if err != nil || len(again.Owners) != 2 || len(again.Data) != 0 || again.Owners[0].OrderID != owners[1] {
		t.Fatalf("second describe: %+v, %v", again.Owners, err)
	}
	t.Logf("the other client did %d acquire/release rounds during the describe", rounds.Load())
}
