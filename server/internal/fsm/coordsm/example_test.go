package coordsm_test

import (
	"fmt"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// A session takes the one unit of a semaphore; a second session queues
// behind it and is granted when the first releases. The order ids come from
// the token counter the caller (the fsm dispatcher) owns.
func Example() {
	const now = 1_700_000_000_000
	c, tokens := coordsm.New(), uint64(41) // 41 tokens granted before
	c.Apply(now, coordsm.CreateNode, &coordsm.Op{Path: "/locks"}, &tokens)
	start := func() uint64 {
		return c.Apply(now, coordsm.Attach, &coordsm.Op{Path: "/locks", SeqNo: 1, TimeoutMs: 10000}, &tokens).Session
	}
	a, b := start(), start()
	c.Apply(now, coordsm.CreateSem, &coordsm.Op{Session: a, SeqNo: 1, Name: "db", Limit: 1}, &tokens)

	r := c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: a, SeqNo: 1, Name: "db", Count: 1}, &tokens)
	fmt.Println("a:", r.Status, "acquired", r.Acquired, "order", r.OrderID)
	r = c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: b, SeqNo: 1, Name: "db", Count: 1, TimeoutMs: 5000}, &tokens)
	fmt.Println("b:", r.Status, "queued", r.Queued, "order", r.OrderID)
	r = c.Apply(now, coordsm.Release, &coordsm.Op{Session: a, SeqNo: 1, Name: "db"}, &tokens)
	for _, e := range r.Events {
		if e.Kind == coordsm.EventGranted {
			fmt.Println("granted to session", e.Session, "order", e.OrderID)
		}
	}
	fmt.Println("tokens drawn:", tokens)
	// Output:
	// a: SUCCESS acquired true order 42
	// b: SUCCESS queued true order 43
	// granted to session 2 order 43
	// tokens drawn: 43
}
