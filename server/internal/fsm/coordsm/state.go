package coordsm

import (
	"math"
	"slices"
	"strings"
)

type session struct {
	id        uint64
	node      string
	timeoutMs uint64
	desc      string
	key       string
	seqNo     uint64
	attached  bool
	expiresAt int64 // when detached: earliest batch time an expire may end it
	// detachedAt is the batch time of the detach (or of the takeover that
	// detached it): a later takeover counts the grace period from it, so
	// leader changes do not push the expiry further out.
	detachedAt int64
	sems       map[string]bool // semaphores it owns or waits on
}

type semaphore struct {
	name      string
	limit     uint64
	count     uint64 // sum of the owners' counts
	data      string
	ephemeral bool
	owners    []Holder // by order id
	waiters   []Holder // queue order (increasing order id)
	// version changes whenever data, owners or waiters change: it is drawn
	// from State.lastVersion, so it never repeats, even for a semaphore
	// deleted and created again. Paged describes compare it.
	version uint64
}

type node struct {
	path     string
	cfg      NodeConfig
	sessions map[uint64]*session
	sems     map[string]*semaphore
	waiters  int // over all semaphores
}

// State is coordination's replicated state: nodes, their sessions and
// semaphores. The zero value is not usable; call New.
type State struct {
	lastSession uint64
	lastVersion uint64 // the last semaphore version drawn
	nodes       map[string]*node
	sessions    map[uint64]*session
}

// New returns an empty state.
func New() *State {
	return &State{nodes: make(map[string]*node), sessions: make(map[uint64]*session)}
}

// Empty reports whether the state is as New made it: no node, and no
// session ever started (the session counter must survive a snapshot).
func (c *State) Empty() bool { return c.lastSession == 0 && len(c.nodes) == 0 }

// touch gives sem a new version: its data, owners or waiters changed.
func (c *State) touch(sem *semaphore) {
	c.lastVersion++
	sem.version = c.lastVersion
}

// Clone returns a deep copy.
func (c *State) Clone() *State {
	n := &State{lastSession: c.lastSession, lastVersion: c.lastVersion, nodes: make(map[string]*node, len(c.nodes)),
		sessions: make(map[uint64]*session, len(c.sessions))}
	for p, nd := range c.nodes {
		cn := &node{path: nd.path, cfg: nd.cfg, waiters: nd.waiters,
			sessions: make(map[uint64]*session, len(nd.sessions)), sems: make(map[string]*semaphore, len(nd.sems))}
		for id, s := range nd.sessions {
			cs := *s
			cs.sems = make(map[string]bool, len(s.sems))
			for k := range s.sems {
				cs.sems[k] = true
			}
			cn.sessions[id] = &cs
			n.sessions[id] = &cs
		}
		for name, sem := range nd.sems {
			cp := *sem
			cp.owners = slices.Clone(sem.owners)
			cp.waiters = slices.Clone(sem.waiters)
			cn.sems[name] = &cp
		}
		n.nodes[p] = cn
	}
	return n
}

func validPath(p string) bool {
	if len(p) < 2 || len(p) > MaxPath || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	return !strings.Contains(p, "//")
}

// ValidPath reports whether p is a node path: '/' and non-empty components
// separated by single '/', at most MaxPath bytes.
func ValidPath(p string) bool { return validPath(p) }

func validName(n string) bool { return len(n) >= 1 && len(n) <= MaxName }

func holderIndex(hs []Holder, session uint64) int {
	for i := range hs {
		if hs[i].Session == session {
			return i
		}
	}
	return -1
}

func effective(count, limit uint64) uint64 {
	if count == Exclusive {
		return limit
	}
	return count
}

func fits(sem *semaphore, count uint64) bool {
	if count == Exclusive {
		return sem.count == 0
	}
	return count <= sem.limit-sem.count
}

// addMs is now + ms, saturating (WaitForever never comes due).
func addMs(now int64, ms uint64) int64 {
	if ms > math.MaxInt64 || now > math.MaxInt64-int64(ms) {
		return math.MaxInt64
	}
	return now + int64(ms)
}

func sortedKeys[K string | uint64, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
