package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/ticketing-io/ticketing"
)

var membersCmd = &command{
	name:    "members",
	args:    "add ID RAFTADDR | remove ID",
	summary: "add a voter (started with --join) or remove a server; sent to the leader",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) == 0 {
				return usageErrorf("members needs a subcommand: add ID RAFTADDR, or remove ID")
			}
			switch sub, rest := args[0], args[1:]; sub {
			case "add":
				if len(rest) != 2 {
					return usageErrorf("members add takes ID RAFTADDR, got %d arguments", len(rest))
				}
				if _, _, err := net.SplitHostPort(rest[1]); err != nil {
					return usageErrorf("members add: RAFTADDR %q is not host:port", rest[1])
				}
				return runMembersAdd(e, rest[0], rest[1])
			case "remove":
				if len(rest) != 1 {
					return usageErrorf("members remove takes one ID, got %d arguments", len(rest))
				}
				return runMembersRemove(e, rest[0])
			default:
				return usageErrorf("unknown members subcommand %q: want add or remove", sub)
			}
		}
	},
}

func init() {
	commandDetails["members"] = `members add ID RAFTADDR adds the server with node id ID, reachable for
Raft at RAFTADDR, as a voter. Start that server first with --join and an
empty data directory. members remove ID removes a server (stop it after).
Both return once the configuration change is committed. They are sent to
the leader: ticketctl follows a follower's answer naming the leader, and
tries the --addr addresses in turn.
`
}

type membersResult struct {
	Op       string `json:"op"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	Leader   string `json:"leader"` // client address of the node that did it
	OK       bool   `json:"ok"`
}

func runMembersAdd(e *env, id, raftAddr string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	leader, err := e.onLeader(ctx, func(ctx context.Context, a *ticketing.Admin) error {
		return a.AddMember(ctx, id, raftAddr)
	})
	if err != nil {
		return err
	}
	res := membersResult{Op: "add", ID: id, RaftAddr: raftAddr, Leader: leader, OK: true}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "added member %s (raft %s) via leader %s\n", id, raftAddr, leader)
	})
}

func runMembersRemove(e *env, id string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	leader, err := e.onLeader(ctx, func(ctx context.Context, a *ticketing.Admin) error {
		return a.RemoveMember(ctx, id)
	})
	if err != nil {
		return err
	}
	res := membersResult{Op: "remove", ID: id, Leader: leader, OK: true}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "removed member %s via leader %s\n", id, leader)
	})
}
