package core

import (
	"context"
	"errors"
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
