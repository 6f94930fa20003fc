package nemesis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// Faults of membership and peer identity (docs/design.md, Cluster
// identity): a member's old data directory put back after it was removed
// and added again, a join interrupted by the leader's death, and peers
// that claim a member's id without the cluster secret.
const (
	// ReAddOldDir: a follower removed and added back with an empty data
	// directory (a learner, promoted once caught up), a copy of its old
	// directory kept; once it is a voter again it is stopped and started
	// on the old directory, which its peers must refuse for the hold; the
	// heal puts its current directory back.
	ReAddOldDir FaultKind = "re-add-old-dir"
	// JoinLeaderKill: a follower removed and added back empty, its Raft
	// link slowed so that it stays a learner a while, and the leader
	// killed while it is one; a new leader must finish the join (the
	// server becomes a voter) after the heal.
	JoinLeaderKill FaultKind = "join-leader-kill"
	// ForgedPeers: for the hold, connections to the servers' Raft ports
	// claiming a member's id without the cluster secret (hellos with
	// wrong proofs, none, older versions, garbage); every one must be
	// refused before any Raft message.
	ForgedPeers FaultKind = "forged-peers"
)

// MembershipFaults are the kinds of this file that the schedule draws from.
var MembershipFaults = []FaultKind{ReAddOldDir, JoinLeaderKill, ForgedPeers}

func init() {
	AllFaults = append(AllFaults, MembershipFaults...)
}

// The old and the current data directory of re-add-old-dir are put aside
// by renaming them within the data directory's filesystem, as a disk
// taken out and put back: a copy would be refused as such (a directory
// that is not where it was created), not as a lost disk. wipeData leaves
// them.
const stashPrefix = "nemesis-stash-"

// stash puts nd's Raft directory aside as name (nd stopped).
func (nd *Node) stash(name string) error {
	to := filepath.Join(nd.dataDir(), stashPrefix+name)
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	return os.Rename(filepath.Join(nd.dataDir(), "raft"), to)
}

// unstash puts the Raft directory set aside as name back in place of the
// current one (nd stopped).
func (nd *Node) unstash(name string) error {
	raft := filepath.Join(nd.dataDir(), "raft")
	if err := os.RemoveAll(raft); err != nil {
		return err
	}
	return os.Rename(filepath.Join(nd.dataDir(), stashPrefix+name), raft)
}

// memberState reports whether server i is in the leader's configuration,
// and as a voter.
func (n *nemesis) memberState(ctx context.Context, i int) (in, voter bool, err error) {
	l, err := n.c.Leader(ctx)
	if err != nil {
		return false, false, err
	}
	a, err := n.c.admin(ctx, l)
	if err != nil {
		return false, false, err
	}
	defer a.Close()
	st, err := a.Status(ctx)
	if err != nil {
		return false, false, err
	}
	for _, m := range st.Members {
		if m.ID == n.c.Nodes[i].ID {
			return true, m.Voter, nil
		}
	}
	return false, false, nil
}

// waitVoter waits until server i is a voter in the leader's configuration.
func (n *nemesis) waitVoter(ctx context.Context, i int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		in, voter, err := n.memberState(ctx, i)
		if err == nil && in && voter {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become a voter within %v (last error: %v)", n.c.Nodes[i].ID, d, last)
		case <-time.After(100 * time.Millisecond): // polling the leader's configuration, bounded by ctx
		}
	}
}

// injectMembership applies the kinds of this file; handled is false for
// others.
func (n *nemesis) injectMembership(ctx context.Context, kind FaultKind, hold time.Duration, ev *FaultEvent) (handled bool, err error) {
	switch kind {
	case ReAddOldDir:
		err = n.reAddOldDir(ctx, hold, ev)
	case JoinLeaderKill:
		err = n.joinLeaderKill(ctx, hold, ev)
	case ForgedPeers:
		err = n.forgedPeers(ctx, hold, ev)
	default:
		return false, nil
	}
	herr := n.healAll()
	if ev.Start == 0 {
		return true, errors.Join(err, herr)
	}
	ev.Healed = n.h.Now()
	if err = errors.Join(err, herr, n.waitReady(ctx)); err != nil {
		ev.Err = err.Error()
	}
	return true, err
}

func (n *nemesis) reAddOldDir(ctx context.Context, hold time.Duration, ev *FaultEvent) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	i := n.others(l)[n.rng.IntN(len(n.c.Nodes)-1)]
	nd := n.c.Nodes[i]
	ev.Target = fmt.Sprintf("follower %s (removed, added back empty, then its old directory)", nd.ID)
	ev.Start = n.h.Now()
	if err := errors.Join(nd.Kill(), nd.stash("old")); err != nil {
		return err
	}
	if err := n.replaceDisk(ctx, i); err != nil {
		return err
	}
	if err := n.waitVoter(ctx, i, 60*time.Second); err != nil {
		return err
	}
	if err := errors.Join(nd.Kill(), nd.stash("current"), nd.unstash("old")); err != nil {
		return err
	}
	marks := n.logMarks()
	if err := nd.Start(); err != nil {
		return err
	}
	// For the hold the server runs on its old directory with its original
	// configuration: its peers must refuse it (it lost what it voted for
	// since). The refusal is logged by whichever side sees it first.
	err = n.watchRefused(ctx, i, hold, marks)
	// Heal: the current directory back, as an operator who put the wrong
	// disk in would.
	return errors.Join(err, nd.stop(), nd.unstash("current"), nd.Start())
}

// watchRefused watches server i, started on an old directory, for the
// hold and then until a refusal of it shows in a log (at most 30 s more):
// it must never lead, and some server must refuse it.
func (n *nemesis) watchRefused(ctx context.Context, i int, hold time.Duration, marks []logMark) error {
	nd := n.c.Nodes[i]
	end, deadline := time.Now().Add(hold), time.Now().Add(hold+30*time.Second)
	for ctx.Err() == nil {
		if st, err := nd.Status(ctx); err == nil && st.Role == "leader" {
			return fmt.Errorf("%s, on its old data directory, became leader", nd.ID)
		}
		if time.Now().After(end) {
			if n.refusedInLogs(i, marks) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s ran on its old data directory and no server refused it within %v", nd.ID, hold+30*time.Second)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // watching the server through the hold
		}
	}
	return ctx.Err()
}

// logMark is where a server's current log ended at a moment.
type logMark struct {
	file string
	size int64
}

func (n *nemesis) logMarks() []logMark {
	marks := make([]logMark, len(n.c.Nodes))
	for j, nd := range n.c.Nodes {
		nd.mu.Lock()
		marks[j].file = nd.logFile
		nd.mu.Unlock()
		if fi, err := os.Stat(marks[j].file); err == nil {
			marks[j].size = fi.Size()
		}
	}
	return marks
}

// refusedInLogs reports whether, since marks, a log shows a Raft
// connection refused for server i's data directory incarnation (its own
// log, or a peer's naming it).
func (n *nemesis) refusedInLogs(i int, marks []logMark) bool {
	id := n.c.Nodes[i].ID
	for j, nd := range n.c.Nodes {
		nd.mu.Lock()
		file := nd.logFile
		nd.mu.Unlock()
		b, _ := os.ReadFile(file)
		if file == marks[j].file && int64(len(b)) >= marks[j].size {
			b = b[marks[j].size:]
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "Raft connection refused") || !strings.Contains(line, "incarnation") {
				continue
			}
			if j == i || strings.Contains(line, "peer="+id+" ") {
				return true
			}
		}
	}
	return false
}

func (n *nemesis) joinLeaderKill(ctx context.Context, hold time.Duration, ev *FaultEvent) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	i := n.others(l)[n.rng.IntN(len(n.c.Nodes)-1)]
	nd := n.c.Nodes[i]
	ev.Target = fmt.Sprintf("%s added back empty, the leader killed while it is a learner", nd.ID)
	ev.Start = n.h.Now()
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// A lost answer may have removed it already: check before each try.
	if err := n.membership(mctx, i, func(a *ticketing.Admin) error {
		if in, err := isMember(mctx, a, nd.ID); err != nil || !in {
			return err
		}
		return a.RemoveMember(mctx, nd.ID)
	}); err != nil {
		return fmt.Errorf("members remove %s: %w", nd.ID, err)
	}
	cfg, err := nd.joinConfig()
	if err != nil {
		return err
	}
	if err := errors.Join(nd.Kill(), nd.wipeData(), nd.startWith(cfg)); err != nil {
		return err
	}
	// A slow link keeps the new server a learner for a while.
	if err := nd.Raft.Set(LinkMode{Delay: 300 * time.Millisecond, Jitter: 200 * time.Millisecond}); err != nil {
		return err
	}
	// members add, repeated (as an operator would) until the server is
	// in the configuration, but not once the leader is killed: from then
	// on, finishing the join is the new leader's work.
	killed := make(chan struct{})
	added := make(chan struct{})
	go func() {
		defer close(added)
		actx, cancel := context.WithCancel(mctx)
		defer cancel()
		go func() {
			select {
			case <-killed:
				cancel()
			case <-actx.Done():
			}
		}()
		_ = n.membership(actx, i, func(a *ticketing.Admin) error {
			_, err := a.AddMember(actx, nd.ID, fmt.Sprintf("%s:%d", n.c.Net.Addr(i), raftPort))
			return err
		})
	}()
	// Kill the leader once a majority holds the configuration that made
	// the new server a learner (so that any new leader has it).
	var leader int
	for {
		if leader, err = n.c.Leader(mctx); err == nil && leader != i {
			learner, voter := n.majorityHas(mctx, i)
			if learner {
				if voter {
					ev.Target += " (it was a voter before the kill)"
				}
				break
			}
		}
		select {
		case <-mctx.Done():
			close(killed)
			<-added
			return fmt.Errorf("%s never reached every server's configuration: %w", nd.ID, mctx.Err())
		case <-time.After(20 * time.Millisecond): // polling the configurations, bounded by mctx
		}
	}
	ev.Target += ", leader " + n.c.Nodes[leader].ID
	err = n.c.Nodes[leader].Kill()
	close(killed)
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	<-added
	// Heal (the leader restarted, the link made normal), then a leader
	// must finish the join on its own.
	err = errors.Join(err, n.healAll(), n.waitReady(ctx))
	if err != nil {
		return err
	}
	return n.waitVoter(ctx, i, 60*time.Second)
}

// isMember reports whether id is in the configuration a's server knows.
func isMember(ctx context.Context, a *ticketing.Admin, id string) (bool, error) {
	st, err := a.Status(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range st.Members {
		if m.ID == id {
			return true, nil
		}
	}
	return false, nil
}

// majorityHas reports whether a majority of the voters (every server but
// i) list i in their configuration, so that any new leader has it, and
// whether any lists it as a voter.
func (n *nemesis) majorityHas(ctx context.Context, i int) (in, voter bool) {
	count := 0
	for j, nd := range n.c.Nodes {
		if j == i || !nd.Running() {
			continue
		}
		st, err := nd.Status(ctx)
		if err != nil {
			continue
		}
		for _, m := range st.Members {
			if m.ID == n.c.Nodes[i].ID {
				count++
				voter = voter || m.Voter
			}
		}
	}
	return count >= (len(n.c.Nodes)-1)/2+1, voter
}

// forgedPeers makes connections to the servers' Raft ports, from a client
// group's namespace, claiming a member's id without the cluster secret, for
// the hold. An accepted one is an error.
func (n *nemesis) forgedPeers(ctx context.Context, hold time.Duration, ev *FaultEvent) error {
	var cluster fsm.ClusterID
	st, err := n.c.Nodes[0].Status(ctx)
	if err == nil {
		var b []byte
		if b, err = hex.DecodeString(st.ClusterID); err == nil && len(b) == len(cluster) {
			copy(cluster[:], b)
		}
	}
	// An unknown cluster ID leaves it zero: the forgery is then refused
	// for that too, and the proofs are still what is tested. The hellos
	// claim incarnation 0 (unknown), which passes the identity check:
	// only the cluster secret keeps the forger out.
	dial := DialerIn(n.c.Net.NS(n.c.Net.ClientNode(n.rng.IntN(ClientGroups))))
	ev.Start = n.h.Now()
	end := time.Now().Add(hold)
	tries, refused := 0, 0
	var errs []error
	// A connection every 10 ms: a steady stream, not a flood that would
	// test the host rather than the servers.
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for time.Now().Before(end) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
			continue
		case <-pace.C:
		}
		target, claimed := n.rng.IntN(len(n.c.Nodes)), n.c.Nodes[n.rng.IntN(len(n.c.Nodes))].ID
		variant := n.rng.IntN(6)
		tries++
		accepted, err := forgeOnce(ctx, dial, fmt.Sprintf("%s:%d", n.c.Net.Addr(target), raftPort), claimed, cluster, variant)
		if accepted {
			errs = append(errs, fmt.Errorf("%s accepted a forged Raft connection claiming %s (variant %d): %v", n.c.Nodes[target].ID, claimed, variant, err))
		} else {
			refused++
		}
	}
	ev.Target = fmt.Sprintf("%d forged connections, %d refused", tries, refused)
	return errors.Join(errs...)
}

// forgeOnce makes one forged connection of variant and reports whether the
// server accepted it (a reply with verdict 0). Anything else (a refusal,
// the connection closed, a timeout) is a refusal; a connection that stays
// open and answers nothing is a refusal too, since Raft never answers
// garbage, but it is closed after 5 s.
func forgeOnce(ctx context.Context, dial DialFunc, addr, claimed string, cluster fsm.ClusterID, variant int) (accepted bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	c, err := dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return false, err // the server is not there (a fault elsewhere); nothing was accepted
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	garbage := ForgeGarbage()
	var hello []byte
	switch variant {
	case 0: // claims the secret, then a wrong proof
		hello = node.ForgeHello(claimed, cluster, 0, 3, true)
	case 1: // claims the secret, then an out-of-range count of proofs
		hello = node.ForgeHello(claimed, cluster, 0, 3, true)
	case 2: // proves nothing
		hello = node.ForgeHello(claimed, cluster, 0, 3, false)
	case 3: // an older version, which cannot prove the secret
		hello = node.ForgeHello(claimed, cluster, 0, 2, false)
	case 4: // the oldest version
		hello = node.ForgeHello(claimed, cluster, 0, 1, false)
	default: // garbage instead of a hello
		if _, err := c.Write(garbage); err != nil {
			return false, err
		}
		_, ok, reason, err := node.ReadForgedAnswer(c)
		if ok {
			return true, fmt.Errorf("accepted garbage (%s)", reason)
		}
		return false, err
	}
	if _, err := c.Write(hello); err != nil {
		return false, err
	}
	challenged, ok, reason, err := node.ReadForgedAnswer(c)
	if err != nil || ok {
		return ok, err
	}
	if !challenged {
		return false, errors.New(reason)
	}
	proof := node.ForgeProofs(1)
	if variant == 1 {
		proof = node.ForgeProofs(9)
	}
	// Raft bytes right behind the proof: they must never be read as Raft.
	if _, err := c.Write(append(proof, garbage...)); err != nil {
		return false, err
	}
	_, ok, reason, err = node.ReadForgedAnswer(c)
	if ok {
		return true, fmt.Errorf("accepted after a wrong proof (%s)", reason)
	}
	return false, err
}

// ForgeGarbage is bytes that are no protocol's: random, at most 4 KiB.
func ForgeGarbage() []byte {
	b := make([]byte, 1+rand.IntN(4096))
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}
