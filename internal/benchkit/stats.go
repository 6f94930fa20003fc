package benchkit

import (
	"math"
	"sort"
	"time"
)

// Percentiles is the latency summary used in the JSON output, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summarize sorts d in place and returns nearest-rank percentiles in ms
// (every sample kept, no histogram). An empty slice gives all zeros.
func Summarize(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return Percentiles{
		P50: ms(Rank(d, 0.50)),
		P90: ms(Rank(d, 0.90)),
		P99: ms(Rank(d, 0.99)),
		Max: ms(d[len(d)-1]),
	}
}

// Rank returns the nearest-rank p-th percentile (0 < p <= 1) of a sorted,
// non-empty slice.
func Rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// ms converts to milliseconds rounded to microsecond precision.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
