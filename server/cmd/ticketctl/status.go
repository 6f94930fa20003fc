package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ticketing-io/ticketing"
)

var statusCmd = &command{
	name:    "status",
	args:    "",
	summary: "show the first reachable --addr node's view: node id, role, leader, term, commit index, members",
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
	NodeID       string         `json:"node_id"`
	Role         string         `json:"role"`
	Leader       string         `json:"leader"`
	LeaderAddr   string         `json:"leader_addr"`
	Term         uint64         `json:"term"`
	CommitIndex  uint64         `json:"commit_index"`
	AppliedIndex uint64         `json:"applied_index"`
	LastToken    uint64         `json:"last_token"`
	Held         int            `json:"held"`
	ClusterID    string         `json:"cluster_id"`
	Participants []string       `json:"participants"`
	Members      []memberResult `json:"members"`
	Version      string         `json:"version"` // "" from a server too old to say
}

// memberResult is a member in ticketctl's JSON output, which always has
// client_addr ("" for a member that never led) where the wire leaves it out.
type memberResult struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
	// Only when the server asked leads: see adminwire.Member.
	MatchIndex uint64 `json:"match_index,omitempty"`
	Reachable  *bool  `json:"reachable,omitempty"`
}

func runStatus(e *env) error {
	ctx, cancel := e.context(0)
	defer cancel()
	addrs := e.addrList()
	if len(addrs) == 0 {
		return usageErrorf("--addr is empty")
	}
	// Any node answers status: ask the first one, whatever its role, so
	// that each node's own view can be inspected; when it cannot be
	// reached, the next one.
	var s ticketing.Status
	var errs []error
	for _, addr := range addrs {
		a, err := ticketing.DialAdmin(ctx, addr, e.adminOptions()...)
		if err == nil {
			s, err = a.Status(ctx)
			a.Close()
		}
		if err == nil {
			break
		}
		// A refusal is the cluster's answer, the same from every node: say
		// it once. Unreachable nodes are each worth a line.
		if ctx.Err() != nil || errors.Is(err, ticketing.ErrUnauthenticated) || errors.Is(err, ticketing.ErrPermissionDenied) {
			return err
		}
		errs = append(errs, err)
		if len(errs) == len(addrs) {
			return errors.Join(errs...)
		}
	}
	res := statusResult{
		NodeID: s.NodeID, Role: s.Role, Leader: s.LeaderID, LeaderAddr: s.LeaderAddr,
		Term: s.Term, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex,
		LastToken: s.LastToken, Held: s.Held, ClusterID: s.ClusterID, Participants: s.Participants, Members: []memberResult{},
		Version: s.Version,
	}
	if res.Participants == nil {
		res.Participants = []string{}
	}
	for _, m := range s.Members {
		res.Members = append(res.Members, memberResult(m))
	}
	return e.emit(res, func(w io.Writer) {
		leader := s.LeaderID
		if leader == "" {
			leader = "(none known)"
		} else if s.LeaderAddr != "" {
			leader += " (" + s.LeaderAddr + ")"
		}
		version := s.Version
		if version == "" {
			version = "(not reported: a server older than versions in status)"
		}
		fmt.Fprintf(w, "node_id: %s\nversion: %s\nrole: %s\nleader: %s\nterm: %d\ncommit_index: %d\napplied_index: %d\nlast_token: %d\nheld: %d\ncluster_id: %s\nmembers:\n",
			s.NodeID, version, s.Role, leader, s.Term, s.CommitIndex, s.AppliedIndex, s.LastToken, s.Held, s.ClusterID)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tRAFT ADDRESS\tCLIENT ADDRESS\tVOTER\tLEADER")
		for _, m := range s.Members {
			voter := "yes"
			if !m.Voter {
				// A non-voter is a server catching up before its promotion;
				// the leader knows how far it has come.
				voter = "learner"
				if m.Reachable != nil {
					voter = fmt.Sprintf("learner (at %d of %d)", m.MatchIndex, s.CommitIndex)
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, orDash(m.ClientAddr), voter, yesNo(m.Leader))
		}
		_ = tw.Flush() // to the terminal: nowhere else to report a failed write
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

// printClusterID prints the cluster a command talked to, when the server
// reported one.
func printClusterID(w io.Writer, id string) {
	if id != "" {
		fmt.Fprintf(w, "cluster_id: %s\n", id)
	}
}
