package coordsm

import "slices"

// NodeInfo describes a coordination node.
type NodeInfo struct {
	Path       string
	Config     NodeConfig
	Sessions   int
	Semaphores int
	Waiters    int
}

// DescribeNode returns the node at path, if any.
func (c *State) DescribeNode(path string) (NodeInfo, bool) {
	n := c.nodes[path]
	if n == nil {
		return NodeInfo{}, false
	}
	return NodeInfo{Path: n.path, Config: n.cfg, Sessions: len(n.sessions), Semaphores: len(n.sems), Waiters: n.waiters}, true
}

// Nodes returns every node, by path.
func (c *State) Nodes() []NodeInfo {
	out := make([]NodeInfo, 0, len(c.nodes))
	for _, p := range sortedKeys(c.nodes) {
		info, _ := c.DescribeNode(p)
		out = append(out, info)
	}
	return out
}

// SemaphoreNames returns the names of the semaphores of the node at path,
// sorted; none when there is no such node.
func (c *State) SemaphoreNames(path string) []string {
	n := c.nodes[path]
	if n == nil {
		return nil
	}
	return sortedKeys(n.sems)
}

// SessionInfo describes a session (without its protection key).
type SessionInfo struct {
	ID         uint64
	Path       string
	SeqNo      uint64
	TimeoutMs  uint64
	Desc       string
	Attached   bool
	ExpiresAt  int64 // when detached
	DetachedAt int64 // when detached: the batch time of its detach (or of the takeover that detached it)
}

func (ss *session) info() SessionInfo {
	return SessionInfo{ID: ss.id, Path: ss.node, SeqNo: ss.seqNo, TimeoutMs: ss.timeoutMs, Desc: ss.desc, Attached: ss.attached,
		ExpiresAt: ss.expiresAt, DetachedAt: ss.detachedAt}
}

// Session returns session id, if it exists.
func (c *State) Session(id uint64) (SessionInfo, bool) {
	ss := c.sessions[id]
	if ss == nil {
		return SessionInfo{}, false
	}
	return ss.info(), true
}

// Sessions returns every session, of the node at path or of all nodes when
// path is empty, by id.
func (c *State) Sessions(path string) []SessionInfo {
	out := make([]SessionInfo, 0)
	for _, ss := range c.sessions {
		if path == "" || ss.node == path {
			out = append(out, ss.info())
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmpU64(a.ID, b.ID) })
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SemaphoreInfo describes a semaphore.
type SemaphoreInfo struct {
	Name      string
	Limit     uint64
	Count     uint64
	Data      string
	Ephemeral bool
	Owners    []Holder // by order id, when asked for
	Waiters   []Holder // in queue order, when asked for
	Version   uint64   // changes whenever Data, Owners or Waiters change
}

// DescribeSemaphore returns the semaphore name of the node at path:
// NotFound if either is missing.
func (c *State) DescribeSemaphore(path, name string, owners, waiters bool) (SemaphoreInfo, Status) {
	n := c.nodes[path]
	if n == nil {
		return SemaphoreInfo{}, NotFound
	}
	sem := n.sems[name]
	if sem == nil {
		return SemaphoreInfo{}, NotFound
	}
	info := SemaphoreInfo{Name: sem.name, Limit: sem.limit, Count: sem.count, Data: sem.data, Ephemeral: sem.ephemeral, Version: sem.version}
	if owners {
		info.Owners = slices.Clone(sem.owners)
	}
	if waiters {
		info.Waiters = slices.Clone(sem.waiters)
	}
	return info, Success
}

// Waiters calls fn for every queued acquire, by node path, semaphore name
// and queue order, so a new leader can arm their timeouts.
func (c *State) Waiters(fn func(path, name string, w Holder)) {
	for _, p := range sortedKeys(c.nodes) {
		n := c.nodes[p]
		for _, name := range sortedKeys(n.sems) {
			for _, w := range n.sems[name].waiters {
				fn(p, name, w)
			}
		}
	}
}

// Counts are coordination's sizes, for metrics.
type Counts struct {
	Nodes    int
	Sessions int // attached or detached
	Attached int
	Owners   int // ownerships over every semaphore
	Waiters  int // queued acquires over every semaphore
}

// Counts returns the state's sizes; it walks the semaphores, so it costs
// time in proportion to them.
func (c *State) Counts() Counts {
	n := Counts{Nodes: len(c.nodes), Sessions: len(c.sessions)}
	for _, s := range c.sessions {
		if s.attached {
			n.Attached++
		}
	}
	for _, nd := range c.nodes {
		n.Waiters += nd.waiters
		for _, sem := range nd.sems {
			n.Owners += len(sem.owners)
		}
	}
	return n
}
