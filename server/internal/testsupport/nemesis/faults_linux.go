package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FaultKind names one kind of fault the nemesis injects.
type FaultKind string

// Every fault kind the harness implements. The short CI run injects each
// at least once.
const (
	PartitionMinority  FaultKind = "partition-minority"   // a random minority ((n-1)/2 servers) cut off from the majority, both directions
	PartitionLeader    FaultKind = "partition-leader"     // the leader cut off from its peers; clients still reach it
	PartitionLeaderAll FaultKind = "partition-leader-all" // the leader cut off from peers and clients
	// PartitionLeaderSome: the leader cut off from its peers with one
	// client group, which is cut off from the peers; the other client group
	// is cut off from the leader and reaches only the peers.
	PartitionLeaderSome FaultKind = "partition-leader-some"
	PartitionBridge     FaultKind = "partition-bridge" // two nodes cut from each other; the third sees both
	// PartitionFollower: a follower cut off from its peers, both
	// directions; clients still reach it.
	PartitionFollower FaultKind = "partition-follower"
	// PartitionClientsLeader: one client group (random) cut off from the
	// leader, both directions, and nothing else: its sessions lose the
	// leader while it keeps its quorum and serves the other clients.
	PartitionClientsLeader FaultKind = "partition-clients-leader"
	PartitionAsymmetric    FaultKind = "partition-asymmetric" // the leader's packets to its peers dropped; theirs arrive
	PartitionFlapping      FaultKind = "partition-flapping"   // the leader cut off and healed every 300-700 ms
	KillLeader             FaultKind = "kill-leader"          // SIGKILL the leader; restart it after the hold
	KillFollower           FaultKind = "kill-follower"        // SIGKILL a follower; restart it after the hold
	PauseLeader            FaultKind = "pause-leader"         // SIGSTOP the leader; SIGCONT after the hold
	RollingRestart         FaultKind = "rolling-restart"      // SIGTERM, restart, wait ready: every node in turn
	RaftDelay              FaultKind = "raft-delay"           // every Raft link slow: 20 ms + up to 80 ms jitter per chunk
	RaftStall              FaultKind = "raft-stall"           // one node's inbound Raft links silent, connections open
	RaftCut                FaultKind = "raft-cut"             // every Raft connection reset; new ones refused for the hold
	ClientDelay            FaultKind = "client-delay"         // every client link slow: 50 ms + up to 100 ms jitter
	ClientStall            FaultKind = "client-stall"         // the leader's client links silent, connections open
	ClientCut              FaultKind = "client-cut"           // the leader's client connections reset; new ones refused
	LinkBandwidth          FaultKind = "link-bandwidth"       // every server's sending limited to 256 kbit/s (tc tbf on its veth)
	DiskFullLeader         FaultKind = "disk-full-leader"     // the leader's data directory (a 64 MB tmpfs) filled up; freed at the heal
	KillInSnapshot         FaultKind = "kill-in-snapshot"     // SIGKILL a server while it writes a Raft snapshot; restart it after the hold
	// StallAfterCommit: the leader's core stopped right after a grant to an
	// acquire with wait > 0 committed, before it answers (ticketd's stall
	// hook), and the leader cut off from its peers, so another server takes
	// over and may grant the key meanwhile; the core resumes, then the cut
	// heals (stall_linux.go).
	StallAfterCommit FaultKind = "stall-after-commit"

	// Quiet injects nothing for the hold. It is not in AllFaults: a run of
	// only quiet periods counts the elections a healthy cluster holds on
	// its own (false failovers) under the workload.
	Quiet FaultKind = "quiet"
)

// AllFaults is every implemented kind, in a fixed order.
var AllFaults = []FaultKind{
	PartitionMinority, PartitionLeader, PartitionLeaderAll, PartitionLeaderSome, PartitionBridge, PartitionAsymmetric, PartitionFlapping,
	KillLeader, KillFollower, PauseLeader, RollingRestart,
	RaftDelay, RaftStall, RaftCut, ClientDelay, ClientStall, ClientCut, LinkBandwidth, DiskFullLeader, KillInSnapshot,
	StallAfterCommit,
}

// CoordFaults are the faults of the coordination runs (Config.Coord): the
// leader partitioned, a follower partitioned, the leader isolated with
// some clients, clients cut from the leader only, the leader paused and
// killed.
var CoordFaults = []FaultKind{
	PartitionLeader, PartitionFollower, PartitionLeaderSome, PartitionClientsLeader, PauseLeader, KillLeader,
}

// FaultEvent is one injected fault as it happened.
type FaultEvent struct {
	Kind   FaultKind
	Target string        // what it hit, e.g. "leader n2"
	Start  time.Duration // history time the fault began
	Healed time.Duration // history time it was healed
	Err    string        // the fault could not be applied or healed fully
}

// nemesis applies faults to a cluster.
type nemesis struct {
	c   *Cluster
	h   *History
	rng *rand.Rand
}

func (n *nemesis) leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return n.c.Leader(ctx)
}

func (n *nemesis) others(i int) []int {
	var o []int
	for j := range n.c.Nodes {
		if j != i {
			o = append(o, j)
		}
	}
	return o
}

// cut drops packets from a to b and, if both, from b to a.
func (n *nemesis) cut(a, b int, both bool) error {
	if err := n.c.Net.Drop(a, n.c.Net.Addr(b)); err != nil {
		return err
	}
	if both {
		return n.c.Net.Drop(b, n.c.Net.Addr(a))
	}
	return nil
}

func (n *nemesis) isolate(i int, fromClients bool) error {
	for _, j := range n.others(i) {
		if err := n.cut(i, j, true); err != nil {
			return err
		}
	}
	if fromClients {
		err := n.c.Net.Drop(i, n.c.Net.BridgeAddr())
		for g := range ClientGroups {
			err = errors.Join(err, n.c.Net.Drop(i, n.c.Net.Addr(n.c.Net.ClientNode(g))))
		}
		return err
	}
	return nil
}

// healAll undoes every fault: routes, proxies, paused and stopped
// processes (restarted; waitReady waits for them).
func (n *nemesis) healAll() error {
	var errs []error
	if err := n.c.Net.HealAll(); err != nil {
		errs = append(errs, err)
	}
	for _, nd := range n.c.Nodes {
		if err := nd.FreeDisk(); err != nil {
			errs = append(errs, err)
		}
		if nd.Crashed() {
			errs = append(errs, fmt.Errorf("%s exited on its own (%s)", nd.ID, nd.LogTail(15)))
		}
		if nd.Running() && nd.Listening() {
			if err := errors.Join(nd.Client.Set(LinkMode{}), nd.Raft.Set(LinkMode{})); err != nil {
				errs = append(errs, err)
			}
		}
		if nd.Paused() {
			if err := nd.Resume(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := nd.endStall(); err != nil {
			errs = append(errs, err)
		}
		if !nd.Running() {
			if err := nd.Start(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// waitReady waits until every server answers /readyz.
func (n *nemesis) waitReady(ctx context.Context) error {
	var errs []error
	for _, nd := range n.c.Nodes {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if err := nd.WaitReady(wctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}

// inject applies one fault, holds it for hold (rolling restarts take their
// own time), and heals it. The event is filled in as it goes.
func (n *nemesis) inject(ctx context.Context, kind FaultKind, hold time.Duration, ev *FaultEvent) error {
	ev.Kind = kind
	if handled, err := n.injectDisk(ctx, kind, hold, ev); handled {
		return err
	}
	if handled, err := n.injectMembership(ctx, kind, hold, ev); handled {
		return err
	}
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	nodes := len(n.c.Nodes)
	var err error
	switch kind {
	case Quiet:
		ev.Target = "nothing"
		ev.Start = n.h.Now()
		sleep(hold)
	case KillFollower:
		l, lerr := n.leader(ctx)
		if lerr != nil {
			return lerr
		}
		f := n.others(l)[n.rng.IntN(nodes-1)]
		ev.Target = "follower " + n.c.Nodes[f].ID
		ev.Start = n.h.Now()
		err = n.c.Nodes[f].Kill()
		sleep(hold)
	case KillInSnapshot:
		i, name, werr := waitSnapshotStart(ctx, n.c, 30*time.Second)
		if werr != nil {
			return werr
		}
		if i < 0 {
			return errors.New("no server started a snapshot within 30 s")
		}
		ev.Start = n.h.Now()
		err = n.c.Nodes[i].Kill()
		ev.Target = fmt.Sprintf("%s writing snapshot %s", n.c.Nodes[i].ID, name)
		// Whether the kill came before the snapshot was complete: the
		// directory keeps its .tmp name until then.
		if _, serr := os.Stat(filepath.Join(n.c.Nodes[i].dataDir(), "raft", "snapshots", name)); serr != nil {
			ev.Target += " (complete before the kill landed)"
		}
		sleep(hold)
	case PartitionMinority:
		// A random minority ((n-1)/2 servers, the leader possibly among
		// them) cut off from the majority, both directions.
		perm := n.rng.Perm(nodes)
		minority, majority := perm[:(nodes-1)/2], perm[(nodes-1)/2:]
		var ids []string
		for _, i := range minority {
			ids = append(ids, n.c.Nodes[i].ID)
		}
		ev.Target = "minority " + strings.Join(ids, ",")
		ev.Start = n.h.Now()
		for _, a := range minority {
			for _, b := range majority {
				err = errors.Join(err, n.cut(a, b, true))
			}
		}
		sleep(hold)
	case PartitionFollower:
		l, lerr := n.leader(ctx)
		if lerr != nil {
			return lerr
		}
		f := n.others(l)[n.rng.IntN(nodes-1)]
		ev.Target = "follower " + n.c.Nodes[f].ID
		ev.Start = n.h.Now()
		err = n.isolate(f, false)
		sleep(hold)
	case PartitionBridge:
		if nodes < 3 {
			return fmt.Errorf("%s needs 3 nodes", kind)
		}
		b := n.rng.IntN(nodes)
		o := n.others(b)
		ev.Target = fmt.Sprintf("%s and %s cut apart, %s sees both", n.c.Nodes[o[0]].ID, n.c.Nodes[o[1]].ID, n.c.Nodes[b].ID)
		ev.Start = n.h.Now()
		err = n.cut(o[0], o[1], true)
		sleep(hold)
	case RaftDelay:
		ev.Target = "every Raft link"
		ev.Start = n.h.Now()
		for _, nd := range n.c.Nodes {
			err = errors.Join(err, nd.Raft.Set(LinkMode{Delay: 20 * time.Millisecond, Jitter: 80 * time.Millisecond}))
		}
		sleep(hold)
	case RaftCut:
		ev.Target = "every Raft link"
		ev.Start = n.h.Now()
		for _, nd := range n.c.Nodes {
			err = errors.Join(err, nd.Raft.Set(LinkMode{Refuse: true}))
			nd.Raft.Cut()
		}
		sleep(hold)
	case RaftStall:
		i := n.rng.IntN(nodes)
		ev.Target = "inbound Raft of " + n.c.Nodes[i].ID
		ev.Start = n.h.Now()
		err = n.c.Nodes[i].Raft.Set(LinkMode{Stall: true})
		sleep(hold)
	case LinkBandwidth:
		ev.Target = "every server's link"
		ev.Start = n.h.Now()
		for i := range n.c.Nodes {
			err = errors.Join(err, n.c.Net.Limit(i, "256kbit", "16kb", "200ms"))
		}
		sleep(hold)
	case ClientDelay:
		ev.Target = "every client link"
		ev.Start = n.h.Now()
		for _, nd := range n.c.Nodes {
			err = errors.Join(err, nd.Client.Set(LinkMode{Delay: 50 * time.Millisecond, Jitter: 100 * time.Millisecond}))
		}
		sleep(hold)
	case RollingRestart:
		ev.Target = "every node in turn"
		ev.Start = n.h.Now()
		for _, nd := range n.c.Nodes {
			if e := nd.Terminate(30 * time.Second); e != nil {
				err = errors.Join(err, e)
			}
			if e := nd.Start(); e != nil {
				err = errors.Join(err, e)
				break
			}
			// Next node only once this one serves and there is a leader:
			// a rolling restart keeps a quorum.
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			e := nd.WaitReady(wctx)
			if e == nil {
				_, e = n.c.Leader(wctx)
			}
			cancel()
			if e != nil {
				err = errors.Join(err, e)
				break
			}
		}
	default: // the faults aimed at the leader
		l, lerr := n.leader(ctx)
		if lerr != nil {
			return lerr
		}
		nd := n.c.Nodes[l]
		ev.Target = "leader " + nd.ID
		ev.Start = n.h.Now()
		switch kind {
		case PartitionLeader:
			err = n.isolate(l, false)
			sleep(hold)
		case PartitionLeaderAll:
			err = n.isolate(l, true)
			sleep(hold)
		case PartitionLeaderSome:
			with := n.rng.IntN(ClientGroups)
			ev.Target += fmt.Sprintf(" with client group %d", with+1)
			err = n.isolate(l, false)
			for g := range ClientGroups {
				cg := n.c.Net.ClientNode(g)
				if g == with {
					for _, j := range n.others(l) {
						err = errors.Join(err, n.cut(cg, j, true))
					}
				} else {
					err = errors.Join(err, n.cut(cg, l, true))
				}
			}
			sleep(hold)
		case PartitionClientsLeader:
			g := n.rng.IntN(ClientGroups)
			ev.Target += fmt.Sprintf(" cut from client group %d", g+1)
			err = n.cut(n.c.Net.ClientNode(g), l, true)
			sleep(hold)
		case PartitionAsymmetric:
			for _, j := range n.others(l) {
				err = errors.Join(err, n.cut(l, j, false))
			}
			sleep(hold)
		case PartitionFlapping:
			end := time.Now().Add(hold)
			for time.Now().Before(end) && ctx.Err() == nil {
				err = errors.Join(err, n.isolate(l, false))
				sleep(time.Duration(300+n.rng.IntN(400)) * time.Millisecond)
				err = errors.Join(err, n.c.Net.HealAll())
				sleep(time.Duration(300+n.rng.IntN(400)) * time.Millisecond)
			}
		case KillLeader:
			err = nd.Kill()
			sleep(hold)
		case PauseLeader:
			err = nd.Pause()
			sleep(hold)
		case ClientStall:
			err = nd.Client.Set(LinkMode{Stall: true})
			sleep(hold)
		case ClientCut:
			err = nd.Client.Set(LinkMode{Refuse: true})
			nd.Client.Cut()
			sleep(hold)
		case DiskFullLeader:
			err = nd.FillDisk()
			sleep(hold)
		case StallAfterCommit:
			err = n.stallAfterCommit(ctx, l, ev, sleep)
		default:
			return fmt.Errorf("unknown fault kind %q", kind)
		}
	}
	herr := n.healAll()
	ev.Healed = n.h.Now()
	if err = errors.Join(err, herr, n.waitReady(ctx)); err != nil {
		ev.Err = err.Error()
	}
	return err
}
