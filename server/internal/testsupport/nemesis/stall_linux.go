package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/stallhook"
)

// stallHold is how long the stall-after-commit fault keeps the leader's core
// stopped: long enough for another server to be elected (a leader lease and
// an election timeout, 0.5 s each by default), take over and let the
// stalled grant's lease (2-3 s in the workload, restarted in full at the
// takeover) run out there, and short enough that the stalled acquire's
// client (wait 1 s, 5 s more for the answer) still waits for its answer.
const stallHold = 4500 * time.Millisecond

// stallAfterCommit arms the stall hook of the leader l, waits until a grant
// to an acquire with wait > 0 commits there and its core stops before
// answering, cuts l off from its peers (its clients still reach it, and
// keep their sessions: pings go on), holds, and resumes the core; the heal
// then ends the cut. Before the fix this describes, the resumed leader
// answered that acquire G with a lease the new leader no longer enforced;
// the checker's overlap rule, on the clients' conservative deadlines,
// catches such a G.
func (n *nemesis) stallAfterCommit(ctx context.Context, l int, ev *FaultEvent, sleep func(time.Duration)) error {
	nd := n.c.Nodes[l]
	if countInLogs(nd, stallhook.BuiltIn) == 0 {
		return fmt.Errorf("%s: ticketd was built without the stall hook (go build -tags stallhook)", nd.ID)
	}
	before := countInLogs(nd, stallhook.Stalled)
	if err := nd.armStall(); err != nil {
		return err
	}
	stalled := false
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		if countInLogs(nd, stallhook.Stalled) > before {
			stalled = true
			break
		}
		sleep(20 * time.Millisecond) // polling the server's log for the stall
	}
	if !stalled {
		return errors.Join(fmt.Errorf("%s: no grant with wait > 0 committed within 20 s of arming the stall hook", nd.ID), nd.endStall())
	}
	ev.Start = n.h.Now()
	ev.Target += " stalled after a commit, cut off from its peers"
	err := n.isolate(l, false)
	sleep(stallHold)
	return errors.Join(err, nd.endStall())
}

// armStall arms the stall hook of nd's ticketd.
func (nd *Node) armStall() error {
	if err := nd.signal(stallhook.Arm); err != nil {
		return err
	}
	nd.mu.Lock()
	nd.stall = true
	nd.mu.Unlock()
	return nil
}

// endStall resumes nd's core if its stall hook holds it and disarms the
// hook; it does nothing unless the hook was armed.
func (nd *Node) endStall() error {
	nd.mu.Lock()
	armed := nd.stall
	nd.stall = false
	nd.mu.Unlock()
	if !armed || !nd.Running() {
		return nil
	}
	return nd.signal(stallhook.Resume)
}
