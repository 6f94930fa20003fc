package fsm

import (
	"container/heap"
	"slices"
	"strings"
)

// This file holds the read-only listings of the operator's console: pages
// of held keys and the coordination nodes with their semaphores.

// HeldKey is one held key with its hold.
type HeldKey struct {
	Key  string
	Hold Hold
}

// HoldsPage returns, in key order, up to limit held keys that start with
// prefix and sort after after (every one when after is ""), with the number
// of held keys that start with prefix and whether more follow the page.
// Holds live in a hash map, so a page costs one pass over every hold while
// only limit of them are kept (a bounded heap), not a sort of them all.
func (s *State) HoldsPage(prefix, after string, limit int) (page []HeldKey, matched int, more bool) {
	if limit <= 0 {
		return nil, 0, false
	}
	h := &keyHeap{}
	beyond := 0 // matching keys after the cursor
	for k := range s.holds {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		matched++
		if k <= after {
			continue
		}
		beyond++
		if h.Len() < limit {
			heap.Push(h, k)
		} else if k < (*h)[0] {
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	keys := []string(*h)
	slices.Sort(keys)
	page = make([]HeldKey, len(keys))
	for i, k := range keys {
		page[i] = HeldKey{Key: k, Hold: s.holds[k]}
	}
	return page, matched, beyond > len(keys)
}

// keyHeap is a max-heap of keys: its root is the largest key kept, the one
// a smaller key replaces.
type keyHeap []string

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// CoordNodes returns every coordination node, by path.
func (s *State) CoordNodes() []NodeInfo {
	out := make([]NodeInfo, 0, len(s.coord.nodes))
	for _, p := range sortedKeys(s.coord.nodes) {
		info, _ := s.DescribeNode(p)
		out = append(out, info)
	}
	return out
}

// SemaphoreNames returns the names of the semaphores of the node at path,
// sorted; none when there is no such node.
func (s *State) SemaphoreNames(path string) []string {
	n := s.coord.nodes[path]
	if n == nil {
		return nil
	}
	return sortedKeys(n.sems)
}
