// Package node wires Ticketing's state machine to hashicorp/raft: the log
// and stable store of package logstore (one fsync per append, an earlier
// version's raft.db migrated into it at the first start), a file snapshot
// store, a TCP or TLS transport between servers, and the raft.FSM adapter
// that applies committed batches to an fsm.State under a lock so the server
// can read it.
//
// A single server is a one-voter Raft cluster, so there is one code path from
// a laptop to a five-server cluster.
//
//	n, err := node.Open(node.Config{ID: "n1", RaftAddr: "127.0.0.1:5226", Dir: dir})
//	f := n.Raft().Apply(fsm.AppendBatch(nil, &batch), 0)
//	if f.Error() == nil { res := f.Response().(*node.Applied) }
package node
