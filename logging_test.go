package ticketing

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of the client's logging (doc.go, "Logging").

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
