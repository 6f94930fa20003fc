package nemesis

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// coordSection is the coordination part of the report.
func (r *Report) coordSection() string {
	c := r.Coord
	var b strings.Builder
	fmt.Fprintf(&b, "coordination (from the clients' view): %d sessions started; holds: %s %d (most held at once %d of 1), %s %d (most %d of 3); election terms %d (most leaders at once %d); %d grants' order ids compared\n",
		r.CoordSessions, coordLimit1, c.Holds[coordLimit1], c.MaxHeld[coordLimit1], coordLimit3, c.Holds[coordLimit3], c.MaxHeld[coordLimit3], c.Terms, c.MaxHeld[coordElectionSem], c.Grants)
	r10 := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	fmt.Fprintf(&b, "  calls with a deadline: %d; returned after it: %d; lag p50 / p99 / max after the deadline %v / %v / %v; after the context was ended %v / %v / %v; less the process's stalls (bounded) %v / %v / %v\n",
		c.Calls, c.LagCalls, r10(c.LagP50), r10(c.LagP99), r10(c.LagMax), r10(c.EndLagP50), r10(c.EndLagP99), r10(c.EndLagMax), r10(c.SDKLagP50), r10(c.SDKLagP99), r10(c.SDKLagMax))
	for _, s := range c.Slowest {
		end := "not before the return"
		if s.Ended > 0 {
			end = r10(s.Ended-s.Deadline).String() + " after the deadline"
		}
		fmt.Fprintf(&b, "    slowest: %s at %v: %v after the deadline (context ended %s; process stalled %v meanwhile): %s\n", s.Op, s.Return.Round(time.Millisecond), r10(s.Lag()), end, r10(s.Stalled), s.Err)
	}
	fmt.Fprintf(&b, "  limit-1 and election holds given up without a release, then granted to another session: %d; the other's grant came at least %v (median %v) after the old holder's context ended\n",
		c.TakenOver, c.Margin.Round(time.Millisecond), c.MarginP50.Round(time.Millisecond))
	fmt.Fprintf(&b, "  sessions given up: %d; from the client's detach, listed on the server for at most %v, gone (first listing without it) at most %v later\n",
		c.Expiries, c.MaxLastSeen.Round(time.Millisecond), c.MaxGone.Round(time.Millisecond))
	if len(r.CoordErrs) > 0 {
		b.WriteString("  coordination errors (expected under faults; numbers shown as #):\n")
		var ks []string
		for k := range r.CoordErrs {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Fprintf(&b, "    %dx %s\n", r.CoordErrs[k], k)
		}
	}
	for _, v := range c.Violations {
		fmt.Fprintf(&b, "VIOLATION (coordination): %s\n", v)
	}
	return b.String()
}

// writeCoordHistory writes the coordination holds, the sessions given up
// and the faults, by time, one a line.
func writeCoordHistory(file string, w *CoordWorkload, sched []FaultEvent) error {
	holds, calls, exps := w.History()
	type line struct {
		t time.Duration
		s string
	}
	var lines []line
	for _, h := range holds {
		lines = append(lines, line{h.From, fmt.Sprintf("HOLD %s session %d token %d count %d [%v, %v] called %v, ended by %s",
			h.Sem, h.Session, h.Token, h.Count, h.From.Round(time.Microsecond), h.To.Round(time.Microsecond), h.Call.Round(time.Microsecond), h.Why)})
	}
	for _, c := range calls {
		if c.Lag() > 0 {
			lines = append(lines, line{c.Return, fmt.Sprintf("LATE %s by %v: %s", c.Op, c.Lag(), c.Err)})
		}
	}
	for _, e := range exps {
		lines = append(lines, line{e.Detached, fmt.Sprintf("GAVE UP session %d (abandoned %v): last listed %v, gone %v", e.Session, e.Abandoned, e.LastSeen.Round(time.Millisecond), e.Gone.Round(time.Millisecond))})
	}
	for _, ev := range sched {
		lines = append(lines, line{ev.Start, fmt.Sprintf("FAULT %s %s", ev.Kind, ev.Target)}, line{ev.Healed, fmt.Sprintf("HEALED %s", ev.Kind)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t < lines[j].t })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%12v %s\n", l.t.Round(time.Microsecond), l.s)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}
