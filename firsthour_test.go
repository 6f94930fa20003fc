package ticketing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the behaviours a developer meets in the first hour (issue 19).

// A ticket's context ends at the conservative deadline, with a cause that
// names the ticket.
func TestTicketContextEndsAtTheConservativeDeadline(t *testing.T) {
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		if f.Type == wire.TypeAcquire {
			// A 400 ms lease: the conservative deadline is about 300 ms
			// after the send.
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 7, LeaseMs: 400})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "job", 0, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	work, cancel := tk.Context(ctx)
	defer cancel()
	// Not later than the conservative deadline: the lease may end at the
	// server soon after it (waiting for Done alone would not tell).
	if dl, ok := work.Deadline(); !ok || !dl.Equal(tk.Deadline()) {
		t.Errorf("the ticket's context has deadline %v (set %v), want the ticket's deadline %v", dl, ok, tk.Deadline())
	}
	select {
	case <-work.Done():
	case <-time.After(patience):
		t.Fatal("the ticket's context was not done after its deadline")
	}
	if !errors.Is(work.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, want context.DeadlineExceeded", work.Err())
	}
	if c := context.Cause(work); !errors.Is(c, ErrTicketExpired) || !strings.Contains(c.Error(), "token 7") {
		t.Errorf("Cause = %v, want ErrTicketExpired naming token 7", c)
	}
	if time.Now().Before(tk.Deadline()) {
		t.Errorf("the context ended before the ticket's deadline")
	}
}

// Release (and Close) end every context of the ticket at once, including
// one taken after the release started; the parent is not affected.
func TestTicketContextEndsAtRelease(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, normal(l)))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	for _, how := range []string{"Release", "Close"} {
		tk, err := b.Acquire(ctx, "job-"+how, 0, 30*time.Second, 0)
		if err != nil {
			t.Fatal(err)
		}
		work, cancel := tk.Context(ctx)
		defer cancel()
		if work.Err() != nil {
			t.Fatalf("%s: the context is done before the release: %v", how, work.Err())
		}
		if how == "Release" {
			if err := tk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			tk.Close()
		}
		select {
		case <-work.Done():
		default:
			t.Fatalf("%s: the ticket's context is not done once the release started", how)
		}
		if c := context.Cause(work); !errors.Is(c, ErrTicketReleased) {
			t.Errorf("%s: Cause = %v, want ErrTicketReleased", how, c)
		}
		late, cancelLate := tk.Context(ctx)
		if !errors.Is(context.Cause(late), ErrTicketReleased) {
			t.Errorf("%s: a context taken after the release is not done with ErrTicketReleased: %v", how, context.Cause(late))
		}
		cancelLate()
		if ctx.Err() != nil {
			t.Fatalf("%s: the parent context ended", how)
		}
	}
}

// The broker writes nothing into the application's default logger unless it
// was given a logger: an expected "not held" after a lease ran out is the
// release observer's business, not a WARN in the application's log.
func TestNoLoggingIntoTheDefaultLogger(t *testing.T) {
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	srv := faketicketd.Start(t, script(nil, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		switch f.Type {
		case wire.TypeAcquire:
			grant(c, f, 9)
		case wire.TypeRelease:
			c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID}) // the lease ran out
		}
		return true
	}))
	obs := newObserved()
	b, err := Connect(srv.Addr(), fast, obs.option())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "nightly", 0, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Close()
	if got := obs.wait(t, 9); !errors.Is(got.err, ErrNotHeld) {
		t.Fatalf("observer: %v, want ErrNotHeld", got.err)
	}
	srv.Close() // a connection that ends is not logged either
	b.Close()
	if logged.Len() != 0 {
		t.Errorf("the broker wrote into slog.Default without being given a logger:\n%s", logged.String())
	}
}

// Error texts stay readable: a 1,025-byte key is not printed whole, and
// durations are given in seconds, the unit of the protocol and the docs.
func TestErrorTextsShortKeysAndSeconds(t *testing.T) {
	b := connect(t, "127.0.0.1:1") // nothing is sent for invalid arguments
	ctx := ctxFor(t)
	_, err := b.Acquire(ctx, strings.Repeat("k", 1025), 0, time.Second, 0)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long key: %v", err)
	}
	if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "(1025 bytes)") {
		t.Errorf("long key: the message is %d bytes or does not give the key's length: %s", len(msg), msg)
	}
	_, err = b.Acquire(ctx, "k", 0, 5*time.Minute, 0)
	if msg := err.Error(); !strings.Contains(msg, "lease 300 s is 300 s rounded up, longer than the maximum 250 s") {
		t.Errorf("long lease: %s", msg)
	}
}

// A Release of which nothing was sent (its context had ended) leaves the
// ticket releasable: the deferred Close of the README's pattern still sends
// the release, instead of leaving the key held for its whole lease.
func TestUnsentReleaseLeavesTheTicketToClose(t *testing.T) {
	r := newRec()
	l := newLocks(t)
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, normal(l)))
	obs := newObserved()
	b := connect(t, srv.Addr(), obs.option())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "request-scoped", 0, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel() // the request's context ended before the release
	if err := tk.Release(done); err == nil || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("Release with an ended context: %v, want a not-sent error", err)
	}
	if n := r.count(isType(wire.TypeRelease)); n != 0 {
		t.Fatalf("%d releases reached the server from an ended context", n)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if got := obs.wait(t, tk.Token()); got.err != nil {
		t.Fatalf("the deferred Close did not release the ticket: %v", got.err)
	}
	r.wait(t, 1, isType(wire.TypeRelease))
}
