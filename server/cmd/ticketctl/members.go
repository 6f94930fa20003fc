package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"text/tabwriter"
	"time"

	"github.com/ticketing-io/ticketing"
)

var membersCmd = &command{
	name:    "members",
	args:    "add ID RAFTADDR [--wait DUR] | remove ID | list",
	summary: "add a server (started with --join; a learner until it has caught up, then a voter), remove one, or list them; sent to the leader",
	setup: func(fs *flag.FlagSet) runFunc {
		wait := fs.Duration("wait", time.Minute, "members add: how long to wait for the new server's promotion from learner to voter")
		return func(e *env, args []string) error {
			if len(args) == 0 {
				return usageErrorf("members needs a subcommand: add ID RAFTADDR, remove ID, or list")
			}
			switch sub, rest := args[0], args[1:]; sub {
			case "add":
				if len(rest) != 2 {
					return usageErrorf("members add takes ID RAFTADDR, got %d arguments", len(rest))
				}
				if _, _, err := net.SplitHostPort(rest[1]); err != nil {
					return usageErrorf("members add: RAFTADDR %q is not host:port", rest[1])
				}
				if *wait < 0 {
					return usageErrorf("members add: --wait must not be negative")
				}
				return runMembersAdd(e, rest[0], rest[1], *wait)
			case "remove":
				if len(rest) != 1 {
					return usageErrorf("members remove takes one ID, got %d arguments", len(rest))
				}
				return runMembersRemove(e, rest[0])
			case "list":
				if len(rest) != 0 {
					return usageErrorf("members list takes no arguments, got %d", len(rest))
				}
				return runMembersList(e)
			default:
				return usageErrorf("unknown members subcommand %q: want add, remove or list", sub)
			}
		}
	},
}

func init() {
	commandDetails["members"] = `members add ID RAFTADDR adds the server with node id ID, reachable for
Raft at RAFTADDR. Start that server first with --join and an empty data
directory. It joins as a learner: it receives the log but counts towards no
majority, so the cluster keeps its majority whatever happens to it. The
leader promotes it to voter once it has caught up (it acknowledged
everything the cluster had committed a moment before, and answers). members
add waits up to --wait (default 1m) for that and prints the Raft index of
the promotion. If the server is still a learner then, the command says so
and exits with code 2: the leader (or the next one, should the leader
fail) still promotes it once it has caught up; follow it with ticketctl
members list, or run the same members add again to wait again (it adds
nothing twice).

members remove ID removes a server (stop it after). A voter's removal is
refused when the voters left would not include a majority that the leader
hears from: remove the silent voters first, or add a server before.

members list prints the leader's view of the members: voter or learner,
and for each other member the last log index it acknowledged (of the
leader's commit index) and whether the leader hears from it.

They are sent to the leader: ticketctl follows a follower's answer naming
the leader, and tries the --addr addresses in turn. The command's time
limit is --timeout plus --wait.

Exit codes: 0 done (members add: the server is a voter); 2 members add: the
server is still a learner after --wait (code "learner"); 4 indeterminate
(the answer was lost: run the same command again); 1 other.
`
}

type membersResult struct {
	Op       string `json:"op"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	Leader   string `json:"leader"` // client address of the node that did it
	OK       bool   `json:"ok"`
	// members add: whether the server is a voter, and the Raft indexes of
	// the configurations that made it a learner and a voter (0: not by
	// this command, or not yet).
	Voter         *bool  `json:"voter,omitempty"`
	LearnerIndex  uint64 `json:"learner_index,omitempty"`
	PromotedIndex uint64 `json:"promoted_index,omitempty"`
}

// errStillLearner: members add added the server, which has not caught up
// within --wait; exit code 2, code "learner".
var errStillLearner = errors.New("still a learner")

type learnerError struct {
	id, raftAddr, leader string
	wait                 time.Duration
	added                ticketing.MemberAdded
}

func (e *learnerError) Error() string {
	return fmt.Sprintf("%s (raft %s) is a learner, not yet a voter, after --wait %v: its log has reached index %d of the leader's commit index %d. "+
		"The leader promotes it once it has caught up (also after a leader change); follow it with ticketctl members list, "+
		"or run ticketctl members add %s %s again to wait again",
		e.id, e.raftAddr, e.wait, e.added.MatchIndex, e.added.CommitIndex, e.id, e.raftAddr)
}

func (e *learnerError) Unwrap() error { return errStillLearner }

func runMembersAdd(e *env, id, raftAddr string, wait time.Duration) error {
	ctx, cancel := e.context(wait)
	defer cancel()
	// Each request waits a few seconds for the promotion; repeating it is
	// safe (the server adds nothing twice) and waits again.
	end := time.Now().Add(wait)
	var added ticketing.MemberAdded
	var learnerIndex uint64
	var leader string
	for {
		var err error
		leader, err = e.onLeader(ctx, func(ctx context.Context, a *ticketing.Admin) error {
			var err error
			added, err = a.AddMember(ctx, id, raftAddr)
			return err
		})
		if err != nil {
			return err
		}
		if learnerIndex == 0 {
			learnerIndex = added.LearnerIndex
		}
		if !added.Learner || !time.Now().Before(end) {
			break
		}
	}
	voter := !added.Learner
	res := membersResult{Op: "add", ID: id, RaftAddr: raftAddr, Leader: leader, OK: voter, Voter: &voter, LearnerIndex: learnerIndex, PromotedIndex: added.PromotedIndex}
	if !voter {
		le := &learnerError{id: id, raftAddr: raftAddr, leader: leader, wait: wait, added: added}
		if learnerIndex != 0 && !e.json() {
			fmt.Fprintf(e.stdout, "added member %s (raft %s) as a learner at index %d via leader %s\n", id, raftAddr, learnerIndex, leader)
		}
		return le
	}
	return e.emit(res, func(w io.Writer) {
		switch {
		case learnerIndex != 0:
			fmt.Fprintf(w, "added member %s (raft %s) as a learner at index %d, promoted to voter at index %d, via leader %s\n", id, raftAddr, learnerIndex, added.PromotedIndex, leader)
		case added.PromotedIndex != 0:
			fmt.Fprintf(w, "member %s (raft %s) is a voter, promoted at index %d, via leader %s\n", id, raftAddr, added.PromotedIndex, leader)
		default: // promoted under an earlier leader, or added by a server from before learners
			fmt.Fprintf(w, "member %s (raft %s) is a voter, via leader %s\n", id, raftAddr, leader)
		}
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

type membersListResult struct {
	Leader      string         `json:"leader"` // client address of the node that answered
	Role        string         `json:"role"`   // its role: "leader", else the progress columns are unknown
	CommitIndex uint64         `json:"commit_index"`
	Members     []memberResult `json:"members"`
}

// runMembersList prints the members as the leader sees them (a follower's
// view when no leader answers): only the leader knows each one's progress.
func runMembersList(e *env) error {
	ctx, cancel := e.context(0)
	defer cancel()
	status := func(addr string) (ticketing.Status, error) {
		a, err := ticketing.DialAdmin(ctx, addr, e.adminOptions()...)
		if err != nil {
			return ticketing.Status{}, err
		}
		defer a.Close()
		return a.Status(ctx)
	}
	var st ticketing.Status
	var from string
	var errs []error
	for _, addr := range e.addrList() {
		s, err := status(addr)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ticketing.ErrUnauthenticated) || errors.Is(err, ticketing.ErrPermissionDenied) {
				return err
			}
			errs = append(errs, err)
			continue
		}
		if from == "" {
			st, from = s, addr
		}
		if s.Role == "leader" {
			st, from = s, addr
			break
		}
		if s.LeaderAddr != "" {
			if ls, err := status(s.LeaderAddr); err == nil && ls.Role == "leader" {
				st, from = ls, s.LeaderAddr
				break
			}
		}
	}
	if from == "" {
		if len(errs) == 0 {
			return usageErrorf("--addr is empty")
		}
		return errors.Join(errs...)
	}
	res := membersListResult{Leader: from, Role: st.Role, CommitIndex: st.CommitIndex, Members: []memberResult{}}
	for _, m := range st.Members {
		res.Members = append(res.Members, memberResult(m))
	}
	return e.emit(res, func(w io.Writer) {
		if st.Role != "leader" {
			fmt.Fprintf(w, "no leader answered; the view of %s (%s), without the members' progress\n", from, st.Role)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tSUFFRAGE\tLEADER\tLOG\tREACHABLE")
		for _, m := range st.Members {
			suffrage, log, reach := "voter", "-", "-"
			if !m.Voter {
				suffrage = "learner"
			}
			if m.Reachable != nil {
				log, reach = fmt.Sprintf("%d of %d", m.MatchIndex, st.CommitIndex), yesNo(*m.Reachable)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.RaftAddr, suffrage, yesNo(m.Leader), log, reach)
		}
		_ = tw.Flush() // to the terminal: nowhere else to report a failed write
	})
}
