package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config is one harness run.
type Config struct {
	Nodes    int           // servers (3 or 5; default 3)
	Duration time.Duration // how long faults are injected (at least one of each kind in Kinds)
	Seed     uint64        // the schedule's seed (0: from the clock; the report prints it)
	Workers  int           // client workers (default 6)
	Keys     int           // contended keys (default 4)
	Kinds    []FaultKind   // the kinds to inject (default AllFaults)
	Hold     time.Duration // how long a fault lasts, drawn in [Hold/2, Hold*3/2) (default 3 s)
	Dir      string        // data directories, logs and the visualization (default: a new temporary directory)
	Ticketd  string        // the ticketd binary (default: built from this module into Dir)
	Log      io.Writer     // progress lines (default: none)
	// Young are faults of the cluster's first second (YoungFaults), each
	// applied to a different server while the cluster forms.
	Young []FaultKind
	// Coord, if not nil, runs the coordination workload beside the
	// tickets one (its zero fields take CoordConfig's defaults; sessions
	// dial from the client groups' namespaces and the root namespace in
	// turn) and checks it (Report.Coord).
	Coord *CoordConfig
}

// Liveness is what one fault did to availability.
type Liveness struct {
	Event FaultEvent
	// LongestGap is the longest time without any acknowledged grant from
	// the fault's start to the next fault's start (or the end of the run).
	LongestGap time.Duration
	// HealToGrant is the time from the heal to the next acknowledged
	// grant; -1 if none came.
	HealToGrant time.Duration
	// FaultToGrant is the time from the fault's start to the first
	// acknowledged grant whose acquire was invoked after it; -1 if none.
	FaultToGrant time.Duration
	// FaultToAnswer is the time from the fault's start to the first final
	// answer (a grant, W, R, N or a describe's answer) to a request invoked
	// after it: how long the clients had no working session with a
	// leader. A grant can take longer: a new leader keeps the old leader's
	// holds until they expire. -1 if none.
	FaultToAnswer time.Duration
}

// Report is a run's result.
type Report struct {
	Seed       uint64
	Nodes      int
	Schedule   []FaultEvent
	Liveness   []Liveness
	Check      CheckResult
	ClientErrs map[string]int
	Anomalies  []string // a server that exited on its own, a fault that could not be applied
	Dir        string
	Elapsed    time.Duration
	ByOutcome  map[string]int
	// Elections is how many times a server started serving as leader
	// during the run ("leading: serving clients" in the server logs), the
	// first included; LeaseStepDowns how many times a leader stepped down
	// because it had not heard from a majority within its leader lease.
	Elections, LeaseStepDowns int
	// Unsettled counts the heals after which not every server had caught
	// up with the leader within 30 s (the next fault started anyway).
	Unsettled int
	// Coord is the coordination workload's check (Config.Coord), with the
	// sessions it started and the errors its sessions saw.
	Coord         *CoordCheck
	CoordSessions int
	CoordErrs     map[string]int
}

// Failed reports whether the run found a violation or an anomaly.
func (r *Report) Failed() bool {
	return len(r.Check.Violations) > 0 || len(r.Anomalies) > 0 || r.Check.Linearizable == porcupine.Illegal ||
		(r.Coord != nil && len(r.Coord.Violations) > 0)
}

// Run builds (or takes) ticketd, starts the cluster in namespaces, runs the
// workload while injecting faults from the seeded schedule, heals, and checks
// the history. The error is for a run that could not be carried out (no
// root, no cluster); violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = AllFaults
	}
	if cfg.Hold == 0 {
		cfg.Hold = 3 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "ticketjepsen-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("the run's directory: %w", err)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
	}
	rep := &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Dir: cfg.Dir}
	logf("seed %d (-seed %d repeats this schedule), %d nodes, data and logs in %s", cfg.Seed, cfg.Seed, cfg.Nodes, cfg.Dir)
	if cfg.Ticketd == "" {
		bin, err := BuildTicketd(cfg.Dir, false)
		if err != nil {
			return nil, err
		}
		cfg.Ticketd = bin
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7e55))
	var c *Cluster
	var err error
	if len(cfg.Young) > 0 {
		var young []FaultEvent
		c, young, err = startYoung(sctx, cfg.Ticketd, cfg.Dir, cfg.Nodes, cfg.Young, cfg.Hold, rand.New(rand.NewPCG(cfg.Seed, 0x9e4)))
		for _, ev := range young {
			logf("fault %-22s %-40s (while the cluster formed) %s", ev.Kind, ev.Target, ev.Err)
			if ev.Err != "" {
				rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("fault %s (%s): %s", ev.Kind, ev.Target, ev.Err))
			}
		}
		rep.Schedule = append(rep.Schedule, young...)
	} else {
		c, err = StartCluster(sctx, cfg.Ticketd, cfg.Dir, cfg.Nodes)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := c.Close(); err != nil {
			logf("cluster teardown: %v", err)
		}
	}()
	logf("cluster up: clients reach %s", c.ClientAddrs())
	h := NewHistory()
	// Workers take turns between the client groups' namespaces.
	var dialers []func(ctx context.Context, network, addr string) (net.Conn, error)
	for g := range ClientGroups {
		dialers = append(dialers, DialerIn(c.Net.NS(c.Net.ClientNode(g))))
	}
	w := NewWorkload(WorkloadConfig{Workers: cfg.Workers, Keys: cfg.Keys, Seed: cfg.Seed, Dialers: dialers}, c.ClientAddrs(), h)
	if err := w.Start(); err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	var cw *CoordWorkload
	if cfg.Coord != nil {
		cc := *cfg.Coord
		cc.Seed = cfg.Seed
		if cc.Dialers == nil {
			cc.Dialers = append(append([]DialFunc(nil), dialers...), nil) // the client groups, then the root namespace
		}
		if cc.Observer == nil {
			cc.Observer = c.ControlDialer()
		}
		cw = NewCoordWorkload(cc, c.ClientAddrs(), h)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := cw.Start(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the coordination workload could not start: %w\n%s", err, tails(c))
		}
		logf("coordination workload: %d sessions on node %s, session timeout %v, grace %v", cw.cfg.Sessions, CoordNode, cw.cfg.Timeout, cw.cfg.Grace)
		defer func() {
			if !stopped {
				cw.Stop()
			}
		}()
	}
	// Warm up: the first grant shows the cluster serves.
	if _, err := waitGrant(ctx, h, 0, 30*time.Second); err != nil {
		return nil, fmt.Errorf("no grant within 30 s of the start: %w\n%s", err, tails(c))
	}
	n := &nemesis{c: c, h: h, rng: rng}
	// The schedule: every kind once in a seeded order, then seeded draws
	// until the duration has passed.
	order := append([]FaultKind(nil), cfg.Kinds...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	start := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		var kind FaultKind
		if i < len(order) {
			kind = order[i]
		} else if time.Since(start) < cfg.Duration {
			kind = cfg.Kinds[rng.IntN(len(cfg.Kinds))]
		} else {
			break
		}
		hold := cfg.Hold/2 + time.Duration(rng.Int64N(int64(cfg.Hold)))
		var ev FaultEvent
		ierr := n.inject(ctx, kind, hold, &ev)
		if ev.Start == 0 && ierr != nil {
			// Not applied at all (no leader to aim at): heal, note, go on.
			ev.Kind, ev.Start, ev.Healed, ev.Err = kind, h.Now(), h.Now(), ierr.Error()
			if herr := errors.Join(n.healAll(), n.waitReady(ctx)); herr != nil {
				ev.Err += "; healing after it: " + herr.Error()
			}
		}
		rep.Schedule = append(rep.Schedule, ev)
		logf("fault %-22s %-40s [%v, %v] %s", ev.Kind, ev.Target, ev.Start.Round(time.Millisecond), ev.Healed.Round(time.Millisecond), ev.Err)
		if ev.Err != "" {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("fault %s (%s): %s", ev.Kind, ev.Target, ev.Err))
		}
		// Recovery: the next fault starts once a grant was acknowledged
		// after the heal (or 30 s passed, which the liveness table shows),
		// and every server has caught up with the leader, so that each
		// fault's failover figures are those of a fault on a healthy
		// cluster (a leader killed right after a follower restarted waits
		// for an election the lagging follower cannot win).
		if _, err := waitGrant(ctx, h, ev.Healed, 30*time.Second); err != nil {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("no grant within 30 s after healing %s (%s)", ev.Kind, ev.Target))
			logf("no grant within 30 s after healing %s\n%s", ev.Kind, tails(c))
		} else if err := caughtUp(ctx, c, 30*time.Second); err != nil && ctx.Err() == nil {
			rep.Unsettled++
			logf("after healing %s: %v", ev.Kind, err)
		}
	}
	end := h.Now()
	w.Stop()
	if cw != nil {
		logf("stopping the coordination workload (waiting for the server to let go of the sessions it gave up)")
		cw.Stop()
		chk := cw.Check()
		rep.Coord, rep.CoordSessions, rep.CoordErrs = &chk, cw.Opened(), cw.Errors()
		if err := writeCoordHistory(filepath.Join(cfg.Dir, "coordination.txt"), cw, rep.Schedule); err != nil {
			logf("writing the coordination history: %v", err)
		}
	}
	stopped = true
	if err := FinalReads(c.ClientAddrs(), w.cfg.Keys, h, w.cfg.Workers, 30*time.Second); err != nil {
		rep.Anomalies = append(rep.Anomalies, "final reads: "+err.Error())
	}
	for _, nd := range c.Nodes {
		if !nd.Running() {
			rep.Anomalies = append(rep.Anomalies, fmt.Sprintf("%s is not running at the end\n%s", nd.ID, nd.LogTail(20)))
		}
	}
	for _, nd := range c.Nodes {
		if u := unexpectedExits(nd); u != "" {
			rep.Anomalies = append(rep.Anomalies, u)
		}
	}
	for _, nd := range c.Nodes {
		rep.Elections += countInLogs(nd, "leading: serving clients")
		rep.LeaseStepDowns += countInLogs(nd, "failed to contact quorum of nodes, stepping down")
	}
	ops := h.Ops()
	rep.ByOutcome = map[string]int{}
	for _, op := range ops {
		rep.ByOutcome[op.Kind.String()+" "+op.Outcome.String()]++
	}
	rep.ClientErrs = w.Errors()
	if err := writeHistory(filepath.Join(cfg.Dir, "history.txt"), ops, rep.Schedule); err != nil {
		logf("writing the history: %v", err)
	}
	logf("checking %d operations", len(ops))
	rep.Check = Check(ops, CheckOptions{VisualizationFile: filepath.Join(cfg.Dir, "linearizability.html")})
	rep.Liveness = liveness(ops, rep.Schedule, end)
	rep.Elapsed = time.Since(h.Start())
	return rep, nil
}

// writeHistory writes every operation and fault, by time, one a line
// (ParseHistory reads the operations back).
func writeHistory(file string, ops []Op, sched []FaultEvent) error {
	return os.WriteFile(file, []byte(formatHistory(ops, sched)), 0o644)
}

func formatHistory(ops []Op, sched []FaultEvent) string {
	type line struct {
		t time.Duration
		s string
	}
	var lines []line
	for _, op := range ops {
		lines = append(lines, line{op.Call, op.String()})
	}
	for _, ev := range sched {
		lines = append(lines, line{ev.Start, fmt.Sprintf("FAULT %s %s", ev.Kind, ev.Target)}, line{ev.Healed, fmt.Sprintf("HEALED %s", ev.Kind)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t < lines[j].t })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%12v %s\n", l.t.Round(time.Microsecond), l.s)
	}
	return b.String()
}

// waitGrant waits until the history holds a grant acknowledged after since.
func waitGrant(ctx context.Context, h *History, since time.Duration, d time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(d)
	for {
		for _, op := range h.Ops() {
			if op.Kind == Acquire && op.Outcome == OK && op.Return >= since {
				return op.Return, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, errors.New("no grant")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling the history, with a deadline
		}
	}
}

// unexpectedExits looks for a server that ended without being told to
// (panics and fatal errors in its logs).
func unexpectedExits(nd *Node) string {
	files, _ := filepath.Glob(filepath.Join(nd.dir, "ticketd.*.log"))
	var out []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		s := string(b)
		for _, marker := range []string{"panic:", "fatal error:", "DATA RACE"} {
			if i := strings.Index(s, marker); i >= 0 {
				j := min(len(s), i+2000)
				out = append(out, fmt.Sprintf("%s: %q in %s:\n%s", nd.ID, marker, f, s[i:j]))
			}
		}
	}
	return strings.Join(out, "\n")
}

// countInLogs counts the lines of a server's logs (every start) that
// contain s.
func countInLogs(nd *Node, s string) int {
	files, _ := filepath.Glob(filepath.Join(nd.dir, "ticketd.*.log"))
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		n += strings.Count(string(b), s)
	}
	return n
}

func tails(c *Cluster) string {
	var b strings.Builder
	for _, nd := range c.Nodes {
		b.WriteString(nd.LogTail(15))
		b.WriteString("\n")
	}
	return b.String()
}

// liveness computes, for every fault, the longest window without a grant
// and the times to the next grant.
func liveness(ops []Op, sched []FaultEvent, end time.Duration) []Liveness {
	var grants []Op
	for _, op := range ops {
		if op.Kind == Acquire && op.Outcome == OK {
			grants = append(grants, op)
		}
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Return < grants[j].Return })
	var out []Liveness
	for i, ev := range sched {
		to := end
		if i+1 < len(sched) {
			to = sched[i+1].Start
		}
		l := Liveness{Event: ev, HealToGrant: -1, FaultToGrant: -1, FaultToAnswer: -1}
		for _, op := range ops {
			if op.Call >= ev.Start && op.Return <= to && (op.Outcome == OK || op.Outcome == Refused) {
				if d := op.Return - ev.Start; l.FaultToAnswer < 0 || d < l.FaultToAnswer {
					l.FaultToAnswer = d
				}
			}
		}
		last := ev.Start
		for _, g := range grants {
			if g.Return < ev.Start || g.Return > to {
				continue
			}
			l.LongestGap = max(l.LongestGap, g.Return-last)
			last = g.Return
			if l.HealToGrant < 0 && g.Return >= ev.Healed {
				l.HealToGrant = g.Return - ev.Healed
			}
			if l.FaultToGrant < 0 && g.Call >= ev.Start {
				l.FaultToGrant = g.Return - ev.Start
			}
		}
		l.LongestGap = max(l.LongestGap, to-last)
		out = append(out, l)
	}
	return out
}

// String is the report as printed by ticketjepsen and the CI test.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ticketjepsen: seed %d, %d nodes, %v, data and logs in %s\n", r.Seed, r.Nodes, r.Elapsed.Round(time.Second), r.Dir)
	fmt.Fprintf(&b, "operations: %d checked, %d grants, %d indeterminate\n", r.Check.Ops, r.Check.Grants, r.Check.Unknown)
	fmt.Fprintf(&b, "leaderships (a server starting to serve as leader, the first included): %d; leader-lease step-downs: %d; heals not caught up within 30 s: %d\n", r.Elections, r.LeaseStepDowns, r.Unsettled)
	var oc []string
	for k, v := range r.ByOutcome {
		oc = append(oc, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(oc)
	fmt.Fprintf(&b, "  by outcome: %s\n", strings.Join(oc, ", "))
	fmt.Fprintf(&b, "faults (schedule; times from the start of the history):\n")
	fmt.Fprintf(&b, "  %-22s %-42s %9s %9s %12s %12s %12s %13s\n", "kind", "target", "start", "healed", "longest gap", "heal->grant", "fault->grant", "fault->answer")
	for _, l := range r.Liveness {
		d := func(x time.Duration) string {
			if x < 0 {
				return "none"
			}
			return x.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  %-22s %-42s %9s %9s %12s %12s %12s %13s\n", l.Event.Kind, l.Event.Target,
			l.Event.Start.Round(10*time.Millisecond), l.Event.Healed.Round(10*time.Millisecond), d(l.LongestGap), d(l.HealToGrant), d(l.FaultToGrant), d(l.FaultToAnswer))
	}
	b.WriteString(r.byKindTable())
	fmt.Fprintf(&b, "linearizability (porcupine, per key): %v in %v", linName(r.Check.Linearizable), r.Check.LinearizationTime.Round(time.Millisecond))
	if r.Check.Visualization != "" {
		fmt.Fprintf(&b, ", visualization %s", r.Check.Visualization)
	}
	b.WriteString("\n")
	if len(r.ClientErrs) > 0 {
		b.WriteString("client errors (expected under faults; numbers and keys shown as #):\n")
		for k, v := range r.ClientErrs {
			fmt.Fprintf(&b, "  %dx %s\n", v, k)
		}
	}
	if r.Coord != nil {
		b.WriteString(r.coordSection())
	}
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "ANOMALY: %s\n", a)
	}
	for _, v := range r.Check.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	if r.Failed() {
		n := len(r.Check.Violations)
		if r.Coord != nil {
			n += len(r.Coord.Violations)
		}
		fmt.Fprintf(&b, "RESULT: FAILED (%d violations, %d anomalies); replay with -seed %d\n", n, len(r.Anomalies), r.Seed)
	} else {
		b.WriteString("RESULT: ok, 0 violations\n")
	}
	return b.String()
}

// byKindTable summarizes the liveness figures per fault kind: how many
// times it was injected, and the median and largest longest-gap and
// fault-to-grant times.
func (r *Report) byKindTable() string {
	type agg struct{ gaps, f2g, f2a []time.Duration }
	m := map[FaultKind]*agg{}
	var kinds []string
	for _, l := range r.Liveness {
		a := m[l.Event.Kind]
		if a == nil {
			a = &agg{}
			m[l.Event.Kind] = a
			kinds = append(kinds, string(l.Event.Kind))
		}
		a.gaps = append(a.gaps, l.LongestGap)
		if l.FaultToGrant >= 0 {
			a.f2g = append(a.f2g, l.FaultToGrant)
		}
		if l.FaultToAnswer >= 0 {
			a.f2a = append(a.f2a, l.FaultToAnswer)
		}
	}
	sort.Strings(kinds)
	// The median, the 99th percentile (nearest rank: the maximum below
	// 100 injections) and the maximum.
	stat := func(d []time.Duration) string {
		if len(d) == 0 {
			return fmt.Sprintf("%9s %9s %9s", "-", "-", "-")
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		p99 := d[(len(d)*99+99)/100-1]
		r := func(x time.Duration) time.Duration { return x.Round(10 * time.Millisecond) }
		return fmt.Sprintf("%9v %9v %9v", r(d[len(d)/2]), r(p99), r(d[len(d)-1]))
	}
	var b strings.Builder
	b.WriteString("per fault kind (median, 99th percentile and max; gap: longest without a grant, f->g: fault to first grant, f->a: fault to first answer):\n")
	fmt.Fprintf(&b, "  %-22s %5s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "kind", "count", "gap p50", "gap p99", "gap max", "f->g p50", "f->g p99", "f->g max", "f->a p50", "f->a p99", "f->a max")
	for _, k := range kinds {
		a := m[FaultKind(k)]
		fmt.Fprintf(&b, "  %-22s %5d %s %s %s\n", k, len(a.gaps), stat(a.gaps), stat(a.f2g), stat(a.f2a))
	}
	return b.String()
}

func linName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "NOT LINEARIZABLE"
	}
	return "unknown (timed out; not counted as a violation)"
}

// caughtUp waits until every server has applied everything the leader had
// committed when it was asked.
func caughtUp(ctx context.Context, c *Cluster, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	st, err := c.Nodes[l].Status(ctx)
	if err != nil {
		return err
	}
	target := st.CommitIndex
	for {
		var behind []string
		for _, nd := range c.Nodes {
			s, err := nd.Status(ctx)
			if err != nil || s.AppliedIndex < target {
				behind = append(behind, fmt.Sprintf("%s (applied %d, err %v)", nd.ID, s.AppliedIndex, err))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not caught up with the leader's commit index %d within %v: %s", target, d, strings.Join(behind, ", "))
		case <-time.After(100 * time.Millisecond): // polling a condition, bounded by ctx
		}
	}
}
