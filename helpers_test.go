package ticketing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// TestMain fails the run if a goroutine of this package or of faketicketd
// outlives the tests. (goleak.VerifyTestMain would also flag the real
// servers of the integration tests, whose raft transport and core leave
// goroutines behind after Close; those belong to server/internal/server. Close's own
// leak check, TestCloseLeavesNoGoroutines, uses goleak.)
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := clientGoroutinesGone(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// clientGoroutinesGone waits (a bounded time) until no goroutine runs code of
// this package or of faketicketd, other than the one calling it.
func clientGoroutinesGone() error {
	var leaked []string
	for range 500 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 { // this goroutine
				continue
			}
			if strings.Contains(g, "github.com/ticketing-io/ticketing.") || strings.Contains(g, "ticketing/internal/faketicketd.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling for goroutines to exit, bounded
	}
	return fmt.Errorf("leaked goroutines of the client or faketicketd:\n\n%s", strings.Join(leaked, "\n\n"))
}

// patience bounds every wait for a condition in these tests; it is a
// deadline against hangs, never a timing assertion.
const patience = 20 * time.Second

// withCfg adjusts internal knobs (release bound, workers, backoff) in tests.
func withCfg(f func(*config)) Option { return Option(f) }

var quiet = WithLogger(slog.New(slog.DiscardHandler))

// fast makes reconnects quick.
var fast = withCfg(func(c *config) { c.BackoffBase, c.BackoffMax = time.Millisecond, 20*time.Millisecond })

func connect(t *testing.T, addrs string, opts ...Option) *Broker {
	t.Helper()
	b, err := Connect(addrs, append([]Option{quiet, fast}, opts...)...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// rec records every frame the fake servers receive and lets tests wait for
// one that matches.
type rec struct {
	mu      sync.Mutex
	frames  []recFrame
	changed chan struct{}
}

type recFrame struct {
	conn *faketicketd.Conn
	f    wire.Frame
	at   time.Time
}

func newRec() *rec { return &rec{changed: make(chan struct{})} }

func (r *rec) add(c *faketicketd.Conn, f wire.Frame) {
	r.mu.Lock()
	r.frames = append(r.frames, recFrame{conn: c, f: f, at: time.Now()})
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// wait returns the n-th (from 1) recorded frame matching pred, waiting for it.
func (r *rec) wait(t *testing.T, n int, pred func(wire.Frame) bool) recFrame {
	t.Helper()
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		seen := 0
		for _, x := range r.frames {
			if pred(x.f) {
				seen++
				if seen == n {
					r.mu.Unlock()
					return x
				}
			}
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no matching frame #%d arrived at the fake server", n)
		}
	}
}

func (r *rec) count(pred func(wire.Frame) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.frames {
		if pred(x.f) {
			n++
		}
	}
	return n
}

func isType(t wire.Type) func(wire.Frame) bool {
	return func(f wire.Frame) bool { return f.Type == t }
}

func isAcquireOf(key string) func(wire.Frame) bool {
	return func(f wire.Frame) bool { return f.Type == wire.TypeAcquire && string(f.Key) == key }
}

// script returns a handler that completes the hello with ready, records
// every frame, answers pings, and calls act for every other frame; act
// returns false to end the connection (a drop).
func script(r *rec, ready faketicketd.Ready, act func(c *faketicketd.Conn, f wire.Frame) bool) faketicketd.Handler {
	return func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(ready); err != nil {
			return
		}
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			if r != nil {
				r.add(c, f)
			}
			if f.Type == wire.TypePing {
				c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
				continue
			}
			if f.Type == wire.TypePong {
				continue
			}
			if !act(c, f) {
				return
			}
		}
	}
}

// normal is a script action that answers everything through locks.
func normal(l *Locks) func(c *faketicketd.Conn, f wire.Frame) bool {
	return func(c *faketicketd.Conn, f wire.Frame) bool {
		l.Handle(c, f)
		return true
	}
}

// Locks is faketicketd.Locks closed at the end of the test.
type Locks = faketicketd.Locks

func newLocks(t *testing.T) *Locks {
	l := faketicketd.NewLocks()
	t.Cleanup(l.Close)
	return l
}

// grant answers an acquire with G.
func grant(c *faketicketd.Conn, f wire.Frame, token uint64) {
	c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: token, LeaseMs: uint32(f.Lease) * 1000})
}

// observed collects the release observer's reports.
type observed struct {
	mu  sync.Mutex
	got []obs
	ch  chan struct{}
}

type obs struct {
	key   string
	token uint64
	err   error
}

func newObserved() *observed { return &observed{ch: make(chan struct{})} }

func (o *observed) option() Option {
	return WithReleaseObserver(func(key string, token uint64, err error) {
		o.mu.Lock()
		o.got = append(o.got, obs{key, token, err})
		close(o.ch)
		o.ch = make(chan struct{})
		o.mu.Unlock()
	})
}

// wait returns the report for token, waiting for it.
func (o *observed) wait(t *testing.T, token uint64) obs {
	t.Helper()
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		for _, x := range o.got {
			if x.token == token {
				o.mu.Unlock()
				return x
			}
		}
		ch := o.ch
		o.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("the release observer never reported token %d", token)
		}
	}
}

func (o *observed) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.got)
}

// waitUntil polls cond until it holds (a deadline, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// heldAcquires starts a fake server that records every frame in r, hands
// each acquire to the test on the returned channel (answering nothing: the
// test grants it when it wants, through conn), answers releases R and
// ignores cancels (a grant the test sends then "crossed" the cancel).
func heldAcquires(t *testing.T, r *rec) (srv *faketicketd.Server, acq <-chan wire.Frame, conn *atomic.Pointer[faketicketd.Conn]) {
	ch := make(chan wire.Frame, 1)
	conn = new(atomic.Pointer[faketicketd.Conn])
	srv = faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		conn.Store(c)
		switch f.Type {
		case wire.TypeAcquire:
			ch <- f
		case wire.TypeRelease:
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}
		return true
	}))
	return srv, ch, conn
}
