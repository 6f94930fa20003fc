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

	"github.com/ticketing-io/ticketing"
)

// Faults of disks and of a cluster's first second (docs/design.md, Cluster
// identity): a member that loses its data directory and is started again
// with its original configuration must be refused, never found a second
// history, and come back only through members remove and add; a server
// that stalls or dies while the cluster forms must not leave a way for
// tokens to go backwards later.
const (
	// WipeFollower: SIGKILL a follower, empty its data directory, start
	// it again with its original configuration (bootstrap list included).
	// It must wait to be added and be refused by the leader for the hold;
	// the heal then replaces the disk as docs/deployment.md says (members
	// remove, start with join, members add).
	WipeFollower FaultKind = "wipe-follower"
	// WipeLeader: the same for the leader.
	WipeLeader FaultKind = "wipe-leader"

	// YoungStall and YoungKill hit a server within the first second of
	// the cluster's life (SIGSTOP, or SIGKILL), before the workload runs,
	// and heal it (SIGCONT, or a restart) after the hold. They are not in
	// AllFaults: they happen once, at the start of a run (Config.Young).
	YoungStall FaultKind = "young-stall"
	YoungKill  FaultKind = "young-kill"
)

// DiskFaults are the kinds of this file that the schedule draws from.
var DiskFaults = []FaultKind{WipeFollower, WipeLeader}

// YoungFaults are the kinds a run can inject at the cluster's start.
var YoungFaults = []FaultKind{YoungStall, YoungKill}

func init() {
	// Kept apart from the list in faults_linux.go so that fault kinds can
	// be added in both places independently.
	AllFaults = append(AllFaults, DiskFaults...)
}

// joinConfig is nd's configuration to be added to a running cluster: the
// original without the bootstrap list, with join.
func (nd *Node) joinConfig() (string, error) {
	b, err := os.ReadFile(nd.cfg)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "bootstrap = ") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, "join = true")
	file := nd.cfg + ".join"
	return file, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// wipeData empties nd's data directory (the tmpfs mount point stays),
// but for the directories a fault put aside.
func (nd *Node) wipeData() error {
	ents, err := os.ReadDir(nd.dataDir())
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stashPrefix) {
			continue // a directory the fault put aside (membership_linux.go)
		}
		errs = append(errs, os.RemoveAll(filepath.Join(nd.dataDir(), e.Name())))
	}
	return errors.Join(errs...)
}

// stop kills nd if it runs (its proxies refuse connections either way).
func (nd *Node) stop() error {
	nd.kill()
	return nd.down()
}

// startWith starts nd with the configuration file cfg instead of its own,
// this once.
func (nd *Node) startWith(cfg string) error {
	nd.mu.Lock()
	orig := nd.cfg
	nd.cfg = cfg
	nd.mu.Unlock()
	err := nd.Start()
	nd.mu.Lock()
	nd.cfg = orig
	nd.mu.Unlock()
	return err
}

// admin opens an admin session with server i over the control path.
func (c *Cluster) admin(ctx context.Context, i int) (*ticketing.Admin, error) {
	return ticketing.DialAdmin(ctx, c.Nodes[i].ctl.Addr(), ticketing.WithDialTimeout(2*time.Second))
}

// injectDisk applies the kinds of this file; handled is false for others.
func (n *nemesis) injectDisk(ctx context.Context, kind FaultKind, hold time.Duration, ev *FaultEvent) (handled bool, err error) {
	if kind != WipeFollower && kind != WipeLeader {
		return false, nil
	}
	ev.Kind = kind
	l, err := n.leader(ctx)
	if err != nil {
		return true, err
	}
	i, role := l, "leader"
	if kind == WipeFollower {
		i, role = n.others(l)[n.rng.IntN(len(n.c.Nodes)-1)], "follower"
	}
	nd := n.c.Nodes[i]
	ev.Target = fmt.Sprintf("%s %s (data directory emptied)", role, nd.ID)
	ev.Start = n.h.Now()
	err = errors.Join(nd.Kill(), nd.wipeData(), nd.Start())
	// For the hold the emptied server runs with its original
	// configuration: it must stay out of the cluster.
	end := time.Now().Add(hold)
	for err == nil && time.Now().Before(end) && ctx.Err() == nil {
		if st, serr := nd.Status(ctx); serr == nil && st.ClusterID != "" && st.ClusterID != "none" {
			err = fmt.Errorf("%s, emptied and started with its original configuration, took part in cluster %s without being removed and added back", nd.ID, st.ClusterID)
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // watching the emptied server through the hold
		}
	}
	if err == nil {
		err = n.replaceDisk(ctx, i)
	}
	herr := n.healAll()
	ev.Healed = n.h.Now()
	if err = errors.Join(err, herr, n.waitReady(ctx)); err != nil {
		ev.Err = err.Error()
	}
	return true, err
}

// replaceDisk brings back server i, which lost its data, as
// docs/deployment.md "Replace a failed disk" says: members remove, an empty
// data directory, start with join and without the bootstrap list, members
// add; later restarts use the original configuration again.
func (n *nemesis) replaceDisk(ctx context.Context, i int) error {
	nd := n.c.Nodes[i]
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	membership := func(do func(a *ticketing.Admin) error) error {
		if err := n.membership(ctx, i, do); err != nil {
			return fmt.Errorf("replacing %s's disk: %w", nd.ID, err)
		}
		return nil
	}
	member := func(a *ticketing.Admin) (bool, error) {
		st, err := a.Status(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range st.Members {
			if m.ID == nd.ID {
				return true, nil
			}
		}
		return false, nil
	}
	// A lost answer may have removed it already: check before each try.
	if err := membership(func(a *ticketing.Admin) error {
		if in, err := member(a); err != nil || !in {
			return err
		}
		return a.RemoveMember(ctx, nd.ID)
	}); err != nil {
		return err
	}
	cfg, err := nd.joinConfig()
	if err != nil {
		return err
	}
	if err := errors.Join(nd.stop(), nd.wipeData(), nd.startWith(cfg)); err != nil {
		return err
	}
	raftAddr := fmt.Sprintf("%s:%d", n.c.Net.Addr(i), raftPort)
	return membership(func(a *ticketing.Admin) error {
		if in, err := member(a); err != nil || in {
			return err
		}
		_, err := a.AddMember(ctx, nd.ID, raftAddr)
		return err
	})
}

// membership runs do with the leader, when it is not server i, until do
// succeeds or ctx ends (a leader that changed or lost an answer).
func (n *nemesis) membership(ctx context.Context, i int, do func(a *ticketing.Admin) error) error {
	for {
		l, err := n.c.Leader(ctx)
		if err == nil && l != i {
			var a *ticketing.Admin
			if a, err = n.c.admin(ctx, l); err == nil {
				err = do(a)
				_ = a.Close()
				if err == nil {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond): // retrying until a leader takes the change
		}
	}
}

// youngFault stalls or kills server i within the cluster's first second
// (after a delay drawn from rng), holds it, and heals it. It runs while
// StartCluster waits for the servers, so the cluster forms around it.
func youngFault(c *Cluster, kind FaultKind, i int, after, hold time.Duration) (FaultEvent, error) {
	nd := c.Nodes[i]
	ev := FaultEvent{Kind: kind, Target: fmt.Sprintf("%s %v after its start, for %v", nd.ID, after.Round(time.Millisecond), hold.Round(time.Millisecond))}
	time.Sleep(after) // the moment in the cluster's first second, drawn from the seed
	var err error
	switch kind {
	case YoungStall:
		err = nd.Pause()
	case YoungKill:
		err = nd.Kill()
	default:
		return ev, fmt.Errorf("%s is not a fault of a cluster's start", kind)
	}
	time.Sleep(hold) // the fault's hold, drawn from the seed
	switch kind {
	case YoungStall:
		err = errors.Join(err, nd.Resume())
	case YoungKill:
		err = errors.Join(err, nd.Start())
	}
	if err != nil {
		ev.Err = err.Error()
	}
	return ev, err
}

// startYoung starts the cluster and, within its first second, applies each
// of kinds to a different server drawn from rng.
func startYoung(ctx context.Context, bin, dir string, nodes int, kinds []FaultKind, hold time.Duration, rng *rand.Rand) (*Cluster, []FaultEvent, error) {
	var events []FaultEvent
	var ferr error
	c, err := startCluster(ctx, bin, dir, nodes, func(c *Cluster) {
		perm := rng.Perm(nodes)
		done := make(chan struct{}, len(kinds))
		evs := make([]FaultEvent, len(kinds))
		errs := make([]error, len(kinds))
		for k, kind := range kinds {
			after := time.Duration(rng.Int64N(int64(time.Second)))
			h := hold/2 + time.Duration(rng.Int64N(int64(hold)))
			go func() {
				evs[k], errs[k] = youngFault(c, kind, perm[k%nodes], after, h)
				done <- struct{}{}
			}()
		}
		for range kinds {
			<-done
		}
		events, ferr = evs, errors.Join(errs...)
	})
	_ = ferr // each event carries its own error; the run reports it as an anomaly
	return c, events, err
}
