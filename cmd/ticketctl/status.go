package main

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ticketing-io/ticketing"
)

var statusCmd = &command{
	name:    "status",
	args:    "",
	summary: "show the first --addr node's view: node id, role, leader, term, commit index, members",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) != 0 {
				return usageErrorf("status takes no arguments, got %q", args)
			}
			return runStatus(e)
		}
	},
}

type statusResult struct {
	NodeID       string             `json:"node_id"`
	Role         string             `json:"role"`
	Leader       string             `json:"leader"`
	LeaderAddr   string             `json:"leader_addr"`
	Term         uint64             `json:"term"`
	CommitIndex  uint64             `json:"commit_index"`
	AppliedIndex uint64             `json:"applied_index"`
	LastToken    uint64             `json:"last_token"`
	Held         int                `json:"held"`
	Members      []ticketing.Member `json:"members"`
}

func runStatus(e *env) error {
	ctx, cancel := e.context(0)
	defer cancel()
	addrs := e.addrList()
	if len(addrs) == 0 {
		return usageErrorf("--addr is empty")
	}
	// Any node answers status: ask the first one, whatever its role, so
	// that each node's own view can be inspected.
	a, err := ticketing.DialAdmin(ctx, addrs[0], e.adminOptions()...)
	if err != nil {
		return err
	}
	defer a.Close()
	s, err := a.Status(ctx)
	if err != nil {
		return err
	}
	res := statusResult{
		NodeID: s.NodeID, Role: s.Role, Leader: s.LeaderID, LeaderAddr: s.LeaderAddr,
		Term: s.Term, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex,
		LastToken: s.LastToken, Held: s.Held, Members: s.Members,
	}
	if res.Members == nil {
		res.Members = []ticketing.Member{}
	}
	return e.emit(res, func(w io.Writer) {
		leader := s.LeaderID
		if leader == "" {
			leader = "(none known)"
		} else if s.LeaderAddr != "" {
			leader += " (" + s.LeaderAddr + ")"
		}
		fmt.Fprintf(w, "node_id: %s\nrole: %s\nleader: %s\nterm: %d\ncommit_index: %d\napplied_index: %d\nlast_token: %d\nheld: %d\nmembers:\n",
			s.NodeID, s.Role, leader, s.Term, s.CommitIndex, s.AppliedIndex, s.LastToken, s.Held)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tRAFT ADDRESS\tCLIENT ADDRESS\tVOTER\tLEADER")
		for _, m := range s.Members {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, orDash(m.ClientAddr), yesNo(m.Voter), yesNo(m.Leader))
		}
		tw.Flush()
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
