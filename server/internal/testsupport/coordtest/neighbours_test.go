package coordtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// neighbours starts n sessions of c on path (one broker connection: the
// server carries them all on it), each holding an ephemeral semaphore of
// its own. ended counts the leases that end and the sessions that stop
// being ATTACHED; the sessions and leases are returned for the checks.
type neighbours struct {
	sessions []*coordination.Session
	leases   []*coordination.Lease

	mu     sync.Mutex
	losses []string // what ended, in words
}

func startNeighbours(t *testing.T, ctx context.Context, c *coordination.Client, path string, n int, timeout time.Duration) *neighbours {
	t.Helper()
	nb := &neighbours{}
	for i := range n {
		s := session(t, c, path, coordination.WithTimeout(timeout), coordination.WithStateCallback(func(st coordination.State) {
			if st != coordination.Attached {
				nb.lost(fmt.Sprintf("session %d: %v", i, st))
			}
		}))
		l, err := s.AcquireSemaphore(ctx, fmt.Sprintf("own-%d", i), coordination.Ephemeral())
		if err != nil {
			t.Fatalf("neighbour %d: %v", i, err)
		}
		context.AfterFunc(l.Context(), func() { nb.lost(fmt.Sprintf("lease %d: %v", i, context.Cause(l.Context()))) })
		nb.sessions = append(nb.sessions, s)
		nb.leases = append(nb.leases, l)
	}
	return nb
}

func (nb *neighbours) lost(what string) {
	nb.mu.Lock()
	nb.losses = append(nb.losses, what)
	nb.mu.Unlock()
}

// check fails the test if a neighbour lost its lease or its attachment.
func (nb *neighbours) check(t *testing.T, while string) {
	t.Helper()
	for i, l := range nb.leases {
		if err := l.Context().Err(); err != nil {
			nb.lost(fmt.Sprintf("lease %d at the check: %v", i, context.Cause(l.Context())))
		}
	}
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if len(nb.losses) > 0 {
		t.Fatalf("%s, %d neighbours' leases or sessions ended: %v", while, len(nb.losses), nb.losses)
	}
}

// A session's OnQueued callback that blocks for 5 s delays nothing of the
// 20 other sessions on the broker's connection: the connection's reader
// goes on reading their answers and the server's pings, so none of their
// leases ends and none of them detaches.
func TestBlockingCallbackDelaysOnlyItsSession(t *testing.T) {
	cl := testcluster.Start(t, 1, productionPings)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/cb", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	nb := startNeighbours(t, ctx, c, "/cb", 20, 2*time.Second)

	holder := session(t, c, "/cb")
	if err := holder.CreateSemaphore(ctx, "busy", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.AcquireSemaphore(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	waiter := session(t, c, "/cb")
	var ran atomic.Bool
	started := make(chan struct{})
	acquired := make(chan error, 1)
	go func() {
		_, err := waiter.AcquireSemaphore(ctx, "busy", coordination.OnQueued(func(uint64) {
			close(started)
			time.Sleep(5 * time.Second) // the careless callback under test
			ran.Store(true)
		}))
		acquired <- err
	}()
	recv(t, ctx, started)
	// The grant comes while the callback blocks; the acquire returns only
	// after its callback ran.
	if err := holder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, ctx, acquired); err != nil {
		t.Fatalf("the waiter's acquire: %v", err)
	}
	if !ran.Load() {
		t.Fatal("the acquire returned before its OnQueued callback ran")
	}
	nb.check(t, "after a session's callback blocked for 5 s")
}

// One session's 1 MiB requests, through a link of 600 KiB/s (some 1.7 s a
// request), take none of the 30 other sessions on the broker's connection
// down: the server counts the request's bytes as the client's sign of life
// while its pong waits behind the request, and the neighbours' keep-alives
// go out between the large requests, so none of their leases ends and none
// of them detaches.
func TestLargeRequestsOnASlowLinkSpareTheNeighbours(t *testing.T) {
	_, ps, viaProxy := proxied(t, 1)
	c, err := newCoordClient(t, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.CreateNode(ctx, "/big", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	// Deadline 2.87 s: longer than one large request on the link.
	nb := startNeighbours(t, ctx, c, "/big", 30, 3*time.Second)
	sender := session(t, c, "/big", coordination.WithTimeout(10*time.Second))
	if err := sender.CreateSemaphore(ctx, "blob", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].Set(nemesis.LinkMode{Rate: 600 << 10}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for i := range 5 {
		data[0] = byte(i)
		began := time.Now()
		if err := sender.UpdateSemaphore(ctx, "blob", data); err != nil {
			t.Fatalf("update %d of 1 MiB: %v", i, err)
		}
		t.Logf("update %d of 1 MiB answered in %v", i, time.Since(began).Round(time.Millisecond))
	}
	ps[0].Set(nemesis.LinkMode{})
	nb.check(t, "after 5 requests of 1 MiB at 600 KiB/s")
}

// Three sessions sending 1 MiB requests at once through the same slow link
// still spare the neighbours: the connection lets one large request at a
// time on its way, so a keep-alive waits behind one large frame at most,
// not behind all of them.
func TestConcurrentLargeRequestsSpareTheNeighbours(t *testing.T) {
	_, ps, viaProxy := proxied(t, 1)
	c, err := newCoordClient(t, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.CreateNode(ctx, "/big", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	// Deadline 3.86 s: room for one large request on the link and its
	// commit on a loaded machine, not for three in a row.
	nb := startNeighbours(t, ctx, c, "/big", 20, 4*time.Second)
	var senders []*coordination.Session
	for i := range 3 {
		s := session(t, c, "/big", coordination.WithTimeout(30*time.Second))
		if err := s.CreateSemaphore(ctx, fmt.Sprintf("blob-%d", i), 1, nil); err != nil {
			t.Fatal(err)
		}
		senders = append(senders, s)
	}
	if err := ps[0].Set(nemesis.LinkMode{Rate: 600 << 10}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(senders))
	for i, s := range senders {
		go func() {
			data := make([]byte, 1<<20)
			for j := range 2 {
				data[0] = byte(j)
				if err := s.UpdateSemaphore(ctx, fmt.Sprintf("blob-%d", i), data); err != nil {
					errs <- fmt.Errorf("sender %d, update %d of 1 MiB: %w", i, j, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range senders {
		if err := recv(t, ctx, errs); err != nil {
			t.Fatal(err)
		}
	}
	ps[0].Set(nemesis.LinkMode{})
	nb.check(t, "after 3 sessions sent 2 requests of 1 MiB each at once at 600 KiB/s")
}
