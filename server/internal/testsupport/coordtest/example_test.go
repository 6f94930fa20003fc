package coordtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// The examples of package coordination, run against a real server: one
// ticketd, started in-process by the first example that needs it and
// stopped by TestMain.

var example struct {
	once sync.Once
	addr string
	srv  *server.Server
	dir  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if example.srv != nil {
		example.srv.Close()
		os.RemoveAll(example.dir)
	}
	os.Exit(code)
}

func loopbackAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// exampleServer returns the address of the examples' server.
func exampleServer() string {
	example.once.Do(func() {
		dir, err := os.MkdirTemp("", "coordtest-examples")
		if err != nil {
			log.Fatal(err)
		}
		cfg := server.DefaultConfig()
		cfg.NodeID, cfg.DataDir = "n1", filepath.Join(dir, "n1")
		cfg.ClientAddr, cfg.RaftAddr, cfg.HTTPAddr = loopbackAddr(), loopbackAddr(), loopbackAddr()
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = 500*time.Millisecond, 500*time.Millisecond
		cfg.Logger = testcluster.Logger()
		s, err := server.New(cfg)
		if err != nil {
			log.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); !s.IsServing(); time.Sleep(10 * time.Millisecond) { // polling a condition
			if time.Now().After(deadline) {
				log.Fatal("the examples' server did not start serving within 30s")
			}
		}
		example.srv, example.dir, example.addr = s, dir, cfg.ClientAddr
	})
	return example.addr
}

// exampleNode creates a fresh node for one example and returns a client and
// a function that drops the node and closes the client.
func exampleNode(ctx context.Context, path string) (*coordination.Client, func()) {
	b, err := ticketing.Connect(exampleServer())
	if err != nil {
		log.Fatal(err)
	}
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.DropNode(ctx, path); err != nil && !errors.Is(err, coordination.ErrNotFound) {
		log.Fatal(err) // left by an earlier run (-count)
	}
	if err := c.CreateNode(ctx, path, coordination.NodeConfig{}); err != nil {
		log.Fatal(err)
	}
	return c, func() { c.DropNode(ctx, path); c.Close(); b.Close() }
}

func exampleSession(ctx context.Context, c *coordination.Client, path, desc string) *coordination.Session {
	s, err := c.Session(ctx, path, coordination.WithDescription(desc), coordination.WithTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// At most three workers at a time (coordination's Example).
func Example_workers() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/jobs")
	defer done()
	s := exampleSession(ctx, c, "/ex/jobs", "worker")
	defer s.Close(ctx)
	if err := s.CreateSemaphore(ctx, "workers", 3, nil); err != nil {
		log.Fatal(err)
	}
	lease, err := s.AcquireSemaphore(ctx, "workers", coordination.Shared())
	if err != nil {
		log.Fatal(err)
	}
	d, _, _ := s.DescribeSemaphore(ctx, "workers", coordination.DescribeOptions{})
	fmt.Printf("holding %d of %d, token > 0: %v\n", d.Count, d.Limit, lease.Token() > 0)
	lease.Release(ctx)
	// Output: holding 1 of 3, token > 0: true
}

func Example_mutex() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/locks")
	defer done()
	a, b := exampleSession(ctx, c, "/ex/locks", "a"), exampleSession(ctx, c, "/ex/locks", "b")
	defer a.Close(ctx)
	defer b.Close(ctx)
	ma, mb := a.Mutex("report"), b.Mutex("report")
	if err := ma.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, _ := mb.TryLock(ctx)
	fmt.Println("b while a holds:", ok)
	first := ma.Token()
	ma.Unlock(ctx)
	ok, _ = mb.TryLock(ctx)
	fmt.Println("b after a unlocked:", ok, "newer token:", mb.Token() > first)
	// Output:
	// b while a holds: false
	// b after a unlocked: true newer token: true
}

func Example_election() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/svc")
	defer done()
	a, o := exampleSession(ctx, c, "/ex/svc", "a"), exampleSession(ctx, c, "/ex/svc", "observer")
	defer a.Close(ctx)
	defer o.Close(ctx)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	leaders := o.Election("primary").Observe(octx)
	fmt.Printf("leader: %q\n", (<-leaders).Data) // nobody yet
	e := a.Election("primary")
	if _, err := e.Campaign(ctx, []byte("a:8080")); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("leader: %q\n", (<-leaders).Data)
	e.Resign(ctx)
	fmt.Printf("leader: %q\n", (<-leaders).Data)
	// Output:
	// leader: ""
	// leader: "a:8080"
	// leader: ""
}

func Example_discovery() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/disc")
	defer done()
	a, b, w := exampleSession(ctx, c, "/ex/disc", "a"), exampleSession(ctx, c, "/ex/disc", "b"), exampleSession(ctx, c, "/ex/disc", "watcher")
	defer w.Close(ctx)
	defer a.Close(ctx)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	seen := w.Discovery("api").Watch(wctx)
	show := func(eps []coordination.Endpoint) {
		fmt.Print("api at:")
		for _, e := range eps {
			fmt.Printf(" %s", e.Data)
		}
		fmt.Println()
	}
	show(<-seen)
	a.Discovery("api").Register(ctx, []byte("10.0.0.1:80"))
	show(<-seen)
	b.Discovery("api").Register(ctx, []byte("10.0.0.2:80"))
	show(<-seen)
	b.Close(ctx) // its registration ends with its session
	show(<-seen)
	// Output:
	// api at:
	// api at: 10.0.0.1:80
	// api at: 10.0.0.1:80 10.0.0.2:80
	// api at: 10.0.0.1:80
}

func Example_publication() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/cfg")
	defer done()
	pub, sub := exampleSession(ctx, c, "/ex/cfg", "publisher"), exampleSession(ctx, c, "/ex/cfg", "follower")
	defer pub.Close(ctx)
	defer sub.Close(ctx)
	if err := pub.Publication("limits").Publish(ctx, []byte("rps=100")); err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	values := sub.Publication("limits").Watch(wctx)
	fmt.Printf("%s\n", <-values)
	pub.Publication("limits").Publish(ctx, []byte("rps=200"))
	fmt.Printf("%s\n", <-values)
	// Output:
	// rps=100
	// rps=200
}

func Example_listSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, done := exampleNode(ctx, "/ex/list")
	defer done()
	s := exampleSession(ctx, c, "/ex/list", "worker-1")
	defer s.Close(ctx)
	ss, err := c.ListSessions(ctx, "/ex/list")
	if err != nil {
		log.Fatal(err)
	}
	for _, x := range ss {
		fmt.Printf("%q attached=%v timeout=%v\n", x.Description, x.Attached, x.Timeout)
	}
	// Output: "worker-1" attached=true timeout=10s
}
