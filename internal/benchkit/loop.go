package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The lock workloads every generator runs, so that the systems compared
// do exactly the same work per worker and are measured the same way.
const (
	Uncontended = "uncontended" // each worker acquires and releases its own key
	Contended   = "contended"   // every worker on one key, waiting for it
)

// Lock is one system's lock as a worker drives it: Acquire returns the
// grant's fencing token and a release for that grant. Acquire waits for a
// held key as long as the system's workload flags say.
type Lock interface {
	Acquire(ctx context.Context, key string) (token uint64, release func(context.Context) error, err error)
}

// LoopMode says what one iteration of LockLoop counts.
type LoopMode int

const (
	CountPairs    LoopMode = iota // ops = acquire+release pairs completed in the window
	CountAcquires                 // ops = grants (handoffs) in the window
)

// HeldCheck is the safety check made while holding a grant: Enter returns
// false on a violation; Leave is called just before the release.
type HeldCheck interface {
	Enter(token uint64) bool
	Leave()
}

// PerKeyCheck is for one worker per key: its tokens must strictly increase.
type PerKeyCheck struct{ last uint64 }

func (c *PerKeyCheck) Enter(tok uint64) bool { ok := tok > c.last; c.last = tok; return ok }
func (c *PerKeyCheck) Leave()                {}

// SharedKeyCheck is for many workers on one key: at most one holder at a
// time and tokens strictly increasing in grant order.
type SharedKeyCheck struct {
	holders atomic.Int32
	mu      sync.Mutex
	last    uint64
}

func (c *SharedKeyCheck) Enter(tok uint64) bool {
	ok := c.holders.Add(1) == 1
	c.mu.Lock()
	if tok <= c.last {
		ok = false
	} else {
		c.last = tok
	}
	c.mu.Unlock()
	return ok
}
func (c *SharedKeyCheck) Leave() { c.holders.Add(-1) }

// LoopConfig bounds one worker's loop.
type LoopConfig struct {
	Mode      LoopMode
	OpTimeout time.Duration // a pair shares one context of twice this
	MaxOps    int64         // iterations at most
	Interval  time.Duration // > 0: start one pair per interval (paced), else closed loop
}

// LockLoop acquires and releases key until the window ends (or ctx, or
// MaxOps iterations), recording into rec what falls in the window. A failed
// acquire is followed by a 20 ms pause so that a broken server is not
// hammered.
func LockLoop(ctx context.Context, l Lock, key string, win Window, cfg LoopConfig, check HeldCheck, rec *Recorder) {
	next := time.Now()
	for it := int64(0); it < cfg.MaxOps; it++ {
		if ctx.Err() != nil || !time.Now().Before(win.End) {
			return
		}
		if cfg.Interval > 0 {
			if !SleepUntil(ctx, next, win.End) {
				return
			}
			next = next.Add(cfg.Interval)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*cfg.OpTimeout)
		t0 := time.Now()
		tok, release, err := l.Acquire(pctx, key)
		t1 := time.Now()
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return
			}
			if !t1.Before(win.Start) && t0.Before(win.End) {
				rec.Fail("acquire", err)
			}
			SleepUntil(ctx, time.Now().Add(20*time.Millisecond), win.End)
			continue
		}
		if !check.Enter(tok) && !t1.Before(win.Start) {
			rec.Violations++
		}
		if cfg.Mode == CountAcquires && win.In(t1) {
			rec.Ops++
			rec.Acquire = append(rec.Acquire, t1.Sub(t0))
		}
		check.Leave()
		err = release(pctx)
		t2 := time.Now()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !t2.Before(win.Start) && t0.Before(win.End) {
				rec.Fail("release", err)
			}
			continue
		}
		if cfg.Mode == CountPairs && win.In(t2) {
			rec.Ops++
			rec.Pair = append(rec.Pair, t2.Sub(t0))
			rec.Acquire = append(rec.Acquire, t1.Sub(t0))
		}
	}
}

// SleepUntil sleeps until t (at most until limit); false if ctx ended or t
// is not before limit.
func SleepUntil(ctx context.Context, t, limit time.Time) bool {
	if !t.Before(limit) {
		t = limit
	}
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil && t.Before(limit)
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return t.Before(limit)
	}
}
