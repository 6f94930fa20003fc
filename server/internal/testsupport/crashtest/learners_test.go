package crashtest

// Learners before voters, with real ticketd processes and the real
// ticketctl (docs/deployment.md, "Add a server").

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/cutproxy"
)

// joining starts id as docs/deployment.md adds a server: the cluster's
// config file, an empty data directory, --join. It returns once it waits.
func joining(t *testing.T, c *cluster, id string) *proc {
	t.Helper()
	// The cluster's own settings (config file, peer credentials...), without
	// what only a founding server takes.
	var extra []string
	for i := 0; i < len(c.procs[0].extra); i++ {
		switch a := c.procs[0].extra[i]; {
		case a == "--bootstrap" || a == "--initial-cluster-state":
			i++ // and its value
		case strings.HasPrefix(a, "--bootstrap=") || strings.HasPrefix(a, "--initial-cluster-state="):
		default:
			extra = append(extra, a)
		}
	}
	p := newProc(t, id, t.TempDir(), append(extra, "--join")...)
	p.start()
	waitFor(t, startTimeout, id+" waits to be added", func() bool { return strings.Contains(p.log(), "waiting to be added") }, p)
	return p
}

func memberOf(st status, id string) (voter, found bool) {
	i := slices.IndexFunc(st.Members, func(m adminwire.Member) bool { return m.ID == id })
	if i < 0 {
		return false, false
	}
	return st.Members[i].Voter, true
}

// TestMembersAddPromotesLearner: a server added to a working cluster
// joins as a learner and is promoted once it has caught up; ticketctl
// reports both indexes and the server then holds the cluster's grants.
func TestMembersAddPromotesLearner(t *testing.T) {
	c, _ := threeNodes(t)
	var last uint64
	for i := range 5 {
		last = grantKey(t, c.addrs(), fmt.Sprintf("promote/%d", i), 1)
	}
	n4 := joining(t, c, "n4")
	all := strings.Join(c.addrs(), ",")
	code, out, errs := ctl(t, "--addr", all, "members", "add", "n4", n4.raftAddr)
	if code != 0 || !strings.Contains(out, "as a learner at index") || !strings.Contains(out, "promoted to voter at index") {
		t.Fatalf("members add: exit %d\n%s%s", code, out, errs)
	}
	st := statusOf(t, c.procs[c.leader()])
	if voter, ok := memberOf(st, "n4"); !voter || !ok {
		t.Fatalf("n4 is not a voter after members add reported its promotion: %+v", st.Members)
	}
	if st4 := statusOf(t, n4); st4.LastToken < last {
		t.Fatalf("n4 was promoted with last token %d, the cluster had granted %d", st4.LastToken, last)
	}
	// Run again (as after a lost answer): nothing is added twice.
	code, out, errs = ctl(t, "--addr", all, "members", "add", "n4", n4.raftAddr)
	if code != 0 || !strings.Contains(out, "is a voter") {
		t.Fatalf("members add of a voter, again: exit %d\n%s%s", code, out, errs)
	}
}

// TestLeaderFailureDuringMembersAddKeepsMajority: n4 is added while
// nothing reaches it (its Raft connections held by a proxy), and the
// leader is killed. n4 stays a learner, so the two voters left of three
// elect a leader and serve, tokens continue above those granted; once n4
// is reachable the new leader resumes the join and promotes it.
//
// Before learners, n4 was a voter that had received nothing; the
// survivors refused it as a member that lost its data, so two of four
// voters could elect nobody until the old leader came back.
func TestLeaderFailureDuringMembersAddKeepsMajority(t *testing.T) {
	c, _ := threeNodes(t)
	var last uint64
	for i := range 5 {
		last = grantKey(t, c.addrs(), fmt.Sprintf("held/%d", i), 1)
	}
	n4 := joining(t, c, "n4")
	proxy := cutproxy.Start(t, n4.raftAddr)
	proxy.HoldAfter(1) // members add's probe goes through; Raft traffic never does
	all := strings.Join(c.addrs(), ",")
	code, out, errs := ctl(t, "--addr", all, "members", "add", "n4", proxy.Addr(), "--wait", "2s")
	if code != 2 || !strings.Contains(errs, "is a learner, not yet a voter") || !strings.Contains(out, "as a learner at index") {
		t.Fatalf("members add of an unreachable server: exit %d, want 2 (still a learner)\n%s%s", code, out, errs)
	}
	l := c.leader()
	if voter, ok := memberOf(statusOf(t, c.procs[l]), "n4"); voter || !ok {
		t.Fatalf("n4 after members add: in the configuration %v, voter %v; want a learner", ok, voter)
	}
	if proxy.Held() == 0 {
		t.Fatalf("the leader never tried to reach n4 through the proxy")
	}
	c.procs[l].kill()
	var rest []string
	for i, p := range c.procs {
		if i != l {
			rest = append(rest, p.client)
		}
	}
	// The two voters left elect a leader and serve: tokens continue.
	tok := grantKey(t, rest, "held/after", 2)
	if tok <= last {
		t.Fatalf("token %d granted after the leader's failure; %d was granted before", tok, last)
	}
	for i := range 5 {
		if holder(t, rest, fmt.Sprintf("held/%d", i)) == 0 {
			t.Errorf("held/%d lost its grant", i)
		}
	}
	// n4 becomes reachable: the new leader takes the join over.
	proxy.Release()
	var newLeader *proc
	waitFor(t, startTimeout, "n4 promoted by the new leader", func() bool {
		for i, p := range c.procs {
			if i == l {
				continue
			}
			st, err := adminStatus(p.client)
			if err != nil || st.Role != "leader" {
				continue
			}
			newLeader = p
			voter, _ := memberOf(st, "n4")
			return voter
		}
		return false
	}, append(c.procs, n4)...)
	if !strings.Contains(newLeader.log(), "resuming the addition of a learner") {
		t.Errorf("the new leader's log does not say it resumed n4's join:\n%s", newLeader.logTail(20))
	}
	waitFor(t, startTimeout, "n4 holds the grants made without it", func() bool {
		st, err := adminStatus(n4.client)
		return err == nil && st.LastToken >= tok
	}, n4)
	// Four voters, the old leader still down: three of four serve.
	if tok2 := grantKey(t, rest, "held/four", 3); tok2 <= tok {
		t.Fatalf("token %d after n4's promotion; %d was granted before", tok2, tok)
	}
}
