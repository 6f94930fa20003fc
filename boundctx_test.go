package ticketing

import (
	"context"
	"errors"
	"testing"
	"time"
)

// boundCtx ends like context.WithDeadline(parent, deadline): at the deadline
// with DeadlineExceeded, or with the parent's error when the parent ends
// first; Err works without building the deadline context.
func TestBoundCtxEndsLikeWithDeadline(t *testing.T) {
	c := &boundCtx{Context: context.Background(), deadline: time.Now().Add(50 * time.Millisecond)}
	defer c.cancel()
	if err := c.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	if c.derived != nil {
		t.Fatal("Err built the deadline context")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", err)
	}
	if d, ok := c.Deadline(); !ok || !d.Equal(c.deadline) {
		t.Fatalf("Deadline %v %v, want %v", d, ok, c.deadline)
	}

	parent, cancel := context.WithCancel(context.Background())
	p := &boundCtx{Context: parent, deadline: time.Now().Add(time.Hour)}
	defer p.cancel()
	cancel()
	if err := p.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after the parent was cancelled: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the parent was cancelled")
	}

	// A deadline already past: ended at once.
	q := &boundCtx{Context: context.Background(), deadline: time.Now().Add(-time.Second)}
	defer q.cancel()
	if err := q.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err with a past deadline: %v", err)
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("Done open with a past deadline")
	}
	// cancel without a Done: nothing was built, nothing to stop.
	r := &boundCtx{Context: context.Background(), deadline: time.Now().Add(time.Hour)}
	r.cancel()
	if r.derived != nil {
		t.Fatal("cancel built the deadline context")
	}
}
