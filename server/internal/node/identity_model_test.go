package node

// A model check of the identity protocol (docs/design.md, "Cluster
// identity"): every interleaving of founding, wiping, copying and putting
// back data directories, removing and re-adding a node id, electing
// leaders and granting tokens, for three and for five servers, up to a
// bounded depth, against a model of the rules that the handshake
// (identity.check), the vote gate and Open enforce. The invariants: the
// product's promise, that a granted token is above every token acknowledged
// before; and that a server holding its cluster's current record of its own
// directory never refuses a leader that does too, nor is refused by it (a
// server behind must be able to catch up: F11).
//
// The model is deliberately generous to what could go wrong: logs are
// reduced to their last token, terms are left out (a new leader may be
// elected at any time, beside an old one), and every step may involve any
// servers: the ones a step leaves out are stalled, crashed or cut off, so
// every partition and crash is covered without steps of its own. A founder
// sees every server it probes (more founding than real servers do, which
// wait for one that does not answer). Each server knows the participant
// records (admissions) that its log holds: a prefix of its cluster's
// admissions, in log order, as far as it caught up. A re-admission is
// stored by a majority, as any committed entry; the others learn it when
// they next catch up from a leader.

import (
	"fmt"
	"strings"
	"testing"
)

// Data directory states of the model (docs/design.md).
const (
	mEmpty       = iota // no Raft state
	mProvisional        // founded, no cluster ID yet
	mSettled            // holds its cluster's ID
)

const mMaxServers = 5

// mDir is a data directory's Raft state as a copy of it keeps it.
type mDir struct {
	st, hist, last, inc, adms uint8
}

type mServer struct {
	st      uint8 // mEmpty, mProvisional, mSettled
	hist    uint8 // the cluster (history) it holds, 0 while it has no ID
	last    uint8 // its last token
	inc     uint8 // incarnation of its data directory
	adms    uint8 // how many of its cluster's admissions its log holds
	founder bool  // empty and started with initial state new (it founds)
	// metSettled: provisional and has met a settled member (rule 4).
	metSettled bool
	// refused: its directory is refused at start (a copy, or a lost log
	// store beside the migrated log); it takes no part until replaced.
	refused bool
	// seen: incarnations of the founders this server probed before it
	// founded (recorded as participants when it sets the ID).
	seen [mMaxServers]uint8
	// old: its directory as copied aside when the cluster formed (a cp -a,
	// the log before an upgrade migrated it, the directory of an id
	// removed later); inc 0: none.
	old mDir
}

// mAdmission records incarnation inc for server node; its log index is
// its position in mCluster.adm, plus one.
type mAdmission struct{ node, inc uint8 }

const mMaxAdmissions = 12

type mCluster struct {
	adm  [mMaxAdmissions]mAdmission // in log order
	nadm uint8
}

// admit appends an admission; false when the bound is reached.
func (c *mCluster) admit(node int, inc uint8) bool {
	if int(c.nadm) >= mMaxAdmissions {
		return false
	}
	c.adm[c.nadm] = mAdmission{uint8(node), inc}
	c.nadm++
	return true
}

// record returns the last of the first n admissions of node: its
// incarnation and index (0, 0 if none).
func (c *mCluster) record(node int, n uint8) (inc, idx uint8) {
	for i := int(n) - 1; i >= 0; i-- {
		if int(c.adm[i].node) == node {
			return c.adm[i].inc, uint8(i + 1)
		}
	}
	return 0, 0
}

type mState struct {
	n        uint8 // servers
	s        [mMaxServers]mServer
	clus     [4]mCluster // index = hist (1..3); 0 unused
	nclus    uint8
	leader   int8               // -1: none
	adm      [mMaxServers]uint8 // the leader's admissions in progress: incarnation (0: none)
	maxAck   uint8
	nextInc  uint8
	faults   uint8 // data directories lost, put back, or never started (absent founders)
	replaced uint8 // node ids removed and added back
}

// rules switches the protocol's rules on and off, so that the check can
// show that each one it depends on is needed.
type rules struct {
	emptyNeverVotes    bool // an empty server votes for nobody and deals only with settled peers
	foundWithAll       bool // a new cluster is founded once every bootstrap server answered, none settled
	settledDecides     bool // a settled server takes an empty or provisional peer only as described
	noSecondID         bool // a provisional server that met a settled one never sets an ID, nor leads it
	admitIncarnation   bool // the leader admits a data directory, not a node id
	settledIncarnation bool // a settled peer's incarnation is the one recorded (a re-added id's old directory is refused)
	newerAdmission     bool // ... or it was admitted after that record (this server is behind)
	retiredNeverRead   bool // a lost log store is refused, never replaced by the log from before the upgrade
	copyRefused        bool // a copied directory (another inode) is refused at start
}

var allRules = rules{true, true, true, true, true, true, true, true, true}

// faultKinds: which faults a check explores.
type faultKinds struct {
	wipe     bool // a data directory lost, restarted empty (new or existing)
	putBack  bool // copies put back, lost log stores, a re-added id's old directory
	replace  bool // members remove and add of an id, with an empty directory
	absent   bool // founding without servers named absent (bootstrap_absent)
	snapshot bool // a directory put back in place from a disk snapshot (not detectable)
}

// mConfig is one check: servers, start, faults, bounds.
type mConfig struct {
	name      string
	servers   int
	formed    bool // start from a formed cluster (settled, no tokens) rather than empty founders
	faults    faultKinds
	maxFaults int
	tokens    uint8 // tokens granted at most
	depth     int
}

func (c mConfig) start() mState {
	m := mState{n: uint8(c.servers), leader: -1}
	for i := 0; i < c.servers; i++ {
		m.nextInc++
		m.s[i] = mServer{st: mEmpty, inc: m.nextInc, founder: true}
		if c.formed {
			// Its directory as formed is also copied aside: the oldest
			// copy (a cp -a, the log before an upgrade, the directory of
			// an id removed later) is the one with most missing.
			m.s[i] = mServer{st: mSettled, hist: 1, inc: m.nextInc, adms: uint8(c.servers), old: mDir{mSettled, 1, 0, m.nextInc, uint8(c.servers)}}
			m.clus[1].admit(i, m.nextInc)
		}
	}
	if c.formed {
		m.nclus = 1
	}
	return m
}

// record: server me's record of peer, as far as its log goes.
func (m *mState) record(me, peer int) (inc, idx uint8) {
	a := &m.s[me]
	return m.clus[a.hist].record(peer, a.adms)
}

// latest: the cluster's last record of node (committed or not).
func (m *mState) latest(hist uint8, node int) uint8 {
	inc, _ := m.clus[hist].record(node, m.clus[hist].nadm)
	return inc
}

// ownAdmission: the index of the admission of i's own directory in i's
// log (0 if its log has none, or a later one of another directory).
func (m *mState) ownAdmission(i int) uint8 {
	if inc, idx := m.record(i, i); inc == m.s[i].inc {
		return idx
	}
	return 0
}

func (m *mState) majority() int { return int(m.n)/2 + 1 }

// accepts: does me take a Raft connection with peer (one end's check)?
func (m *mState) accepts(r rules, me, peer int) bool {
	a, p := &m.s[me], &m.s[peer]
	switch a.st {
	case mEmpty:
		return !r.emptyNeverVotes || p.st == mSettled
	case mProvisional:
		if p.st == mSettled && r.noSecondID && int(m.leader) == me {
			return false
		}
		return true
	}
	// settled
	rec, recIdx := m.record(me, peer)
	if p.st == mSettled {
		if p.hist != a.hist {
			return false
		}
		if !r.settledIncarnation || rec == 0 || rec == p.inc {
			return true
		}
		return r.newerAdmission && m.ownAdmission(peer) > recIdx
	}
	if !r.settledDecides {
		return true
	}
	isLeader := int(m.leader) == me
	if isLeader && m.adm[peer] != 0 && (!r.admitIncarnation || m.adm[peer] == p.inc) {
		return true
	}
	if rec != 0 {
		return p.st == mProvisional && rec == p.inc
	}
	return isLeader // a voter of the configuration never met: admitted by the leader
}

func (m *mState) connect(r rules, x, y int) bool {
	if m.s[x].refused || m.s[y].refused || x == y {
		return false
	}
	ok := m.accepts(r, x, y) && m.accepts(r, y, x)
	if m.s[x].st == mProvisional && m.s[y].st == mSettled {
		m.s[x].metSettled = true
	}
	if m.s[y].st == mProvisional && m.s[x].st == mSettled {
		m.s[y].metSettled = true
	}
	return ok
}

// groups calls fn with every set of k servers other than skip (as a bit set).
func (m *mState) groups(k, skip int, fn func(set uint8)) {
	for set := uint8(0); set < 1<<m.n; set++ {
		if set&(1<<skip) == 0 && popcount(set) == k {
			fn(set)
		}
	}
}

func popcount(b uint8) int {
	c := 0
	for ; b != 0; b &= b - 1 {
		c++
	}
	return c
}

type mStep struct {
	name string
	next mState
	bad  string // a violation this step makes
}

func (m mState) steps(r rules, c mConfig) []mStep {
	var out []mStep
	add := func(name string, n mState, bad string) { out = append(out, mStep{name, n, bad}) }
	canFault := func(n int) bool { return int(m.faults)+n <= c.maxFaults }
	lose := func(n *mState, i int) {
		if int(n.leader) == i {
			n.leader, n.adm = -1, [mMaxServers]uint8{}
		}
	}
	for i := 0; i < int(m.n); i++ {
		sv := m.s[i]
		if c.faults.wipe && canFault(1) {
			for _, founder := range []bool{true, false} {
				n := m
				n.faults++
				n.nextInc++
				n.s[i] = mServer{st: mEmpty, inc: n.nextInc, founder: founder, old: sv.old}
				lose(&n, i)
				mode := "existing"
				if founder {
					mode = "new"
				}
				add(fmt.Sprintf("n%d loses its data directory, restarts with initial state %s", i+1, mode), n, "")
			}
		}
		if sv.old.inc != 0 && canFault(1) {
			revert := func(name string, refusedBy bool) {
				n := m
				n.faults++
				lose(&n, i)
				if refusedBy {
					n.s[i].refused = true
					add(name+": refused at start", n, "")
					return
				}
				o := sv.old
				n.s[i] = mServer{st: o.st, hist: o.hist, last: o.last, inc: o.inc, adms: o.adms, old: o}
				add(name, n, "")
			}
			if c.faults.putBack {
				revert(fmt.Sprintf("n%d's copy is put back in its place (cp -a: another inode)", i+1), r.copyRefused)
				revert(fmt.Sprintf("n%d loses its log store; the log from before its upgrade is still there", i+1), r.retiredNeverRead)
				if rec := m.latest(sv.old.hist, i); rec != 0 && rec != sv.old.inc {
					revert(fmt.Sprintf("n%d's directory from before its removal is moved back", i+1), false)
				}
			}
			if c.faults.snapshot {
				revert(fmt.Sprintf("n%d's directory is put back from a disk snapshot (same inode)", i+1), false)
			}
		}
		// members remove and add of i, with an empty directory and join:
		// the leader and a majority store the new record (each catching
		// up first).
		if l := int(m.leader); c.faults.replace && m.replaced == 0 && l >= 0 && l != i && m.s[l].st == mSettled && !m.s[l].refused {
			m.groups(m.majority()-1, l, func(acks uint8) {
				if acks&(1<<i) != 0 {
					return
				}
				n := m
				n.replaced++
				n.nextInc++
				n.s[i] = mServer{st: mEmpty, inc: n.nextInc, old: sv.old}
				ls := &n.s[l]
				if !n.clus[ls.hist].admit(i, n.nextInc) {
					return
				}
				ls.adms = n.clus[ls.hist].nadm
				n.adm[i] = n.nextInc
				for a := 0; a < int(m.n); a++ {
					if acks&(1<<a) == 0 {
						continue
					}
					if !n.connect(r, l, a) {
						return
					}
					n.s[a].last, n.s[a].st, n.s[a].hist, n.s[a].adms = ls.last, ls.st, ls.hist, ls.adms
					n.s[a].metSettled = false
				}
				add(fmt.Sprintf("n%d is removed and added back with an empty directory, recorded by %s", i+1, names(acks|1<<l)), n, "")
			})
		}
		if sv.st == mEmpty && sv.founder && !sv.refused {
			m.found(r, c, i, add)
		}
	}
	// Elections: candidate c wins with the votes of a majority.
	for cand := 0; cand < int(m.n); cand++ {
		cs := m.s[cand]
		if cs.st == mEmpty || cs.refused || int(m.leader) == cand {
			continue
		}
		m.groups(m.majority()-1, cand, func(voters uint8) {
			n := m
			for v := 0; v < int(m.n); v++ {
				if voters&(1<<v) == 0 {
					continue
				}
				if !n.connect(r, cand, v) {
					return
				}
				vs := n.s[v]
				if r.emptyNeverVotes && vs.st == mEmpty {
					return
				}
				if cs.last < vs.last || (cs.st == mSettled && vs.st == mSettled && (cs.hist != vs.hist || cs.adms < vs.adms)) {
					return // Raft's election restriction
				}
			}
			if r.noSecondID && n.s[cand].st == mProvisional && n.s[cand].metSettled {
				return // it does not lead beside a settled cluster: refused by it
			}
			n.leader, n.adm = int8(cand), [mMaxServers]uint8{}
			if n.s[cand].st == mProvisional {
				// The first leader sets the cluster ID and records
				// participants: itself, the founders it probed, its voters.
				n.nclus++
				h := n.nclus
				if h >= uint8(len(n.clus)) {
					return // bound: at most three clusters
				}
				n.s[cand].st, n.s[cand].hist = mSettled, h
				cl := &n.clus[h]
				cl.admit(cand, n.s[cand].inc)
				for j := 0; j < int(m.n); j++ {
					if j != cand && n.s[cand].seen[j] != 0 {
						cl.admit(j, n.s[cand].seen[j])
						n.adm[j] = n.s[cand].seen[j]
					}
					if voters&(1<<j) != 0 {
						if inc, _ := cl.record(j, cl.nadm); inc == 0 {
							cl.admit(j, n.s[j].inc)
						}
						n.adm[j] = n.s[j].inc
					}
				}
				n.s[cand].adms = cl.nadm
			}
			add(fmt.Sprintf("n%d elected with the votes of %s", cand+1, names(voters)), n, "")
		})
	}
	// Grants: the leader appends a token; a majority stores it (each
	// catches up first; a settled leader records a new participant).
	if l := int(m.leader); l >= 0 && !m.s[l].refused && m.maxAck < c.tokens {
		m.groups(m.majority()-1, l, func(acks uint8) {
			n := m
			ls := n.s[l]
			tok := ls.last + 1
			for a := 0; a < int(m.n); a++ {
				if acks&(1<<a) == 0 {
					continue
				}
				if !n.connect(r, l, a) {
					return
				}
				if ls.st == mSettled {
					if inc, _ := n.record(l, a); inc == 0 {
						if !n.clus[ls.hist].admit(a, n.s[a].inc) {
							return
						}
						n.s[l].adms = n.clus[ls.hist].nadm
						n.adm[a] = n.s[a].inc
					}
				}
			}
			for a := 0; a < int(m.n); a++ {
				if acks&(1<<a) == 0 {
					continue
				}
				n.s[a].last, n.s[a].st, n.s[a].hist, n.s[a].adms = tok, ls.st, ls.hist, n.s[l].adms
				if ls.st == mSettled {
					n.s[a].metSettled = false
				}
			}
			bad := ""
			if tok <= m.maxAck {
				bad = fmt.Sprintf("token %d granted after token %d was acknowledged", tok, m.maxAck)
			}
			n.s[l].last = tok
			n.maxAck = max(n.maxAck, tok)
			add(fmt.Sprintf("n%d grants token %d, stored by %s", l+1, tok, names(acks)), n, bad)
		})
	}
	return out
}

// current: server i holds the directory its cluster recorded last for it.
func (m *mState) current(i int) bool {
	sv := &m.s[i]
	return sv.st == mSettled && !sv.refused && m.latest(sv.hist, i) == sv.inc
}

// refusedLeader says which current server refuses the current leader, or
// is refused by it ("" if none): the one refused could never catch up
// while that leader leads.
func (m *mState) refusedLeader(r rules) string {
	l := int(m.leader)
	if l < 0 || !m.current(l) {
		return ""
	}
	for i := 0; i < int(m.n); i++ {
		if i == l || !m.current(i) || m.s[i].hist != m.s[l].hist {
			continue
		}
		if !m.accepts(r, i, l) {
			inc, idx := m.record(i, l)
			return fmt.Sprintf("n%d refuses its leader n%d (incarnation %d, admitted at %d), having read only the record of incarnation %d at %d",
				i+1, l+1, m.s[l].inc, m.ownAdmission(l), inc, idx)
		}
		if !m.accepts(r, l, i) {
			return fmt.Sprintf("leader n%d refuses n%d, the directory its cluster recorded", l+1, i+1)
		}
	}
	return ""
}

// found: empty founder i founds, or finds a settled server and waits.
func (m *mState) found(r rules, c mConfig, i int, add func(string, mState, string)) {
	settled := false
	for j := 0; j < int(m.n); j++ {
		if j != i && m.s[j].st == mSettled && !m.s[j].refused {
			settled = true
		}
	}
	found := func(name string, answered uint8) {
		n := *m
		n.s[i].st, n.s[i].founder = mProvisional, false
		for j := 0; j < int(m.n); j++ {
			if answered&(1<<j) != 0 {
				n.s[i].seen[j] = m.s[j].inc
			}
		}
		add(name, n, "")
	}
	if settled && r.foundWithAll {
		n := *m
		n.s[i].founder = false
		add(fmt.Sprintf("n%d finds a settled member, waits to be added", i+1), n, "")
	}
	all := uint8(1<<m.n-1) &^ (1 << i)
	if !settled || !r.foundWithAll {
		found(fmt.Sprintf("n%d founds", i+1), all)
	}
	if !r.foundWithAll {
		// With whoever answered: the others may hold a history.
		found(fmt.Sprintf("n%d founds with nobody answering", i+1), 0)
	}
	if c.faults.absent {
		// bootstrap_absent: the servers that answer (a majority with this
		// one, none settled) found without the others, which count as
		// failed.
		for k := m.majority() - 1; k < int(m.n)-1; k++ {
			m.foundWithout(c, i, k, add)
		}
	}
}

// foundWithout: founder i founds with k others answering (none settled),
// the rest named absent.
func (m *mState) foundWithout(c mConfig, i, k int, add func(string, mState, string)) {
	m.groups(k, i, func(answered uint8) {
		absent := int(m.n) - 1 - k
		if int(m.faults)+absent > c.maxFaults {
			return
		}
		for j := 0; j < int(m.n); j++ {
			if answered&(1<<j) != 0 && m.s[j].st == mSettled {
				return
			}
		}
		n := *m
		n.faults += uint8(absent)
		n.s[i].st, n.s[i].founder = mProvisional, false
		for j := 0; j < int(m.n); j++ {
			if answered&(1<<j) != 0 {
				n.s[i].seen[j] = m.s[j].inc
			}
		}
		add(fmt.Sprintf("n%d founds with %s, the others named absent", i+1, names(answered)), n, "")
	})
}

func names(set uint8) string {
	var out []string
	for j := 0; j < mMaxServers; j++ {
		if set&(1<<j) != 0 {
			out = append(out, fmt.Sprintf("n%d", j+1))
		}
	}
	return strings.Join(out, ", ")
}

// modelCheck explores every interleaving up to c.depth steps (breadth
// first, each state once) and returns the first violation's trace, or "".
func modelCheck(r rules, c mConfig) (string, int) {
	type node struct {
		st     mState
		parent int32 // index in nodes; -1 for the start
		step   string
	}
	nodes := []node{{st: c.start(), parent: -1}}
	trace := func(i int32, last string) string {
		tr := []string{last}
		for ; nodes[i].parent >= 0; i = nodes[i].parent {
			tr = append(tr, nodes[i].step)
		}
		for a, b := 0, len(tr)-1; a < b; a, b = a+1, b-1 {
			tr[a], tr[b] = tr[b], tr[a]
		}
		return strings.Join(tr, "\n  ")
	}
	seen := map[mState]bool{nodes[0].st: true}
	frontier := []int32{0}
	for d := 0; d < c.depth && len(frontier) > 0; d++ {
		if len(seen) > modelStateLimit {
			return fmt.Sprintf("more than %d states by depth %d: lower the depth", modelStateLimit, d), len(seen)
		}
		var next []int32
		for _, i := range frontier {
			for _, s := range nodes[i].st.steps(r, c) {
				if s.bad == "" {
					s.bad = s.next.refusedLeader(r)
				}
				if s.bad != "" {
					return s.bad + ":\n  " + trace(i, s.name), len(seen)
				}
				if !seen[s.next] {
					seen[s.next] = true
					nodes = append(nodes, node{s.next, i, s.name})
					next = append(next, int32(len(nodes)-1))
				}
			}
		}
		frontier = next
	}
	return "", len(seen)
}

// modelStateLimit bounds the memory of one check (about 200 bytes a state).
const modelStateLimit = 1_500_000

// The checks. Faults are bounded by a minority of the servers: one of
// three, two of five (a server named absent at founding counts as one).
// Every fault here is one the protocol detects; snapshotRollback shows the
// one it cannot.
var (
	youngThree = mConfig{name: "3 servers founding, 1 lost directory", servers: 3,
		faults: faultKinds{wipe: true, absent: true}, maxFaults: 1, tokens: 3, depth: 13}
	formedThree = mConfig{name: "3 servers formed, 1 directory lost, put back or re-added", servers: 3, formed: true,
		faults: faultKinds{wipe: true, putBack: true, replace: true}, maxFaults: 1, tokens: 3, depth: 12}
	formedFive = mConfig{name: "5 servers formed, 2 directories lost, put back or re-added", servers: 5, formed: true,
		faults: faultKinds{wipe: true, putBack: true, replace: true}, maxFaults: 2, tokens: 2, depth: 8}
	snapshotRollback = mConfig{name: "3 servers formed, 1 directory put back from a disk snapshot", servers: 3, formed: true,
		faults: faultKinds{snapshot: true}, maxFaults: 1, tokens: 3, depth: 7}
)

// TestIdentityModel: with every rule, no interleaving up to the depth
// grants a token at or below one acknowledged before, or leaves a current
// server refusing its current leader.
func TestIdentityModel(t *testing.T) {
	for _, c := range []mConfig{youngThree, formedThree, formedFive} {
		if bad, states := modelCheck(allRules, c); bad != "" {
			t.Errorf("%s: the identity protocol fails: %s", c.name, bad)
		} else {
			t.Logf("%s: %d states, depth %d: tokens never go backwards, no current server refuses its leader", c.name, states, c.depth)
		}
	}
}

// TestIdentityModelNeedsItsRules: the check is not vacuous. Without each
// rule below it finds an interleaving in which tokens go backwards, or (the
// admission order) one in which a server behind refuses its leader for
// good; each is also reproduced with real processes in crashtest
// (identity_test.go, lostdisk_test.go).
func TestIdentityModelNeedsItsRules(t *testing.T) {
	without := func(off func(*rules)) rules { r := allRules; off(&r); return r }
	const backwards, refuses = "was acknowledged", "refuses its leader"
	for _, tc := range []struct {
		name string
		r    rules
		c    mConfig
		want string // the violation
	}{
		{"an empty server votes", without(func(r *rules) { r.emptyNeverVotes = false }), youngThree, backwards},
		{"founding with the servers that answered", without(func(r *rules) { r.foundWithAll = false }), youngThree, backwards},
		{"a settled peer's incarnation is not compared", without(func(r *rules) { r.settledIncarnation = false }), formedThree, backwards},
		{"a server behind refuses a peer admitted after its record", without(func(r *rules) { r.newerAdmission = false }), formedFive, refuses},
		{"the log from before the upgrade replaces a lost log store", without(func(r *rules) { r.retiredNeverRead = false }), formedThree, backwards},
		{"a copied directory is not refused", without(func(r *rules) { r.copyRefused = false }), formedThree, backwards},
	} {
		bad, states := modelCheck(tc.r, tc.c)
		if !strings.Contains(bad, tc.want) {
			t.Errorf("%s (%s): no violation %q found in %d states (%q); the model check would not notice the rule missing", tc.name, tc.c.name, tc.want, states, bad)
			continue
		}
		t.Logf("%s (%s): %s", tc.name, tc.c.name, bad)
	}
}

// TestIdentityModelLimits: what the protocol cannot detect. A directory
// put back in place from a disk or VM snapshot keeps its inode and its
// incarnation: with one such directory, tokens can go backwards (the
// servers that missed the newest grants and the rolled-back one form a
// majority). And founding without servers named absent, after as many
// directories were lost as the absent ones make up a majority, founds a
// second history. Both are lost disks beyond a minority (docs/design.md).
func TestIdentityModelLimits(t *testing.T) {
	for _, c := range []mConfig{
		snapshotRollback,
		{name: "3 servers, a lost directory and founding without an absent server", servers: 3,
			faults: faultKinds{wipe: true, absent: true}, maxFaults: 2, tokens: 3, depth: 13},
	} {
		bad, states := modelCheck(allRules, c)
		if !strings.Contains(bad, "was acknowledged") {
			t.Errorf("%s: no token going backwards in %d states (%q): the documented limit is not one", c.name, states, bad)
			continue
		}
		t.Logf("%s: %s", c.name, bad)
	}
}
