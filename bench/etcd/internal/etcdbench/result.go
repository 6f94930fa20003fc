package etcdbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Result is the one JSON object printed with -json. The Ticketing load
// generator emits the same schema so a comparison script can join them.
type Result struct {
	System           string      `json:"system"`   // always "etcd"
	Workload         string      `json:"workload"` // uncontended|contended|hold|connections
	Nodes            int         `json:"nodes"`
	Clients          int         `json:"clients"`    // active lock workers
	DurationS        float64     `json:"duration_s"` // measured window (after warmup)
	Ops              int64       `json:"ops"`        // lock+unlock pairs; contended: handoffs
	OpsPerSec        float64     `json:"ops_per_sec"`
	Errors           int64       `json:"errors"`
	LatencyMs        Percentiles `json:"latency_ms"`         // pair latency; contended: = acquire
	AcquireLatencyMs Percentiles `json:"acquire_latency_ms"` // Lock call -> return
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

// Human returns a one-line human-readable summary.
func (r *Result) Human() string {
	return fmt.Sprintf("etcd %s nodes=%d clients=%d dur=%.1fs ops=%d (%.1f/s) errors=%d "+
		"lat_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f | acq_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f | "+
		"server_rss=%.1fMiB | %s",
		r.Workload, r.Nodes, r.Clients, r.DurationS, r.Ops, r.OpsPerSec, r.Errors,
		r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.Max,
		r.AcquireLatencyMs.P50, r.AcquireLatencyMs.P90, r.AcquireLatencyMs.P99, r.AcquireLatencyMs.Max,
		float64(r.ServerRSSBytes)/(1<<20), r.Notes)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
