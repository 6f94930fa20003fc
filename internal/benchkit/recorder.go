package benchkit

import (
	"sort"
	"time"
)

// Window is the measured interval [Start, End).
type Window struct{ Start, End time.Time }

// In reports whether t falls in the window.
func (w Window) In(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// Recorder collects one worker's measurements. Only its worker writes it.
type Recorder struct {
	Ops        int64
	Errs       int64
	Violations int64
	Pair       []time.Duration // acquire call -> release returned
	Acquire    []time.Duration // acquire call -> return
	ErrSamples []string        // the first 3 errors
}

// Fail counts an error and keeps the first few as samples.
func (r *Recorder) Fail(what string, err error) {
	r.Errs++
	if len(r.ErrSamples) < 3 {
		r.ErrSamples = append(r.ErrSamples, what+": "+err.Error())
	}
}

// AddRecorders sums recs into res: Ops, Errors (errors and safety
// violations), DurationS and OpsPerSec over win, and the latency
// percentiles; with acquiresOnly (contended: ops are handoffs) LatencyMs is
// the acquire latency. It returns the violations and up to 3 error samples,
// sorted.
func (res *Result) AddRecorders(recs []*Recorder, win Window, acquiresOnly bool) (violations int64, samples []string) {
	var pair, acq []time.Duration
	for _, rec := range recs {
		res.Ops += rec.Ops
		res.Errors += rec.Errs + rec.Violations
		violations += rec.Violations
		pair = append(pair, rec.Pair...)
		acq = append(acq, rec.Acquire...)
		for _, s := range rec.ErrSamples {
			if len(samples) < 3 {
				samples = append(samples, s)
			}
		}
	}
	dur := win.End.Sub(win.Start).Seconds()
	res.DurationS = Round(dur, 3)
	res.OpsPerSec = Round(float64(res.Ops)/dur, 1)
	res.AcquireLatencyMs = Summarize(acq)
	if acquiresOnly {
		res.LatencyMs = res.AcquireLatencyMs
	} else {
		res.LatencyMs = Summarize(pair)
	}
	sort.Strings(samples)
	return violations, samples
}
