// Package server is ticketd: it accepts client connections, authenticates
// them, and serves tickets on the Raft leader.
//
// One goroutine, the core, owns all leader-local state: the FIFO queue of
// each key, the batch being gathered, and the timers for waits and leases.
// Connection readers decode requests and hand them to the core; the core
// gathers every request that is ready into one Raft entry (group commit),
// keeps at most a few entries in flight, and answers each request when the
// entry that decides it is applied. Answers go to a per-connection buffer that
// one writer goroutine flushes with a single write. The core reaches Raft,
// the applied state, metrics and the clock only through small interfaces
// (core_ports.go), so its unit tests run on fakes without Raft.
// docs/design.md explains
// the design and the rules it keeps (one commit per handoff, leases never
// shortened, FIFO under pipelining).
//
//	cfg := server.DefaultConfig()
//	cfg.DataDir = "/var/lib/ticketd"
//	srv, err := server.New(cfg) // validates, opens Raft, serves
//	...
//	srv.Shutdown(ctx)           // hands leadership over, then stops
package server
