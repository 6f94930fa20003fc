// Package fsm is Ticketing's replicated state machine: which keys are held,
// by whom, under which fencing token, and until when; the cluster's
// identity; and, through package coordsm, the coordination nodes.
//
// It is pure and deterministic. It reads no clock, does no I/O and starts no
// goroutines: every replica applies the same committed Batch to the same
// State and reaches the same result. Time arrives inside each Batch, stamped
// by the leader; the state machine never lets it go backwards.
//
// The package is the dispatcher. Each Op's kind is registered once with the
// part of the state that owns it (kinds.go): the ticket operations and the
// cluster identity are applied here, the coordination operations (nodes,
// sessions, counting semaphores and their waiters) by package coordsm. The
// only state the two share is the fencing-token counter, which the
// dispatcher owns and passes to coordsm with each op: a semaphore's order
// ids are drawn from it, so they are fencing tokens too. Log entries and
// snapshots are encoded here (codec.go), with coordsm writing its own ops'
// fields and its own snapshot section.
//
// A ticket is an exclusive Hold on a key, owned by a lease. The cluster
// identity (the cluster ID and its participants) is kept so that a server
// that lost its data is recognised.
//
// The queue of ticket waiters is not here. Ticket waiters belong to client
// connections, which live on the leader only, so the leader keeps the FIFO
// queues and proposes an Acquire for the head waiter when a key becomes
// free, in the same Batch as the Release or Expire that frees it (one
// commit per handoff). Semaphore waiters, by contrast, are replicated, so a
// session keeps its place across a dropped connection and a leader change.
//
//	s := fsm.New()
//	res := s.Apply(fsm.Batch{Time: 1000, Ops: []fsm.Op{
//		{Kind: fsm.OpAcquire, Key: "orders/42", Owner: owner, LeaseMs: 30000},
//	}})
//	// res[0].Status == fsm.Granted, res[0].Token == 1
package fsm
