package node

import (
	"errors"

	"github.com/hashicorp/raft"
)

// voteGate is the Raft transport with one rule of the identity protocol
// enforced where Raft votes: a server whose data directory is empty never
// grants a vote (nor a pre-vote). An empty directory cannot tell a server
// that never took part from one that lost what it acknowledged, and the
// vote of the latter would let a stale server found a second history. The
// handshake already keeps such a server from candidates without a cluster
// ID; this gate holds even over a connection made before it lost its state
// mattered (a connection accepted from the leader that was admitting it).
type voteGate struct {
	healthTransport
	mayVote func() string // "" when this server may vote, else why not
	ch      chan raft.RPC
}

func newVoteGate(t healthTransport, mayVote func() string, done <-chan struct{}) *voteGate {
	g := &voteGate{healthTransport: t, mayVote: mayVote, ch: make(chan raft.RPC)}
	go g.run(done)
	return g
}

// Consumer returns the RPCs that Raft is to handle.
func (g *voteGate) Consumer() <-chan raft.RPC { return g.ch }

func (g *voteGate) run(done <-chan struct{}) {
	in := g.healthTransport.Consumer()
	for {
		select {
		case <-done:
			return
		case rpc := <-in:
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
				if why := g.mayVote(); why != "" {
					rpc.Respond(nil, errors.New(why))
					continue
				}
			}
			select {
			case g.ch <- rpc:
			case <-done:
				return
			}
		}
	}
}
