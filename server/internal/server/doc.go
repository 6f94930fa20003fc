// Package server is ticketd: it accepts client connections, authenticates
// them, and serves tickets on the Raft leader.
//
// Each connection has a reader goroutine that decodes and checks requests
// (conn.go; coord.go for coordination requests) and hands them to the
// leader's core (package core), and a writer goroutine that flushes every
// queued answer with one write. The core answers through the connection's
// core.Replier (replier.go) and reaches Raft, metrics, quotas and the
// serving state through adapters (core_ports.go). Around them: the hello
// and authorization (auth.go), per-principal quotas (quota.go), admin
// requests (admin.go), the operator's console (console.go), configuration
// (config.go) and the lifecycle (server.go). docs/design.md explains the
// design.
//
//	cfg := server.DefaultConfig()
//	cfg.DataDir = "/var/lib/ticketd"
//	srv, err := server.New(cfg) // validates, opens Raft, serves
//	...
//	srv.Shutdown(ctx)           // hands leadership over, then stops
package server
