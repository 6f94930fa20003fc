package node

// A model check of members add under leader failures (docs/design.md,
// "Learners before voters"): three voters holding the cluster's state and
// a fourth server, n4, that starts empty and is added while any server may
// crash and restart (one at a time), leaders are elected and tokens
// granted. Every reachable state is explored (the state space is finite),
// against the rules that members add, the promoter and the handshake
// (identity.check, resumesJoin) enforce. Checked:
//   - tokens never go backwards;
//   - with at most one server down, the voters that can take part in an
//     election are a majority of the configuration (the cluster tolerates
//     a failure while it grows);
//   - from every reachable state the join can still complete: n4 can
//     become a voter once the servers are up again.
//
// The model is generous where it can be: any majority may acknowledge a
// grant, any voter may call an election at any time. It leaves out what
// identity_model_test.go checks (wiped directories, founding).

import (
	"fmt"
	"strings"
	"testing"
)

// n4's place in the configuration.
const (
	jNone uint8 = iota
	jLearner
	jVoter
)

const jNew = 3 // index of n4

type jServer struct {
	up   bool
	has  bool  // holds the cluster's state (n1..n3 from the start, n4 once replicated to)
	last uint8 // its last token
}

type jState struct {
	s        [4]jServer
	n4       uint8 // jNone, jLearner, jVoter
	admitted bool  // n4 recorded as a participant with its incarnation (committed)
	leader   int8  // -1: none
	adding   bool  // the leader admitted n4 itself (in memory: lost with its leadership)
	maxAck   uint8
}

type joinRules struct {
	learnersFirst bool // members add adds a learner, not a voter
	catchUpFirst  bool // a learner is promoted only once it has caught up
	resume        bool // a new leader takes back the empty directory of a learner it did not add
}

var allJoinRules = joinRules{true, true, true}

func (m *jState) voter(i int) bool { return i < jNew || m.n4 == jVoter }

func (m *jState) quorum() int {
	v := 3
	if m.n4 == jVoter {
		v = 4
	}
	return v/2 + 1
}

// reaches: does leader l's Raft connection with server i hold (the
// handshake on both ends)? Servers that hold the state take each other;
// an empty n4 takes the settled leader, and the leader takes it only as
// the leader admitting it, or (resume) as the recorded learner.
func (m *jState) reaches(r joinRules, l, i int) bool {
	if !m.s[l].up || !m.s[i].up {
		return false
	}
	if l == i || m.s[i].has {
		return true
	}
	if m.adding {
		return true
	}
	return r.resume && m.admitted && m.n4 == jLearner
}

// electable: the voters that can take part in an election (up, holding
// the state: an empty server never votes) make a majority. The one among
// them with the highest token wins everyone's vote.
func (m *jState) electable() bool {
	n := 0
	for i := range m.s {
		if m.voter(i) && m.s[i].up && m.s[i].has {
			n++
		}
	}
	return n >= m.quorum()
}

// commits: leader l reaches a majority of the voters of a configuration in
// which n4 has place n4 (a configuration change commits in the new one),
// counting those that hold the state (the model gives n4 the log only in
// the replication step).
func (m *jState) commits(r joinRules, l int, n4 uint8) bool {
	c := *m
	c.n4 = n4
	n := 0
	for i := range c.s {
		if c.voter(i) && c.reaches(r, l, i) && c.s[i].has {
			n++
		}
	}
	return n >= c.quorum()
}

type jStep struct {
	name string
	next jState
	bad  string
}

func (m jState) steps(r joinRules) []jStep {
	var out []jStep
	add := func(name string, n jState, bad string) { out = append(out, jStep{name, n, bad}) }
	down := 0
	for _, s := range m.s {
		if !s.up {
			down++
		}
	}
	for i := range m.s {
		n := m
		if m.s[i].up && down == 0 {
			n.s[i].up = false
			if int(n.leader) == i {
				n.leader, n.adding = -1, false
			}
			add(fmt.Sprintf("n%d crashes", i+1), n, "")
		} else if !m.s[i].up {
			n.s[i].up = true
			add(fmt.Sprintf("n%d restarts", i+1), n, "")
		}
	}
	for c := range m.s {
		if !m.voter(c) || !m.s[c].up || !m.s[c].has || int(m.leader) == c {
			continue
		}
		votes := 0
		for v := range m.s {
			if m.voter(v) && m.s[v].up && m.s[v].has && m.s[v].last <= m.s[c].last {
				votes++
			}
		}
		if votes >= m.quorum() {
			n := m
			n.leader, n.adding = int8(c), false
			add(fmt.Sprintf("n%d elected", c+1), n, "")
		}
	}
	l := int(m.leader)
	if l < 0 || !m.s[l].up {
		return out
	}
	// members add n4: its directory is recorded, then its configuration.
	if m.n4 == jNone {
		place := jVoter
		if r.learnersFirst {
			place = jLearner
		}
		n := m
		n.admitted, n.adding = true, true
		if n.commits(r, l, place) {
			n.n4 = place
			add(fmt.Sprintf("n%d adds n4 as a %s", l+1, map[uint8]string{jLearner: "learner", jVoter: "voter"}[place]), n, "")
		}
	}
	// Replication to n4 (learner or voter): it then holds the leader's log.
	if m.n4 != jNone && m.reaches(r, l, jNew) && (!m.s[jNew].has || m.s[jNew].last != m.s[l].last) {
		n := m
		n.s[jNew].has, n.s[jNew].last = true, m.s[l].last
		add(fmt.Sprintf("n%d replicates to n4", l+1), n, "")
	}
	// Promotion.
	if m.n4 == jLearner {
		caughtUp := m.reaches(r, l, jNew) && m.s[jNew].has && m.s[jNew].last == m.s[l].last
		if (caughtUp || !r.catchUpFirst) && m.commits(r, l, jVoter) {
			n := m
			n.n4 = jVoter
			add(fmt.Sprintf("n%d promotes n4", l+1), n, "")
		}
	}
	// Grants: any majority of the voters it reaches acknowledges (the
	// leader among them); n4 acknowledges too when reached.
	if m.maxAck < 3 {
		var others []int
		for i := range m.s {
			if i != l && m.voter(i) && m.reaches(r, l, i) && m.s[i].has {
				others = append(others, i)
			}
		}
		need := m.quorum() - 1
		for mask := 0; mask < 1<<len(others); mask++ {
			var ackers []int
			for b, i := range others {
				if mask&(1<<b) != 0 {
					ackers = append(ackers, i)
				}
			}
			if len(ackers) != need {
				continue
			}
			n := m
			tok := m.s[l].last + 1
			bad := ""
			if tok <= m.maxAck {
				bad = fmt.Sprintf("token %d granted after token %d was acknowledged", tok, m.maxAck)
			}
			n.s[l].last = tok
			for _, i := range ackers {
				n.s[i].last = tok
			}
			n.maxAck = max(n.maxAck, tok)
			add(fmt.Sprintf("n%d grants token %d, acknowledged by %v", l+1, tok, joinNames(ackers)), n, bad)
		}
	}
	return out
}

func joinNames(is []int) string {
	var s []string
	for _, i := range is {
		s = append(s, fmt.Sprintf("n%d", i+1))
	}
	return strings.Join(s, "+")
}

// joinModelCheck explores every reachable state and returns the first
// violation with the steps that lead to it, or "", and the state count.
func joinModelCheck(r joinRules) (string, int) {
	start := jState{leader: -1}
	for i := range start.s {
		start.s[i] = jServer{up: true, has: i < jNew}
	}
	type edge struct {
		from jState
		name string
	}
	parent := map[jState]edge{start: {}}
	trace := func(s jState) string {
		var steps []string
		for s != start {
			e := parent[s]
			steps = append([]string{e.name}, steps...)
			s = e.from
		}
		return "\n  " + strings.Join(steps, "\n  ")
	}
	succ := map[jState][]jState{}
	frontier := []jState{start}
	for len(frontier) > 0 {
		var next []jState
		for _, st := range frontier {
			if down := st.downCount(); down <= 1 && !st.electable() {
				return fmt.Sprintf("no majority can be elected with %d server(s) down (n4 %s, holding state %v):%s",
					down, map[uint8]string{jNone: "not added", jLearner: "a learner", jVoter: "a voter"}[st.n4], st.s[jNew].has, trace(st)), len(parent)
			}
			for _, s := range st.steps(r) {
				if s.bad != "" {
					return s.bad + ":" + trace(st) + "\n  " + s.name, len(parent)
				}
				succ[st] = append(succ[st], s.next)
				if _, seen := parent[s.next]; !seen {
					parent[s.next] = edge{st, s.name}
					next = append(next, s.next)
				}
			}
		}
		frontier = next
	}
	// The join can complete from everywhere: the states from which a
	// state with n4 a voter is reachable are all of them.
	done := map[jState]bool{}
	for s := range parent {
		if s.n4 == jVoter {
			done[s] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for s, ns := range succ {
			if done[s] {
				continue
			}
			for _, n := range ns {
				if done[n] {
					done[s], changed = true, true
					break
				}
			}
		}
	}
	for s := range parent {
		if !done[s] {
			return "the join can never complete (n4 never becomes a voter, whatever is restarted or elected) after:" + trace(s), len(parent)
		}
	}
	return "", len(parent)
}

func (m *jState) downCount() int {
	n := 0
	for _, s := range m.s {
		if !s.up {
			n++
		}
	}
	return n
}

// TestMembershipModel: with the rules, no reachable state loses the
// majority to one failure, lets a token go backwards, or strands the join.
func TestMembershipModel(t *testing.T) {
	if bad, states := joinModelCheck(allJoinRules); bad != "" {
		t.Fatalf("members add under leader failures: %s", bad)
	} else {
		t.Logf("%d states: one failure never costs the majority, tokens never go backwards, the join always can complete", states)
	}
}

// TestMembershipModelNeedsItsRules: each rule is needed. Adding a voter at
// once, or promoting a learner before it caught up, reaches the dead end
// of a voter that received nothing: a leader failure then leaves no
// majority. Without the next leader resuming the join, a learner whose
// leader failed before it received anything stays one forever.
func TestMembershipModelNeedsItsRules(t *testing.T) {
	for name, r := range map[string]joinRules{
		"a voter at once":              {false, true, true},
		"promotion before catching up": {true, false, true},
		"no resume by the next leader": {true, true, false},
	} {
		bad, states := joinModelCheck(r)
		if bad == "" {
			t.Errorf("%s: no violation found in %d states; the model check would not notice the rule missing", name, states)
			continue
		}
		t.Logf("%s: %s", name, bad)
	}
}
