package coordtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/nemesis"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// cutRuns is how many times each cut scenario runs: a few by default, more
// with COORD_CUT_RUNS (COORD_CUT_RUNS=50 go test -run TestHolderEndsFirst
// ./server/internal/testsupport/coordtest for the soak).
func cutRuns(t *testing.T) int {
	if v := os.Getenv("COORD_CUT_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("COORD_CUT_RUNS=%q: want a positive number of runs", v)
		}
		return n
	}
	return 1
}

// productionPings gives the servers the production ping interval (the test
// cluster's default is longer), so that a silent client is noticed as it
// would be in a deployment.
var productionPings = testcluster.WithConfig(func(c *server.Config) { c.PingInterval = 500 * time.Millisecond })

// proxied starts n servers, each behind a fault proxy that it advertises
// as its client address (so a client following M stays behind the
// proxies). It returns the cluster, the proxies and their address list.
func proxied(t *testing.T, n int) (*testcluster.Cluster, []*nemesis.Proxy, string) {
	return proxiedWith(t, n, productionPings)
}

// proxiedWith is proxied with the servers' configuration changed by opts
// instead of productionPings.
func proxiedWith(t *testing.T, n int, opts ...testcluster.Option) (*testcluster.Cluster, []*nemesis.Proxy, string) {
	lns := make([]net.Listener, n)
	var addrs []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		addrs = append(addrs, ln.Addr().String())
	}
	advertise := testcluster.WithConfig(func(c *server.Config) {
		var i int
		fmt.Sscanf(c.NodeID, "n%d", &i)
		c.AdvertiseClientAddr = addrs[i-1]
	})
	cl := testcluster.Start(t, n, append(opts, advertise)...)
	var ps []*nemesis.Proxy
	for i, ln := range lns {
		addr, first := addrs[i], ln
		listen := func() (net.Listener, error) {
			if first != nil {
				l := first
				first = nil
				return l, nil
			}
			return net.Listen("tcp", addr)
		}
		var d net.Dialer
		p, err := nemesis.NewProxy(fmt.Sprintf("proxy-%d", i), listen, cl.Addr(i), d.DialContext)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		ps = append(ps, p)
	}
	return cl, ps, strings.Join(addrs, ",")
}

// TestHolderEndsFirst: a holder whose connection is black-holed (open,
// silent) or cut (and cannot reconnect) sees its lease's or leadership's
// context end before another session's acquire or campaign returns with
// the grant, on 1 and 3 servers. The check is made the moment the other
// session has the grant: Done must already be closed.
func TestHolderEndsFirst(t *testing.T) {
	runs := cutRuns(t)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%dservers", n), func(t *testing.T) {
			cl, ps, viaProxy := proxied(t, n)
			// The other session talks to the servers directly: it is never
			// cut. (An M names a proxy, which fails while cut; the client
			// then tries its next address, so it finds the leader even
			// after a leader change.)
			direct, err := newCoordClient(t, cl.AddrList(), ticketing.WithDialTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { direct.Close() })
			ctx := ctxT(t)
			if err := direct.CreateNode(ctx, "/cut", coordination.NodeConfig{}); err != nil {
				t.Fatal(err)
			}
			for _, cut := range []string{"blackhole", "reset"} {
				for _, kind := range []string{"semaphore", "election"} {
					t.Run(cut+"/"+kind, func(t *testing.T) {
						for i := 0; i < runs; i++ {
							oneCut(t, direct, ps, viaProxy, cut, kind, fmt.Sprintf("%s-%s-%d", cut, kind, i))
						}
					})
				}
			}
		})
	}
}

func oneCut(t *testing.T, direct *coordination.Client, ps []*nemesis.Proxy, viaProxy, cut, kind, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range ps {
		if err := p.Set(nemesis.LinkMode{}); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := newCoordClient(t, viaProxy, ticketing.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	a, err := ca.Session(ctx, "/cut", coordination.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, cc := context.WithTimeout(context.Background(), 5*time.Second)
		defer cc()
		a.Close(cctx)
	}()
	// The other session outlasts an election (the machine may be loaded).
	b, err := direct.Session(ctx, "/cut", coordination.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	var held context.Context
	granted := make(chan error, 1)
	switch kind {
	case "semaphore":
		if err := a.CreateSemaphore(ctx, name, 1, nil); err != nil {
			t.Fatal(err)
		}
		l, err := a.AcquireSemaphore(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = l.Context()
		go func() {
			_, err := b.AcquireSemaphore(ctx, name)
			granted <- err
		}()
	case "election":
		lead, err := a.Election(name).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		held = lead.Context
		go func() {
			_, err := b.Election(name).Campaign(ctx, []byte("b"))
			granted <- err
		}()
	}
	var ended atomic.Int64 // when the old holder's context ended (UnixNano)
	stop := context.AfterFunc(held, func() { ended.Store(time.Now().UnixNano()) })
	defer stop()
	sessionCtx := a.Context() // what a program that watches only its session watches
	cutAt := time.Now()
	for _, p := range ps {
		switch cut {
		case "blackhole":
			p.Set(nemesis.LinkMode{Stall: true})
		case "reset":
			p.Set(nemesis.LinkMode{Refuse: true})
			p.Cut()
		}
	}
	if err := recv(t, ctx, granted); err != nil {
		t.Fatalf("%s: the other session's grant: %v", name, err)
	}
	grantAt := time.Now()
	// Err checks the deadline on the spot (what a holder checks before its
	// next unit of work); Done must be closed with it.
	if held.Err() == nil {
		t.Fatalf("%s (%s): the other session was granted while the old holder's context was still live", name, cut)
	}
	select {
	case <-held.Done():
	default:
		t.Fatalf("%s (%s): the old holder's Err reports the end but Done is open", name, cut)
	}
	if cause := context.Cause(held); !errors.Is(cause, coordination.ErrDeadlinePassed) && !errors.Is(cause, coordination.ErrSessionExpired) {
		t.Fatalf("%s: the old holder's context ended with %v, want ErrDeadlinePassed or ErrSessionExpired", name, cause)
	}
	if e := ended.Load(); e != 0 {
		t.Logf("%s: old holder ended %v after the cut, %v before the other's grant", name,
			time.Unix(0, e).Sub(cutAt).Round(time.Millisecond), grantAt.Sub(time.Unix(0, e)).Round(time.Millisecond))
	}
	if st := a.State(); st == coordination.Attached {
		t.Fatalf("%s: the old holder's session still reports %v", name, st)
	}
	if sessionCtx.Err() == nil {
		t.Fatalf("%s (%s): the other session was granted while the old holder's session context was still live", name, cut)
	}
	if cause := context.Cause(sessionCtx); !errors.Is(cause, coordination.ErrDeadlinePassed) && !errors.Is(cause, coordination.ErrSessionExpired) {
		t.Fatalf("%s: the old holder's session context ended with %v, want ErrDeadlinePassed or ErrSessionExpired", name, cause)
	}
}

// TestSessionContextRenewedByARestore: a session black-holed past its
// client deadline, but not past the server's expiry, sees its Context end
// (ErrDeadlinePassed) and, once the link is back and the session restored,
// gets a fresh one; the ended one stays ended.
func TestSessionContextRenewedByARestore(t *testing.T) {
	cl, ps, viaProxy := proxied(t, 1)
	ctx := ctxT(t)
	c, err := newCoordClient(t, viaProxy, ticketing.WithDialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = cl
	if err := c.CreateNode(ctx, "/renew", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	// The server ends the silent connection within 3 ping intervals and
	// expires the session its timeout after that: the link comes back
	// well before, as soon as the client's deadline has passed.
	a, err := c.Session(ctx, "/renew", coordination.WithTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	first := a.Context()
	ps[0].Set(nemesis.LinkMode{Stall: true})
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the session's context outlived its deadline")
	}
	if st := a.State(); st == coordination.Attached {
		t.Fatalf("the session's context ended but State is %v", st)
	}
	ps[0].Set(nemesis.LinkMode{})
	if cause := context.Cause(first); !errors.Is(cause, coordination.ErrDeadlinePassed) {
		t.Fatalf("the first context ended with %v, want ErrDeadlinePassed", cause)
	}
	testcluster.WaitFor(t, 30*time.Second, "the session is restored", func() bool { return a.State() != coordination.Detached })
	if st := a.State(); st != coordination.Attached {
		t.Fatalf("after the link came back the session is %v, want ATTACHED", st)
	}
	second := a.Context()
	if err := second.Err(); err != nil {
		t.Fatalf("the restored session's context: %v (cause %v), want a live one", err, context.Cause(second))
	}
	if first.Err() == nil {
		t.Fatal("the first context came back to life")
	}
	if err := a.CreateSemaphore(ctx, "s", 1, nil); err != nil {
		t.Fatalf("the restored session's request: %v", err)
	}
}
