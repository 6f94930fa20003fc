// Package coordsm is the replicated state machine of coordination nodes
// (docs/coordination.md): nodes addressed by path, each with sessions and
// counting semaphores whose waiters queue in the replicated state.
//
// Its rules are those of package fsm, which dispatches to it: pure and
// deterministic, no clock, no I/O, no goroutines, time stamped by the
// leader. It shares one thing with the ticket state: the fencing-token
// counter, passed to Apply by the dispatcher that owns it, from which every
// grant and every queued acquire draws its order id.
//
// Each operation is a command in its own file (node_*.go, session_*.go,
// sem_*.go): its kind number, the fields of Op its log entry carries, how
// it changes the state, and the wire request that asks for it with how the
// decoded request becomes its op (ForRequest, RequestOf: the leader looks
// commands up instead of knowing each). AppendOp and DecodeOp encode an
// op's fields; AppendSnapshot and ReadSnapshot write and read the
// coordination section of a snapshot. The numbers of kinds are the log's,
// those of statuses the wire's (Status is that numbering), and never
// change.
//
//	c, tokens := coordsm.New(), uint64(0)
//	r := c.Apply(now, coordsm.CreateNode, &coordsm.Op{Path: "/locks"}, &tokens)
//	r = c.Apply(now, coordsm.Attach, &coordsm.Op{Path: "/locks", SeqNo: 1, TimeoutMs: 10000}, &tokens)
//	session := r.Session
//	c.Apply(now, coordsm.CreateSem, &coordsm.Op{Session: session, SeqNo: 1, Name: "db", Limit: 1}, &tokens)
//	r = c.Apply(now, coordsm.Acquire, &coordsm.Op{Session: session, SeqNo: 1, Name: "db", Count: 1}, &tokens)
//	// r.Acquired, r.OrderID == tokens == 1
package coordsm
