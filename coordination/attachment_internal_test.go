package coordination

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestCloseWaitsForAnEndUnderWay: the server's SESSION_ENDED after a stop
// ends the session on a goroutine of its own; Close, finding the session
// already ended, must not return before that end has ended the session's
// Context and leases, or its caller would see them alive after Close.
func TestCloseWaitsForAnEndUnderWay(t *testing.T) {
	life := &clientLife{}
	life.sessions = 1
	a := newAttachment(connLayer{}, slog.New(slog.DiscardHandler), life, "/n")
	a.ctx, a.cancel = context.WithCancelCause(context.Background())
	close(a.done) // no run loop in this test
	inHook := make(chan struct{})
	release := make(chan struct{})
	a.hooks = attachmentHooks{ended: func(error) {
		close(inHook)
		<-release
	}}
	// The first end stops inside its hooks: the session is marked ended,
	// the leases not yet.
	go a.end(errors.New("ended on the server"))
	<-inHook
	closed := make(chan error, 1)
	go func() { closed <- a.close(context.Background()) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the session's end was still under way")
	case <-time.After(200 * time.Millisecond):
		// Close is still waiting: what this test looks for (no condition
		// can show that something has not happened yet).
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the end was over")
	}
	if a.ctx.Err() == nil {
		t.Fatal("the session's context is alive after Close")
	}
}
