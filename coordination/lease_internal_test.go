package coordination

import (
	"context"
	"sync"
	"testing"
)

// A re-acquire of a hold the session has (the same token, a lower or the
// same count) updates the lease it already returned, while the lease's
// owner may be reading Count on another goroutine: run under -race, this
// fails if the count is not read and written atomically.
func TestLeaseCountWhileTheHoldIsReacquired(t *testing.T) {
	var tb leaseTable
	le := tb.grant(nil, context.Background(), "s", 7, 5)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 1000 {
			if got := tb.grant(nil, context.Background(), "s", 7, uint64(5-i%5)); got != le {
				t.Error("a re-acquire of the same hold returned a new lease")
				return
			}
		}
	}()
	for range 1000 {
		if c := le.Count(); c < 1 || c > 5 {
			t.Fatalf("Count %d during re-acquires of counts 1 to 5", c)
		}
	}
	wg.Wait()
	tb.grant(nil, context.Background(), "s", 7, 2)
	if c := le.Count(); c != 2 {
		t.Fatalf("Count %d after a re-acquire with count 2", c)
	}
}
