package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ticketing-io/ticketing"
)

var leaderCmd = &command{
	name:    "leader",
	args:    "transfer [ID]",
	summary: "hand leadership to voter ID (any voter when omitted); sent to the leader",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) == 0 || args[0] != "transfer" {
				return usageErrorf("leader needs the subcommand transfer [ID]")
			}
			if len(args) > 2 {
				return usageErrorf("leader transfer takes at most one ID, got %d arguments", len(args)-1)
			}
			id := ""
			if len(args) == 2 {
				id = args[1]
			}
			return runLeaderTransfer(e, id)
		}
	},
}

type leaderResult struct {
	Leader string `json:"leader"`
	From   string `json:"from"` // client address of the old leader
}

func runLeaderTransfer(e *env, id string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	var newLeader string
	from, err := e.onLeader(ctx, func(ctx context.Context, a *ticketing.Admin) error {
		var err error
		newLeader, err = a.TransferLeader(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	if newLeader == "" {
		// The old leader answers as soon as it stepped down, possibly before
		// it heard from its successor. A transfer to a named voter that
		// succeeded went to that voter.
		newLeader = id
	}
	res := leaderResult{Leader: newLeader, From: from}
	return e.emit(res, func(w io.Writer) {
		if newLeader == "" {
			fmt.Fprintf(w, "leadership transferred away from %s; the new leader is not known yet (see ticketctl status)\n", from)
			return
		}
		fmt.Fprintf(w, "leadership transferred from %s to %s\n", from, newLeader)
	})
}
