package etcdbench

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

// Summarize sorts d in place and returns nearest-rank percentiles in ms.
// An empty slice gives all zeros.
func Summarize(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return Percentiles{
		P50: ms(rank(d, 0.50)),
		P90: ms(rank(d, 0.90)),
		P99: ms(rank(d, 0.99)),
		Max: ms(d[len(d)-1]),
	}
}

// rank returns the nearest-rank percentile of a sorted slice.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// ms converts to milliseconds rounded to microsecond precision.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/1e3) / 1e3
}
