package nemesis

import (
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketing-io/ticketing"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// brokenServer is a planted bug end to end: a server that reports the full
// lease in G but lets the key go after a tenth of it (expiry ignoring the
// lease), so that a second holder is granted while the first still works.
// The real Go client and the harness's workload run against it.
type brokenServer struct {
	mu    sync.Mutex
	last  uint64
	holds map[string]brokenHold
}

type brokenHold struct {
	token uint64
	end   time.Time // the bug: a tenth of the lease
}

func (s *brokenServer) held(key string) (brokenHold, bool) {
	h, ok := s.holds[key]
	return h, ok && time.Now().Before(h.end)
}

func (s *brokenServer) serve(c *faketicketd.Conn) {
	if _, err := c.AcceptHello(faketicketd.Ready{Interval: time.Second}); err != nil {
		return
	}
	for {
		f, err := c.Read()
		if err != nil {
			return
		}
		key := string(f.Key)
		s.mu.Lock()
		switch f.Type {
		case wire.TypePing:
			c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		case wire.TypeAcquire:
			if _, ok := s.held(key); ok {
				c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: f.ID})
				break
			}
			s.last++
			lease := time.Duration(f.Lease) * time.Second
			s.holds[key] = brokenHold{token: s.last, end: time.Now().Add(lease / 10)}
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: s.last, LeaseMs: uint32(lease / time.Millisecond)})
		case wire.TypeCancel:
			c.Send(wire.Frame{Type: wire.TypeCancelled, ID: f.ID})
		case wire.TypeRelease:
			if h, ok := s.held(key); ok && h.token == f.Token {
				delete(s.holds, key)
				c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
			} else {
				c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			}
		case wire.TypeDescribe:
			i := wire.Frame{Type: wire.TypeInfo, ID: f.ID}
			if h, ok := s.held(key); ok {
				i.Flags, i.Token, i.LeaseMs = 1, h.token, 1000
				i.Remaining = uint32(time.Until(h.end) / time.Millisecond)
			}
			c.Send(i)
		}
		s.mu.Unlock()
	}
}

// runWorkload runs the workload against addr until check finds what it
// looks for or d passes, and returns the last check.
func runWorkload(t *testing.T, addr string, d time.Duration, done func(CheckResult) bool) CheckResult {
	t.Helper()
	h := NewHistory()
	w := NewWorkload(WorkloadConfig{Workers: 6, Keys: 2, Seed: 7}, addr, h)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	deadline := time.Now().Add(d)
	for {
		time.Sleep(500 * time.Millisecond) // let the history grow, then look; bounded by d
		res := Check(h.Ops(), CheckOptions{LinearizabilityTimeout: 30 * time.Second})
		if done(res) || time.Now().After(deadline) {
			w.Stop()
			stopped = true
			return Check(h.Ops(), CheckOptions{LinearizabilityTimeout: 30 * time.Second})
		}
	}
}

func TestCheckerCatchesBrokenServer(t *testing.T) {
	s := &brokenServer{holds: map[string]brokenHold{}}
	srv := faketicketd.Start(t, s.serve)
	res := runWorkload(t, srv.Addr(), 60*time.Second, func(r CheckResult) bool { return len(r.Violations) > 0 })
	if len(res.Violations) == 0 {
		t.Fatalf("no violation found in %d operations (%d grants) against a server that ends leases at a tenth", res.Ops, res.Grants)
	}
	kinds := map[string]int{}
	for _, v := range res.Violations {
		kinds[v.Check]++
	}
	t.Logf("caught the planted bug in %d operations: %v; first: %v", res.Ops, kinds, res.Violations[0])
}

// The same workload against a correct fake server finds nothing: the
// checker does not cry wolf on an honest history from the real client.
func TestCheckerPassesCorrectServer(t *testing.T) {
	locks := faketicketd.NewLocks()
	defer locks.Close()
	srv := faketicketd.Start(t, faketicketd.Serve(locks, faketicketd.Ready{Interval: time.Second}))
	start := time.Now()
	res := runWorkload(t, srv.Addr(), 5*time.Second, func(r CheckResult) bool {
		return len(r.Violations) > 0 || (r.Grants >= 30 && time.Since(start) > 3*time.Second)
	})
	if len(res.Violations) > 0 || res.Linearizable != porcupine.Ok {
		t.Fatalf("violations against a correct server (linearizable=%v): %v", res.Linearizable, res.Violations)
	}
	if res.Grants == 0 {
		t.Fatal("no grant at all: the workload did not run")
	}
	t.Logf("%d operations, %d grants, no violation", res.Ops, res.Grants)
}

// A release whose first attempt's answer is lost (the connection drops after
// the server released) and whose retry is answered N must be recorded as
// unknown, not as "not held": the first attempt may have released the
// ticket. Recorded as N, the checker would report a correct history as not
// linearizable (it did, in a 10-minute run).
func TestReleaseNAfterLostAnswerIsUnknown(t *testing.T) {
	var mu sync.Mutex
	releases := 0
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{Interval: time.Second}); err != nil {
			return
		}
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			switch f.Type {
			case wire.TypePing:
				c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
			case wire.TypeAcquire:
				c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 7, LeaseMs: uint32(f.Lease) * 1000})
			case wire.TypeRelease:
				mu.Lock()
				releases++
				first := releases == 1
				mu.Unlock()
				if first {
					c.Close() // released, but the answer is lost
					return
				}
				c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			}
		}
	})
	h := NewHistory()
	w := NewWorkload(WorkloadConfig{Workers: 1, Keys: 1}, srv.Addr(), h)
	b, err := ticketing.Connect(srv.Addr(), ticketing.WithDialTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tk := w.acquire(0, b, "k0", 0, 2*time.Second)
	if tk == nil {
		t.Fatalf("no grant: %v", h.Ops())
	}
	w.release(0, b, tk)
	ops := h.Ops()
	rel := ops[len(ops)-1]
	mu.Lock()
	n := releases
	mu.Unlock()
	if n != 2 {
		t.Fatalf("the client sent %d releases, want 2 (the first answer lost, then a retry): %v", n, rel)
	}
	if rel.Kind != Release || rel.Outcome != Unknown {
		t.Fatalf("recorded %v, want an unknown release", rel)
	}
}
