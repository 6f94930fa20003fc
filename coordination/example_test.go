package coordination_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
)

// At most three workers at a time: a semaphore with limit 3, one unit each.
func Example() {
	ctx := context.Background()
	c, err := coordination.New("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateNode(ctx, "/jobs", coordination.NodeConfig{}); err != nil && !errors.Is(err, coordination.ErrAlreadyExists) {
		log.Fatal(err)
	}
	s, err := c.Session(ctx, "/jobs", coordination.WithTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.CreateSemaphore(ctx, "workers", 3, nil); err != nil && !errors.Is(err, coordination.ErrAlreadyExists) {
		log.Fatal(err)
	}
	lease, err := s.AcquireSemaphore(ctx, "workers", coordination.Shared())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// Work under lease.Context(): it ends if the hold is lost. Pass
	// lease.Token() to the fence package to fence the writes.
	<-lease.Context().Done()
}
