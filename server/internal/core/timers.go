package core

import (
	"container/heap"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// This file holds the timers: wait deadlines and lease deadlines in one heap,
// and what happens when they fire (expiry proposed, waiter answered W).

// Timers: wait deadlines of waiters and lease deadlines of holds, in one
// heap. Each timer knows its place in the heap, so a release or a retired
// waiter removes its timer at once: the heap holds live deadlines only.
type timer struct {
	at    time.Time
	w     *waiter // a wait deadline, or
	key   string  // the lease deadline of key's hold under token
	token uint64
	// promise, for a lease: the latest end of the lease this leader may
	// report to a client (leaseLeft). It is measured from the sealing of
	// the entry that started the lease, before its commit, so that no later
	// leader can end the lease earlier (design.md, "Deadlines across
	// leaders"); at is measured from the apply, for this leader's expiry.
	promise time.Time
	// remote, for a lease: the address of the connection this leader
	// granted the hold to ("" for a hold granted before it led).
	remote string
	fn     func() // or a coordination deadline (coord.go)
	idx    int    // position in the heap; -1 when not in it
}

type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

func (c *Core) addTimer(t *timer) {
	heap.Push(&c.timers, t)
	if t.idx == 0 {
		c.resetTimer()
	}
}

func (c *Core) removeTimer(t *timer) {
	if t != nil && t.idx >= 0 {
		heap.Remove(&c.timers, t.idx)
	}
}

// setLease (re)starts the lease timer of key's hold under token: this
// leader expires the hold at at, and promises clients no later end than
// promise.
func (c *Core) setLease(key string, token uint64, at, promise time.Time) {
	c.removeTimer(c.leases[key])
	t := &timer{at: at, key: key, token: token, promise: promise}
	c.leases[key] = t
	c.addTimer(t)
}

// leaseEnded forgets the lease timer of a hold that was released or expired.
func (c *Core) leaseEnded(key string, token uint64) {
	if t := c.leases[key]; t != nil && t.token == token {
		c.removeTimer(t)
		delete(c.leases, key)
	}
}

func (c *Core) resetTimer() {
	if len(c.timers) == 0 {
		c.timer.Reset(time.Hour)
		return
	}
	c.timer.Reset(max(c.timers[0].at.Sub(c.clk.Now()), 0))
}

func (c *Core) fireTimers() {
	now := c.clk.Now()
	var expire []*timer
	for len(c.timers) > 0 && !c.timers[0].at.After(now) {
		t := heap.Pop(&c.timers).(*timer)
		if t.fn != nil {
			t.fn()
			continue
		}
		if t.w != nil {
			t.w.timer = nil
			c.waitExpired(t.w)
			continue
		}
		if c.leases[t.key] == t {
			delete(c.leases, t.key)
		}
		if c.serving {
			expire = append(expire, t)
		}
	}
	if len(expire) > 0 {
		c.state.Read(func(st *fsm.State) {
			kept := expire[:0]
			for _, t := range expire {
				if h, ok := st.Get(t.key); ok && h.Token == t.token {
					kept = append(kept, t)
				}
			}
			expire = kept
		})
		for _, t := range expire {
			c.pending.add(fsm.Op{Kind: fsm.OpExpire, Key: t.key, Token: t.token}, cause{kind: causeExpire})
			c.handoff(t.key)
		}
	}
	c.resetTimer()
}

func (c *Core) waitExpired(w *waiter) {
	if w.done || w.attempt {
		return // an attempt in flight decides: granted stands, busy answers W
	}
	c.metrics.NotAcquired()
	c.answer(w, wire.Frame{Type: wire.TypeNotAcquired, QueuedMs: c.queuedMs(w)})
	c.retire(w)
}
