package ticketing

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of Acquire's argument checks (doc.go, "Arguments").

// doc.go, "Arguments": argument ranges, rounding up, rejection before
// sending.
func TestArguments_InvalidRejectedBeforeSending(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, normal(newLocks(t))))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	s := time.Second
	cases := []struct {
		name                string
		key                 string
		wait, lease, budget time.Duration
	}{
		{"empty key", "", s, s, 0},
		{"key over 1024 bytes", strings.Repeat("k", 1025), s, s, 0},
		{"negative wait", "k", -1, s, 0},
		{"wait over 255 s after rounding up", "k", 255*s + 1, s, 0},
		{"zero lease", "k", 0, 0, 0},
		{"negative lease", "k", 0, -s, 0},
		{"lease over 250 s after rounding up", "k", 0, 250*s + time.Millisecond, 0},
		{"negative budget", "k", 0, s, -1},
		{"budget over the rounded lease", "k", 0, s / 2, 1500 * time.Millisecond},
		{"work over 250 s", "k", 0, 250 * s, 251 * s},
		// A budget no grant of that lease could ever
		// leave is refused before a token is spent on it.
		{"budget equal to the rounded lease", "k", 0, 2500 * time.Millisecond, 3 * s},
		{"budget above what the lease can leave", "k", 0, 30 * s, 29700 * time.Millisecond},
		// The budget rounds up like wait and lease.
		{"budget that rounds up past what the lease leaves", "k", 0, 10 * s, 9500 * time.Millisecond},
	}
	for _, c := range cases {
		tk, err := b.Acquire(ctx, c.key, c.wait, c.lease, c.budget)
		if !errors.Is(err, ErrInvalidArgument) || tk != nil {
			t.Errorf("%s: got %v, want ErrInvalidArgument", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), "nothing was sent") {
			t.Errorf("%s: the error does not say that nothing was sent: %v", c.name, err)
		}
		if errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotAcquired) {
			t.Errorf("%s: %v also matches another kind", c.name, err)
		}
	}
	if _, err := b.Describe(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Describe with an empty key: %v", err)
	}

	// Fractions round up; the boundaries are accepted; zero wait stays zero.
	tk, err := b.Acquire(ctx, "round", 1200*time.Millisecond, 2500*time.Millisecond, 1500*time.Millisecond)
	if err != nil {
		t.Fatalf("wait 1.2 s, lease 2.5 s, budget 1.5 s (2 s of a 3 s lease): %v", err)
	}
	tk.Release(ctx)
	first := r.wait(t, 1, isType(wire.TypeAcquire))
	if got := string(first.f.Key); got != "round" {
		t.Fatalf("an invalid acquire was sent: first acquire on the wire is for %q", got)
	}
	if first.f.Wait != 2 || first.f.Lease != 3 {
		t.Errorf("wait 1.2 s and lease 2.5 s went out as %d s and %d s, want 2 and 3", first.f.Wait, first.f.Lease)
	}
	tk, err = b.Acquire(ctx, strings.Repeat("x", 1024), 255*s, 250*s, 0)
	if err != nil {
		t.Fatalf("boundary values: %v", err)
	}
	tk.Release(ctx)
	tk, err = b.Acquire(ctx, "zero", 0, time.Nanosecond, 0)
	if err != nil {
		t.Fatalf("wait 0, lease 1 ns: %v", err)
	}
	tk.Release(ctx)
	z := r.wait(t, 1, isAcquireOf("zero"))
	if z.f.Wait != 0 || z.f.Lease != 1 {
		t.Errorf("wait 0 / lease 1 ns went out as %d s / %d s, want 0 / 1", z.f.Wait, z.f.Lease)
	}
	if n := r.count(isType(wire.TypeAcquire)); n != 3 {
		t.Errorf("%d acquires reached the server, want 3", n)
	}
}

// The work budget is rounded up to whole seconds like wait and lease: a
// grant with about 9.8 s of conservative time does not satisfy a 9.5 s
// budget (10 s rounded up).
func TestBudgetRoundedUp(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch f.Type {
		case wire.TypeAcquire:
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 3, LeaseMs: 10000})
		case wire.TypeRelease:
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", 0, 20*time.Second, 9500*time.Millisecond)
	if err == nil {
		tk.Release(ctx)
		t.Fatalf("a 9.5 s budget was met by %v of conservative time: it must count as 10 s", tk.Remaining())
	}
	if !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("acquire: %v, want ErrBudgetExceeded", err)
	}
}
