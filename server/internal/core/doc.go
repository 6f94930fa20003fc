// Package core is the leader's core: one goroutine that owns all
// leader-local state of ticketd — the FIFO queue of each key, the batch
// being gathered, the timers for waits, leases and coordination deadlines,
// and which connection carries which coordination session.
//
// Connection readers (package server) decode and check requests and hand
// them to the core with Submit; the core gathers every request that is
// ready into one Raft entry (group commit), keeps at most a few entries in
// flight, and answers each request when the entry that decides it is
// applied. It answers only through the request's Replier, which the
// connection implements: the core never reads or changes a connection's
// state. It reaches Raft, the applied state, metrics, quotas and the clock
// only through Ports, so its unit tests run on fakes, with no Raft, no
// sockets and a clock the test moves. docs/design.md explains the rules it
// keeps (one commit per handoff, leases never shortened, FIFO under
// pipelining, deadlines across leaders).
//
//	c := core.New(core.Ports{Log: raftLog, State: node, Server: srv, Metrics: m,
//		Config: core.Config{NodeID: "n1", Advertise: "10.0.0.1:5225", Limits: limits},
//		Logger: slog.Default(), Clock: core.WallClock{}})
//	go c.Run()
//	c.LeaderChange(core.Leadership{Leader: true, Term: 3}) // from the Raft watcher
//	c.Submit(core.Request{Kind: wire.TypeAcquire, Conn: conn, ID: 1, Key: "k", Wait: 5, Lease: 30, At: time.Now()})
//	...
//	c.ConnClosed(conn) // after the connection's last Submit
//	c.Stop()
//	<-c.Drained()
package core
