package fsm

import (
	"slices"
	"strings"

	"github.com/google/btree"
)

// This file holds the read-only listings of the operator's console: pages
// of held keys (the coordination listings are in coord.go).

// HeldKey is one held key with its hold.
type HeldKey struct {
	Key  string
	Hold Hold
}

// newKeyOrder is an empty sorted index of held keys.
func newKeyOrder() *btree.BTreeG[string] {
	return btree.NewG(32, func(a, b string) bool { return a < b })
}

// forget ends the hold of key.
func (s *State) forget(key string) {
	delete(s.holds, key)
	s.order.Delete(key)
}

// HoldsPage returns, in key order, up to limit held keys that start with
// prefix and sort after after (every one when after is ""), with whether
// more follow the page. It walks the sorted index from the first key it
// may list, so a page costs its own keys, not the number held.
func (s *State) HoldsPage(prefix, after string, limit int) (page []HeldKey, more bool) {
	if limit <= 0 {
		return nil, false
	}
	from := max(prefix, after)
	s.order.AscendGreaterOrEqual(from, func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false // past the keys of the prefix
		}
		if k == after {
			return true
		}
		if len(page) == limit {
			more = true
			return false
		}
		page = append(page, HeldKey{Key: k, Hold: s.holds[k]})
		return true
	})
	return page, more
}

// HoldsLastPage returns the last limit held keys that start with prefix, in
// key order; more reports that keys come before them.
func (s *State) HoldsLastPage(prefix string, limit int) (page []HeldKey, more bool) {
	if limit <= 0 {
		return nil, false
	}
	visit := func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false // before the keys of the prefix
		}
		if len(page) == limit {
			more = true
			return false
		}
		page = append(page, HeldKey{Key: k, Hold: s.holds[k]})
		return true
	}
	// end is the least key after every key that starts with prefix: the
	// prefix with its last byte below 0xff incremented; none when the
	// prefix is empty or all 0xff.
	end := prefix
	for end != "" && end[len(end)-1] == 0xff {
		end = end[:len(end)-1]
	}
	if end == "" {
		s.order.Descend(visit)
	} else {
		end = end[:len(end)-1] + string([]byte{end[len(end)-1] + 1})
		s.order.DescendLessOrEqual(end, func(k string) bool { return k == end || visit(k) })
	}
	slices.Reverse(page)
	return page, more
}

// CountPrefix returns how many held keys start with prefix, counting at
// most limit of them (a count of every key is a walk of every key).
func (s *State) CountPrefix(prefix string, limit int) (n int, capped bool) {
	s.order.AscendGreaterOrEqual(prefix, func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		if n == limit {
			capped = true
			return false
		}
		n++
		return true
	})
	return n, capped
}

// RangePrefix calls fn for every held key that starts with prefix and
// sorts after after (every one when after is ""), in key order, until fn
// returns false. The console's order by time left, which the applied state
// does not keep, reads every key of a prefix this way, a part at a time.
func (s *State) RangePrefix(prefix, after string, fn func(HeldKey) bool) {
	s.order.AscendGreaterOrEqual(max(prefix, after), func(k string) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		if k == after {
			return true
		}
		return fn(HeldKey{Key: k, Hold: s.holds[k]})
	})
}
