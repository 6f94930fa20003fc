package coordsm

import "fmt"

// CheckInvariants reports the first rule of a reachable state that c
// breaks, or nil: sessions are in their nodes and index exactly the
// semaphores they own or wait on; counts agree with the owners and stay
// within the limit; owners then waiters come in increasing order ids, none
// above lastToken; the head waiter does not fit; no ephemeral semaphore is
// unused; each node counts its waiters. Every op keeps them (the tests check
// after each one); the snapshot reader refuses a section that breaks them.
func (c *State) CheckInvariants(lastToken uint64) error {
	for id, ss := range c.sessions {
		if c.nodes[ss.node] == nil || c.nodes[ss.node].sessions[id] != ss {
			return fmt.Errorf("session %d not in its node %q", id, ss.node)
		}
		for name := range ss.sems {
			sem := c.nodes[ss.node].sems[name]
			if sem == nil || (holderIndex(sem.owners, id) < 0 && holderIndex(sem.waiters, id) < 0) {
				return fmt.Errorf("session %d indexes %q where it neither owns nor waits", id, name)
			}
		}
	}
	for p, n := range c.nodes {
		waiters := 0
		for name, sem := range n.sems {
			var sum, last uint64
			for i, hs := range [][]Holder{sem.owners, sem.waiters} {
				for _, x := range hs {
					if x.OrderID <= last || x.OrderID > lastToken {
						return fmt.Errorf("%s/%s: order ids out of order: %+v", p, name, hs)
					}
					last = x.OrderID
					if !n.sessions[x.Session].sems[name] {
						return fmt.Errorf("%s/%s: session %d not indexed", p, name, x.Session)
					}
					if i == 0 {
						sum += x.Count
					}
				}
			}
			if sum != sem.count || sem.count > sem.limit {
				return fmt.Errorf("%s/%s: count %d, owners sum %d, limit %d", p, name, sem.count, sum, sem.limit)
			}
			if len(sem.waiters) > 0 && fits(sem, sem.waiters[0].Count) {
				return fmt.Errorf("%s/%s: head waiter %+v fits but waits", p, name, sem.waiters[0])
			}
			if sem.ephemeral && len(sem.owners)+len(sem.waiters) == 0 {
				return fmt.Errorf("%s/%s: unused ephemeral semaphore kept", p, name)
			}
			waiters += len(sem.waiters)
		}
		if waiters != n.waiters {
			return fmt.Errorf("%s: %d waiters counted, %d queued", p, n.waiters, waiters)
		}
	}
	return nil
}
