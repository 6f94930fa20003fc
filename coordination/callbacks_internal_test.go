package coordination

import (
	"testing"
	"time"
)

// A callback that blocks never blocks the one who queues the next ones
// (the connection's reader, or a goroutine holding the session's lock):
// they wait in the queue and then run in order.
func TestCallbackQueueNeverBlocksThePusher(t *testing.T) {
	var q callbackQueue
	release := make(chan struct{})
	var got []int
	q.push(func() { <-release })
	pushed := make(chan struct{})
	go func() {
		for i := range 1000 {
			q.push(func() { got = append(got, i) })
		}
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(30 * time.Second):
		t.Fatal("pushing blocked behind a blocked callback")
	}
	close(release)
	select {
	case <-q.flushed():
	case <-time.After(30 * time.Second):
		t.Fatal("the queued callbacks never ran")
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("callback %d ran as number %d: out of order", v, i)
		}
	}
	if len(got) != 1000 {
		t.Fatalf("%d callbacks ran, want 1000", len(got))
	}
}
