package coordination_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// At most three workers at a time: a semaphore with limit 3, one unit each.
func Example() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
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

// One Ticketing client for tickets and coordination: the coordination
// client uses the broker's connection, its options (token, TLS, dialer,
// logger) and its leader following.
func ExampleNew() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225", ticketing.WithToken("s3cret"),
		ticketing.WithTLS(ticketing.TLSCAFile("ca.crt")))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// A ticket and a session, over the same connection to the leader.
	t, err := b.Acquire(ctx, "report-2026-12", 0, time.Minute, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Release(ctx)
	s, err := c.Session(ctx, "/jobs")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
}

// A lock whose token fences the work it protects.
func ExampleSession_Mutex() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx, "/jobs")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	m := s.Mutex("nightly-report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	// Run the job under m.Context(); send m.Token() with every write so
	// that a store checking it (package fence) refuses a former holder.
	log.Printf("holding the lock with token %d", m.Token())
}

// One leader among many instances, and everyone knows who it is.
func ExampleSession_Election() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx, "/svc")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	e := s.Election("primary")
	go func() {
		for li := range e.Observe(ctx) { // every leader change, from any instance
			log.Printf("leader is session %d at %s", li.Session, li.Data)
		}
	}()
	lead, err := e.Campaign(ctx, []byte("10.0.0.7:8080")) // waits until this instance leads
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("leading with token %d", lead.Token)
	<-lead.Context.Done() // lead until leadership is lost (resigned, the session ended or its deadline passed)
}

// A singleton job that runs every minute under one leadership, fenced in
// a database: each run checks the leader's token and a run counter in the
// fenced row, so a former leader (paused past its deadline, say) can write
// nothing, and one leadership can run the job many times.
func ExampleElection_Campaign() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx, "/cron", coordination.WithTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	lead, err := s.Election("nightly-report").Campaign(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for run := uint64(1); ; run++ {
		select {
		case <-lead.Context.Done():
			log.Printf("leadership lost: %v", context.Cause(lead.Context))
			return
		case <-tick.C:
		}
		// In one transaction of the store:
		//   UPDATE job_fence SET token = $token, run = $run
		//     WHERE name = 'nightly-report' AND (token < $token OR (token = $token AND run < $run))
		// and do the run's writes only if one row changed. A new leader has a
		// larger token; the same leader counts its runs.
		log.Printf("run %d under token %d", run, lead.Token)
	}
}

// Service discovery: register this instance's endpoint, follow the others.
func ExampleSession_Discovery() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx, "/svc", coordination.WithTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx) // deregisters; a crashed instance is gone 10 s after its connection
	d := s.Discovery("api")
	if _, err := d.Register(ctx, []byte("10.0.0.7:8080")); err != nil {
		log.Fatal(err)
	}
	for eps := range d.Watch(ctx) {
		for _, ep := range eps {
			log.Printf("api at %s (session %d)", ep.Data, ep.Session)
		}
	}
}

// Configuration publication: one publisher, many followers.
func ExampleSession_Publication() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225,10.0.0.2:5225,10.0.0.3:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx, "/cfg")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	p := s.Publication("rate-limits")
	if err := p.Publish(ctx, []byte(`{"rps": 100}`)); err != nil {
		log.Fatal(err)
	}
	for v := range p.Watch(ctx) { // the value now, then every change
		log.Printf("rate limits: %s", v)
	}
}

// Who is connected to a node.
func ExampleClient_ListSessions() {
	ctx := context.Background()
	b, err := ticketing.Connect("10.0.0.1:5225")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ss, err := c.ListSessions(ctx, "/jobs")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range ss {
		log.Printf("session %d %q attached=%v timeout=%v", s.ID, s.Description, s.Attached, s.Timeout)
	}
}
