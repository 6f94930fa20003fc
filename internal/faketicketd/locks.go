package faketicketd

import (
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Locks is an in-memory lock table with the protocol's ordinary semantics:
// FIFO waiters with a wait timeout, leases that expire, exact-token
// releases, cancels, describe and pings. One Locks can serve many
// connections (and many servers). Tokens start at 1 and only grow.
type Locks struct {
	mu     sync.Mutex
	keys   map[string]*keyState
	last   uint64
	closed bool
}

type keyState struct {
	holder  *hold
	waiters []*waiter
}

type hold struct {
	token   uint64
	owner   wire.Owner
	leaseMs uint32
	end     time.Time
	timer   *time.Timer
}

type waiter struct {
	c       *Conn
	id      uint32
	owner   wire.Owner
	lease   uint8
	arrived time.Time
	timer   *time.Timer
}

// NewLocks returns an empty lock table.
func NewLocks() *Locks { return &Locks{keys: make(map[string]*keyState)} }

// Close stops every timer; later requests are ignored.
func (l *Locks) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, ks := range l.keys {
		if ks.holder != nil {
			ks.holder.timer.Stop()
		}
		for _, w := range ks.waiters {
			w.timer.Stop()
		}
	}
}

// Holder returns the token holding key, if any.
func (l *Locks) Holder(key string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ks := l.keys[key]; ks != nil && ks.holder != nil {
		return ks.holder.token, true
	}
	return 0, false
}

func (l *Locks) state(key string) *keyState {
	ks := l.keys[key]
	if ks == nil {
		ks = &keyState{}
		l.keys[key] = ks
	}
	return ks
}

// Handle answers f as a normal server would. It reports false for frames it
// does not handle (anything but A, C, L, U, D, P, O).
func (l *Locks) Handle(c *Conn, f wire.Frame) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return true
	}
	key := string(f.Key)
	switch f.Type {
	case wire.TypePing:
		c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
	case wire.TypePong:
	case wire.TypeAcquire:
		ks := l.state(key)
		switch {
		case ks.holder != nil && ks.holder.owner == f.Owner:
			c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: ks.holder.token, LeaseMs: ks.holder.leaseMs})
		case ks.holder == nil && len(ks.waiters) == 0:
			l.grant(key, ks, c, f.ID, f.Owner, f.Lease, 0)
		case f.Wait == 0:
			c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: f.ID})
		default:
			w := &waiter{c: c, id: f.ID, owner: f.Owner, lease: f.Lease, arrived: time.Now()}
			w.timer = time.AfterFunc(time.Duration(f.Wait)*time.Second, func() { l.timeout(key, w) })
			ks.waiters = append(ks.waiters, w)
			c.Send(wire.Frame{Type: wire.TypeQueued, ID: f.ID, Count: uint32(len(ks.waiters))})
		}
	case wire.TypeCancel:
		for _, ks := range l.keys {
			for i, w := range ks.waiters {
				if w.c == c && w.id == f.ID && w.owner == f.Owner {
					w.timer.Stop()
					ks.waiters = append(ks.waiters[:i], ks.waiters[i+1:]...)
					c.Send(wire.Frame{Type: wire.TypeCancelled, ID: f.ID})
					return true
				}
			}
		}
	case wire.TypeRelease:
		ks := l.state(key)
		if ks.holder == nil || ks.holder.token != f.Token {
			c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			return true
		}
		ks.holder.timer.Stop()
		ks.holder = nil
		c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		l.handoff(key, ks)
	case wire.TypeReleaseOwner:
		// Ends that owner's hold (R) and withdraws its waiter on the key
		// (answered X); N when the owner holds nothing there.
		ks := l.state(key)
		for i, w := range ks.waiters {
			if w.owner == f.Owner {
				w.timer.Stop()
				ks.waiters = append(ks.waiters[:i], ks.waiters[i+1:]...)
				w.c.Send(wire.Frame{Type: wire.TypeCancelled, ID: w.id})
				break
			}
		}
		if ks.holder == nil || ks.holder.owner != f.Owner {
			c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID})
			return true
		}
		ks.holder.timer.Stop()
		ks.holder = nil
		c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		l.handoff(key, ks)
	case wire.TypeDescribe:
		ks := l.state(key)
		i := wire.Frame{Type: wire.TypeInfo, ID: f.ID, Count: uint32(len(ks.waiters))}
		if h := ks.holder; h != nil {
			i.Flags = wire.InfoHeld
			i.Token, i.Owner, i.LeaseMs = h.token, h.owner, h.leaseMs
			i.Remaining = uint32(max(time.Until(h.end), 0) / time.Millisecond)
		}
		c.Send(i)
	default:
		return false
	}
	return true
}

func (l *Locks) grant(key string, ks *keyState, c *Conn, id uint32, owner wire.Owner, lease uint8, queuedMs uint32) {
	l.last++
	d := time.Duration(lease) * time.Second
	h := &hold{token: l.last, owner: owner, leaseMs: uint32(d / time.Millisecond), end: time.Now().Add(d)}
	token := h.token
	h.timer = time.AfterFunc(d, func() { l.expire(key, token) })
	ks.holder = h
	c.Send(wire.Frame{Type: wire.TypeGranted, ID: id, Token: h.token, LeaseMs: h.leaseMs, QueuedMs: queuedMs})
}

// handoff grants the key to its first waiter, if it is free.
func (l *Locks) handoff(key string, ks *keyState) {
	if ks.holder != nil || len(ks.waiters) == 0 {
		return
	}
	w := ks.waiters[0]
	ks.waiters = ks.waiters[1:]
	w.timer.Stop()
	l.grant(key, ks, w.c, w.id, w.owner, w.lease, uint32(time.Since(w.arrived)/time.Millisecond))
}

func (l *Locks) expire(key string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	if l.closed || ks == nil || ks.holder == nil || ks.holder.token != token {
		return
	}
	ks.holder = nil
	l.handoff(key, ks)
}

func (l *Locks) timeout(key string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[key]
	if l.closed || ks == nil {
		return
	}
	for i, x := range ks.waiters {
		if x == w {
			ks.waiters = append(ks.waiters[:i], ks.waiters[i+1:]...)
			w.c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: w.id, QueuedMs: uint32(time.Since(w.arrived) / time.Millisecond)})
			return
		}
	}
}

// Drop removes the waiters of a connection that ended.
func (l *Locks) Drop(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ks := range l.keys {
		kept := ks.waiters[:0]
		for _, w := range ks.waiters {
			if w.c == c {
				w.timer.Stop()
			} else {
				kept = append(kept, w)
			}
		}
		ks.waiters = kept
	}
}
