// Package fsm is Ticketing's replicated state machine: which keys are held,
// by whom, under which fencing token, and until when.
//
// It is pure and deterministic. It reads no clock, does no I/O and starts no
// goroutines: every replica applies the same committed Batch to the same
// State and reaches the same result. Time arrives inside each Batch, stamped
// by the leader; the state machine never lets it go backwards.
//
// A ticket is an exclusive Hold on a key, owned by a lease. Coordination
// nodes (coord.go: nodes, sessions, counting semaphores and their waiters,
// watches' change events) live beside the tickets and share only the token
// counter with them: a semaphore holds up to its limit, and a hold owned by a
// session instead of a lease ends with its session. The cluster identity
// (the cluster ID and its participants) is kept here too, so that a server
// that lost its data is recognised.
//
// The queue of ticket waiters is not here. Ticket waiters belong to client connections,
// which live on the leader only, so the leader keeps the FIFO queues and
// proposes an Acquire for the head waiter when a key becomes free, in the same
// Batch as the Release or Expire that frees it (one commit per handoff).
//
//	s := fsm.New()
//	res := s.Apply(fsm.Batch{Time: 1000, Ops: []fsm.Op{
//		{Kind: fsm.OpAcquire, Key: "orders/42", Owner: owner, LeaseMs: 30000},
//	}})
//	// res[0].Status == fsm.Granted, res[0].Token == 1
package fsm
