//go:build stallhook

package core

import (
	"os"
	"os/signal"
	"sync"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/stallhook"
)

// The stall hook (package stallhook), only in a ticketd built with
// -tags stallhook, for the nemesis harness's stall fault.
var stall struct {
	mu     sync.Mutex
	armed  bool
	resume chan struct{} // the stalled core waits for it; nil when none
}

func init() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stallhook.Arm, stallhook.Resume)
	go func() {
		for sig := range sigs {
			stall.mu.Lock()
			if sig == stallhook.Arm {
				stall.armed = true
			} else {
				stall.armed = false
				if stall.resume != nil {
					close(stall.resume)
					stall.resume = nil
				}
			}
			stall.mu.Unlock()
		}
	}()
	commitHook = stallAfterCommit
	startHook = func(c *Core) { c.logger.Info(stallhook.BuiltIn) }
}

// stallAfterCommit runs in the awaiter after b's outcome and before the core
// learns it. When armed and b granted an acquire with wait > 0, it stops the
// core goroutine first and returns once the core is stopped, so that the
// outcome is waiting when the core resumes.
func stallAfterCommit(c *Core, b *batch, res []fsm.Result) {
	stall.mu.Lock()
	if !stall.armed || !grantsWaiter(b, res) {
		stall.mu.Unlock()
		return
	}
	stall.armed = false
	resume := make(chan struct{})
	stall.resume = resume
	stall.mu.Unlock()
	paused := make(chan struct{})
	c.event_(coreEvent{pause: resume, paused: paused})
	select {
	case <-paused:
		c.logger.Warn(stallhook.Stalled, "ops", len(b.ops))
	case <-c.stop:
	}
}

// grantsWaiter reports whether b granted an acquire whose wait is > 0 (the
// waiter's wait is fixed before its attempt is proposed).
func grantsWaiter(b *batch, res []fsm.Result) bool {
	for i, r := range res {
		if cs := b.causes[i]; cs.kind == causeAttempt && r.Status == fsm.Granted && cs.w.wait > 0 {
			return true
		}
	}
	return false
}
