package core

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds what the core shows of its own state (the console's
// tickets view): read on the core's goroutine, handed back as values.

// ErrStopped: the core stopped (this server no longer leads) before it
// answered.
var ErrStopped = errors.New("the leader's core has stopped")

// KeyView is what the core knows of one held key beyond the applied state.
type KeyView struct {
	// LeftMs is what remains of the hold's lease as every leader will
	// enforce it (0 while its end is being committed).
	LeftMs uint32
	// Waiters are the first waiters in the key's queue (the attempt being
	// committed first, unless it is the holder's own), at most the number
	// asked for; MoreWaiters counts the others.
	Waiters     []WaiterView
	MoreWaiters int
	// Remote is the address of the connection this leader granted the hold
	// to; "" when another leader granted it.
	Remote string
}

// WaiterView is one acquire waiting for a key.
type WaiterView struct {
	Owner     fsm.Owner
	Principal string
	Remote    string // the address of the connection it waits on
	Waited    time.Duration
}

// Keys reads, on the core's goroutine, the lease left and the waiters (at
// most maxWaiters listed) of each held key of page, in page order.
func (c *Core) Keys(ctx context.Context, page []fsm.HeldKey, maxWaiters int) ([]KeyView, error) {
	out := make([]KeyView, 0, len(page))
	err := c.inspect(ctx, func(c *Core) {
		now := c.clk.Now()
		for _, hk := range page {
			h := hk.Hold
			v := KeyView{LeftMs: c.leaseLeft(hk.Key, h, now)}
			if t := c.leases[hk.Key]; t != nil && t.token == h.Token {
				v.Remote = t.remote
			}
			if kq := c.queues[hk.Key]; kq != nil {
				add := func(w *waiter) {
					if len(v.Waiters) >= maxWaiters {
						v.MoreWaiters++
						return
					}
					wv := WaiterView{Owner: w.owner, Principal: w.holder, Waited: now.Sub(w.arrived)}
					if len(w.replies) > 0 {
						wv.Remote = w.replies[0].c.Remote()
					}
					v.Waiters = append(v.Waiters, wv)
				}
				if kq.attempting != nil && kq.attempting.owner != h.Owner {
					add(kq.attempting)
				}
				for e := kq.waiting.Front(); e != nil; e = e.Next() {
					add(e.Value.(*waiter))
				}
			}
			out = append(out, v)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inspect runs fn on the core's goroutine, where the queues and timers may
// be read, and waits for it.
func (c *Core) inspect(ctx context.Context, fn func(*Core)) error {
	done := make(chan struct{})
	select {
	case c.events <- coreEvent{inspect: func(c *Core) { fn(c); close(done) }}:
	case <-c.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-c.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LeftPos is a place in the order of held keys by time left: the end of the
// key's lease on this leader's clock (Unix ms; 0 while its end is being
// committed), then the key. Time left shrinks alike for every key, so the
// order holds from one page to the next while the leases stand.
type LeftPos struct {
	EndMs int64
	Key   string
}

// Compare orders positions: the sooner end first, then by key.
func (p LeftPos) Compare(q LeftPos) int {
	return cmp.Or(cmp.Compare(p.EndMs, q.EndMs), strings.Compare(p.Key, q.Key))
}

// byLeftPart is how many keys ByLeft reads in one turn of the core's
// goroutine: the core serves requests between the parts, whatever the
// number of keys held.
const byLeftPart = 512

// ByLeft returns up to limit held keys that start with prefix in the order
// of time left (soonest end first), each with its position: the first of
// that order after the position after (from the start when nil), or, when
// last, the last limit of it. more reports that keys follow the page (when
// last: come before it). It reads every key of the prefix, byLeftPart at a
// time on the core's goroutine, and keeps only the page; keys granted or
// released meanwhile may or may not be seen, as on any console page.
func (c *Core) ByLeft(ctx context.Context, prefix string, after *LeftPos, last bool, limit int) (page []fsm.HeldKey, pos []LeftPos, more bool, err error) {
	if limit <= 0 {
		return nil, nil, false, nil
	}
	type entry struct {
		hk  fsm.HeldKey
		pos LeftPos
	}
	order := LeftPos.Compare
	if last {
		order = func(a, b LeftPos) int { return b.Compare(a) }
	}
	var best []entry // the page and one more, in order
	for from, done := "", false; !done; {
		err = c.inspect(ctx, func(c *Core) {
			c.state.Read(func(st *fsm.State) {
				n := 0
				done = true
				st.RangePrefix(prefix, from, func(hk fsm.HeldKey) bool {
					if n == byLeftPart {
						done = false
						return false
					}
					n++
					from = hk.Key
					p := LeftPos{Key: hk.Key}
					if end, ok := c.leaseEnd(hk.Key, hk.Hold); ok {
						p.EndMs = end.UnixMilli()
					}
					if after != nil && !last && p.Compare(*after) <= 0 {
						return true
					}
					if len(best) > limit && order(p, best[limit].pos) >= 0 {
						return true
					}
					i, _ := slices.BinarySearchFunc(best, p, func(e entry, p LeftPos) int { return order(e.pos, p) })
					best = slices.Insert(best, i, entry{hk, p})
					if len(best) > limit+1 {
						best = best[:limit+1]
					}
					return true
				})
			})
		})
		if err != nil {
			return nil, nil, false, err
		}
	}
	if more = len(best) > limit; more {
		best = best[:limit]
	}
	if last {
		slices.Reverse(best)
	}
	for _, e := range best {
		page, pos = append(page, e.hk), append(pos, e.pos)
	}
	return page, pos, more, nil
}
