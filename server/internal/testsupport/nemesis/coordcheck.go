package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The coordination workload's history and its checks, from the clients'
// view: a holder holds from the moment its acquire (or campaign) returned
// the grant until the moment it stopped relying on it — its lease's context
// ended, or it started to release or resign. The SDK promises that a
// holder learns it may have lost a hold before the server can give it to
// anyone else, so these intervals, counted on one clock (the harness's),
// must never put more units of a semaphore in use than its limit, nor two
// leaders in an election.

// CoordHold is one hold as its holder saw it.
type CoordHold struct {
	Session  uint64
	Sem      string // the semaphore; for the election, its recipe semaphore
	Election bool
	Count    uint64
	Token    uint64
	Call     time.Duration // the acquire or campaign was invoked
	From     time.Duration // it returned the grant
	To       time.Duration // the lease's context ended, or the release or resign began
	Why      string        // what ended it: released, resigned, or the context's cause
}

// CoordCall is one SDK call made with a context that has a deadline.
type CoordCall struct {
	Op       string
	Deadline time.Duration // the context's deadline
	// Ended is when the context was ended (by its timer, which notes the
	// moment before it closes Done), 0 if not before the call returned: on
	// a busy machine a timer may fire later than its deadline.
	Ended  time.Duration
	Return time.Duration
	// Stalled is how much of the time from the context's end to the
	// return the process did not run: a probe goroutine that sleeps 2 ms
	// at a time overslept (the machine gave the process no CPU).
	Stalled time.Duration
	Err     string
}

// Lag is how late the call returned after its context's deadline (0 if it
// returned before).
func (c CoordCall) Lag() time.Duration { return max(c.Return-c.Deadline, 0) }

// EndLag is how late the call returned after its context ended: after the
// deadline, or after the moment its timer ended it if that came later (a
// starved timer is not the SDK's doing).
func (c CoordCall) EndLag() time.Duration { return max(c.Return-max(c.Deadline, c.Ended), 0) }

// SDKLag is EndLag less the time within it that the process did not run
// at all (Stalled): the part of the lag that is the SDK's. MaxLag bounds
// it.
func (c CoordCall) SDKLag() time.Duration { return max(c.EndLag()-c.Stalled, 0) }

// CoordExpiry is a session its client gave up (abandoned by the workload,
// or ended on the client by an expiry) and what the server was seen doing
// with it.
type CoordExpiry struct {
	Session uint64
	// Detached: the client's last sign of the session: the moment the
	// workload froze its connection (abandoned), or its last change to
	// DETACHED before it ended.
	Detached  time.Duration
	Abandoned bool
	// LastSeen is the last listing of the node's sessions (through an
	// unfaulted path) that still showed it; Gone the first listing after
	// that which did not. Gone is -1 when no listing ever lacked it.
	LastSeen, Gone time.Duration
}

// CoordLimits is what the checks hold the history to.
type CoordLimits struct {
	Limits map[string]uint64 // semaphore -> limit (the election's is 1)
	// ExpiryBound: a session the client gave up is gone from the server
	// within this long of Detached.
	ExpiryBound time.Duration
	// MaxLag: no call returns later than this after its context ended.
	MaxLag time.Duration
}

// CoordCheck is the checks' result.
type CoordCheck struct {
	Holds      map[string]int // holds per semaphore
	MaxHeld    map[string]uint64
	Terms      int // leaderships in the election
	Grants     int // grants whose order ids were compared
	Violations []string
	// LagCalls is how many calls returned after their context's
	// deadline; the lag's median, 99th percentile and maximum over them,
	// counted from the deadline (Lag), from the context's end (EndLag) and
	// without the process's stalls (SDKLag, what MaxLag bounds); Slowest
	// are the three latest calls by SDKLag.
	Calls, LagCalls                 int
	LagP50, LagP99, LagMax          time.Duration
	EndLagP50, EndLagP99, EndLagMax time.Duration
	SDKLagP50, SDKLagP99, SDKLagMax time.Duration
	Slowest                         []CoordCall
	// TakenOver counts the holds of a limit-1 semaphore (or the election)
	// that ended without a release or resign (the session's deadline, its
	// expiry) and were followed by another session's grant; Margin is the
	// shortest time from such a hold's end to that grant (the old holder
	// let go first by at least this much), MarginP50 the median.
	TakenOver         int
	Margin, MarginP50 time.Duration
	// Expiries, with the longest time from the client's detach to the
	// last listing that showed the session, and to the first that did not.
	Expiries             int
	MaxLastSeen, MaxGone time.Duration
}

// CheckCoord runs every check over the workload's history.
func CheckCoord(holds []CoordHold, calls []CoordCall, expiries []CoordExpiry, lim CoordLimits) CoordCheck {
	r := CoordCheck{Holds: map[string]int{}, MaxHeld: map[string]uint64{}}
	bySem := map[string][]CoordHold{}
	for _, h := range holds {
		bySem[h.Sem] = append(bySem[h.Sem], h)
		r.Holds[h.Sem]++
		if h.Election {
			r.Terms++
		}
	}
	sems := make([]string, 0, len(bySem))
	for s := range bySem {
		sems = append(sems, s)
	}
	sort.Strings(sems)
	for _, s := range sems {
		limit, ok := lim.Limits[s]
		if !ok {
			r.Violations = append(r.Violations, fmt.Sprintf("[limit] %s: holds of a semaphore without a known limit", s))
			continue
		}
		maxHeld, v := checkLimit(s, limit, bySem[s])
		r.MaxHeld[s] = maxHeld
		r.Violations = append(r.Violations, v...)
	}
	r.Grants, r.Violations = len(holds), append(r.Violations, checkOrder(holds)...)
	var margins []time.Duration
	for _, sem := range sems {
		if lim.Limits[sem] != 1 {
			continue
		}
		hs := append([]CoordHold(nil), bySem[sem]...)
		sort.Slice(hs, func(i, j int) bool { return hs[i].From < hs[j].From })
		for i, h := range hs {
			if h.Why == "released" || h.To <= h.From {
				continue
			}
			for _, g := range hs[i+1:] {
				if g.Session != h.Session {
					margins = append(margins, g.From-h.To)
					break
				}
			}
		}
	}
	r.TakenOver = len(margins)
	if len(margins) > 0 {
		r.MarginP50, _, _ = percentiles(margins)
		r.Margin = margins[0]
	}

	var lags, ends, sdk []time.Duration
	var late []CoordCall
	r.Calls = len(calls)
	for _, c := range calls {
		if c.Return <= c.Deadline {
			continue
		}
		lags, ends, sdk, late = append(lags, c.Lag()), append(ends, c.EndLag()), append(sdk, c.SDKLag()), append(late, c)
		if lim.MaxLag > 0 && c.SDKLag() > lim.MaxLag {
			r.Violations = append(r.Violations, fmt.Sprintf("[lag] %s returned %v after its context ended, not counting %v in which the process did not run (bound %v; deadline at %v, ended at %v, returned at %v: %s)",
				c.Op, c.SDKLag().Round(time.Millisecond), c.Stalled.Round(time.Millisecond), lim.MaxLag, c.Deadline.Round(time.Millisecond), c.Ended.Round(time.Millisecond), c.Return.Round(time.Millisecond), c.Err))
		}
	}
	r.LagCalls = len(lags)
	r.LagP50, r.LagP99, r.LagMax = percentiles(lags)
	r.EndLagP50, r.EndLagP99, r.EndLagMax = percentiles(ends)
	r.SDKLagP50, r.SDKLagP99, r.SDKLagMax = percentiles(sdk)
	sort.Slice(late, func(i, j int) bool { return late[i].SDKLag() > late[j].SDKLag() })
	r.Slowest = late[:min(3, len(late))]

	r.Expiries = len(expiries)
	for _, e := range expiries {
		seen := max(e.LastSeen-e.Detached, 0)
		r.MaxLastSeen = max(r.MaxLastSeen, seen)
		what := "ended on its client"
		if e.Abandoned {
			what = "abandoned (its connection frozen)"
		}
		switch {
		case e.Gone < 0:
			r.Violations = append(r.Violations, fmt.Sprintf("[expiry] session %d, %s at %v, was still listed at %v (%v later) and never seen gone (bound %v)",
				e.Session, what, e.Detached.Round(time.Millisecond), e.LastSeen.Round(time.Millisecond), seen.Round(time.Millisecond), lim.ExpiryBound))
		case seen > lim.ExpiryBound:
			r.Violations = append(r.Violations, fmt.Sprintf("[expiry] session %d, %s at %v, was still listed %v later (bound %v)",
				e.Session, what, e.Detached.Round(time.Millisecond), seen.Round(time.Millisecond), lim.ExpiryBound))
		}
		if e.Gone >= 0 {
			r.MaxGone = max(r.MaxGone, e.Gone-e.Detached)
		}
	}
	return r
}

// percentiles returns the median, 99th percentile (nearest rank) and
// maximum of d (sorting it).
func percentiles(d []time.Duration) (p50, p99, most time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2], d[(len(d)*99+99)/100-1], d[len(d)-1]
}

// checkLimit sweeps a semaphore's holds in time order: at no moment may
// the counts of the holds in force exceed limit. It returns the most ever
// held and one violation per episode over the limit.
func checkLimit(sem string, limit uint64, holds []CoordHold) (uint64, []string) {
	type edge struct {
		t     time.Duration
		delta int64
		h     int
	}
	var edges []edge
	for i, h := range holds {
		if h.To <= h.From {
			continue // ended as it was returned: never relied on
		}
		edges = append(edges, edge{h.From, int64(h.Count), i}, edge{h.To, -int64(h.Count), i})
	}
	// An end at the same instant as a start comes first: touching
	// intervals do not overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta < edges[j].delta
	})
	var held, most uint64
	var out []string
	// Episodes past the first few are counted, not listed: one hold kept
	// too long overlaps every hold of the others.
	const maxEpisodes = 5
	episodes := 0
	active := map[int]bool{}
	var episode struct {
		on    bool
		start time.Duration
		peak  uint64
		who   map[int]bool
	}
	for _, e := range edges {
		if e.delta > 0 {
			held += uint64(e.delta)
			active[e.h] = true
		} else {
			held -= uint64(-e.delta)
			delete(active, e.h)
		}
		most = max(most, held)
		switch {
		case held > limit && !episode.on:
			episode.on, episode.start, episode.peak, episode.who = true, e.t, held, map[int]bool{}
			for i := range active {
				episode.who[i] = true
			}
		case held > limit:
			episode.peak = max(episode.peak, held)
			for i := range active {
				episode.who[i] = true
			}
		case episode.on:
			episode.on = false
			var ws []string
			idx := make([]int, 0, len(episode.who))
			for i := range episode.who {
				idx = append(idx, i)
			}
			sort.Ints(idx)
			for _, i := range idx {
				h := holds[i]
				ws = append(ws, fmt.Sprintf("session %d token %d count %d [%v, %v] ended by %s", h.Session, h.Token, h.Count,
					h.From.Round(time.Millisecond), h.To.Round(time.Millisecond), h.Why))
			}
			kind := "semaphore"
			if limit == 1 && len(idx) > 0 && holds[idx[0]].Election {
				kind = "election (two leaders)"
			}
			episodes++
			if episodes <= maxEpisodes {
				out = append(out, fmt.Sprintf("[limit] %s %s, limit %d: %d units held at once from the clients' view for %v from %v: %s",
					kind, sem, limit, episode.peak, (e.t-episode.start).Round(time.Millisecond), episode.start.Round(time.Millisecond), strings.Join(ws, "; ")))
			}
		}
	}
	if episodes > maxEpisodes {
		out = append(out, fmt.Sprintf("[limit] %s, limit %d: %d more episodes over the limit (%d in all)", sem, limit, episodes-maxEpisodes, episodes))
	}
	return most, out
}

// checkOrder checks that order ids never go backwards: a grant returned
// before another grant's call has the lower order id (all semaphores share
// one counter). A hold returned again to its session (an acquire after a
// release that failed, while the hold was still there) keeps its order id:
// it is not a new grant and is left out.
func checkOrder(holds []CoordHold) []string {
	byReturn := append([]CoordHold(nil), holds...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].From < byReturn[j].From })
	type holdKey struct {
		session uint64
		sem     string
		token   uint64
	}
	seen := map[holdKey]bool{}
	var byCall []CoordHold
	for _, h := range byReturn {
		k := holdKey{h.Session, h.Sem, h.Token}
		if !seen[k] {
			byCall = append(byCall, h)
		}
		seen[k] = true
	}
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	var out []string
	// best is the grant with the highest order id among those returned so far.
	var best *CoordHold
	j := 0
	for i := range byCall {
		b := byCall[i]
		for j < len(byReturn) && byReturn[j].From < b.Call {
			if best == nil || byReturn[j].Token > best.Token {
				best = &byReturn[j]
			}
			j++
		}
		if best == nil || best.Token < b.Token {
			continue
		}
		out = append(out, fmt.Sprintf("[order] %s: order id %d (session %d, called at %v) is not above order id %d of %s (session %d), granted before, at %v",
			b.Sem, b.Token, b.Session, b.Call.Round(time.Millisecond), best.Token, best.Sem, best.Session, best.From.Round(time.Millisecond)))
	}
	return out
}
