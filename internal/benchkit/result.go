// Package benchkit holds what the Ticketing load generator (server/cmd/ticketbench)
// and the comparison benchmarks (bench/etcd, bench/redis) share: the lock
// workload's worker loop (LockLoop) and its token checks, the JSON result
// schema and its printing, nearest-rank latency percentiles, /proc readers
// for server RSS and CPU, and a bounded parallel loop.
//
// bench/etcd and bench/redis are separate modules; they may still import
// this package because the internal rule is by import path
// (github.com/ticketing-io/ticketing/...).
package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Result is the one JSON object the benchmarks print with -json. Both emit
// exactly this schema (same keys, same order, same meaning) so that a script
// (bench/compare) can join them. Figures without a key go into Notes as
// key=value.
type Result struct {
	System           string      `json:"system"`   // "ticketing", "etcd", "redis" (or "disk" for the fsync floor)
	Workload         string      `json:"workload"` // uncontended|contended|hold|connections
	Nodes            int         `json:"nodes"`
	Clients          int         `json:"clients"`    // active workers
	DurationS        float64     `json:"duration_s"` // measured window (after warmup)
	Ops              int64       `json:"ops"`        // acquire+release pairs; contended: handoffs
	OpsPerSec        float64     `json:"ops_per_sec"`
	Errors           int64       `json:"errors"`
	LatencyMs        Percentiles `json:"latency_ms"`         // pair latency; contended: = acquire
	AcquireLatencyMs Percentiles `json:"acquire_latency_ms"` // acquire call -> return
	ServerRSSBytes   int64       `json:"server_rss_bytes"`   // summed VmRSS of server processes
	Notes            string      `json:"notes"`
}

// WriteJSON writes r as a single line of JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Human returns a one-line human-readable summary, latencies with 3 decimals.
func (r *Result) Human() string { return r.HumanDigits(3) }

// HumanDigits is Human with latencies printed with the given decimals.
func (r *Result) HumanDigits(digits int) string {
	l := fmt.Sprintf("%%.%df", digits)
	return fmt.Sprintf("%s %s nodes=%d clients=%d dur=%.1fs ops=%d (%.1f/s) errors=%d "+
		"lat_ms p50="+l+" p90="+l+" p99="+l+" max="+l+" | acq_ms p50="+l+" p90="+l+" p99="+l+" max="+l+" | "+
		"server_rss=%.1fMiB | %s",
		r.System, r.Workload, r.Nodes, r.Clients, r.DurationS, r.Ops, r.OpsPerSec, r.Errors,
		r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.Max,
		r.AcquireLatencyMs.P50, r.AcquireLatencyMs.P90, r.AcquireLatencyMs.P99, r.AcquireLatencyMs.Max,
		float64(r.ServerRSSBytes)/(1<<20), r.Notes)
}

// Round rounds x to the given number of decimal digits.
func Round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
