package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"
)

// timingSink keeps every timing sample hashicorp/raft and raft-boltdb emit
// (go-metrics, in milliseconds) so that the serve mode can print where a
// commit spends its time: the leader's log write (dispatchLog, of which
// raft-boltdb's storeLogs is the disk part), replication round trips,
// dispatch-to-commit, and the state machine's apply. Counters and gauges are
// ignored. The core's stage trace (core.SetStageTrace) adds its stages.
type timingSink struct {
	mu      sync.Mutex
	samples map[string][]float32
}

func newTimingSink() *timingSink { return &timingSink{samples: map[string][]float32{}} }

// installTimings makes s the process's go-metrics sink.
func installTimings(s *timingSink) error {
	cfg := metrics.DefaultConfig("")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
	cfg.EnableTypePrefix = false
	cfg.TimerGranularity = time.Millisecond
	_, err := metrics.NewGlobal(cfg, s)
	return err
}

func (s *timingSink) SetGauge([]string, float32)                                   {}
func (s *timingSink) SetGaugeWithLabels([]string, float32, []metrics.Label)        {}
func (s *timingSink) EmitKey([]string, float32)                                    {}
func (s *timingSink) IncrCounter([]string, float32)                                {}
func (s *timingSink) IncrCounterWithLabels([]string, float32, []metrics.Label)     {}
func (s *timingSink) AddSampleWithLabels(k []string, v float32, _ []metrics.Label) { s.AddSample(k, v) }

func (s *timingSink) AddSample(key []string, v float32) {
	k := strings.Join(key, ".")
	s.mu.Lock()
	if len(s.samples[k]) < 5_000_000 { // bounded: a benchmark run is far below
		s.samples[k] = append(s.samples[k], v)
	}
	s.mu.Unlock()
}

// addDuration keeps one sample of the core's stage trace under key (ms,
// like Raft's).
func (s *timingSink) addDuration(key string, d time.Duration) {
	s.AddSample([]string{key}, float32(d.Seconds()*1000))
}

// write prints one line per timing key: count, p50, p90, p99, mean (ms).
func (s *timingSink) write(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.samples))
	for k := range s.samples {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := append([]float32(nil), s.samples[k]...)
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		var sum float64
		for _, x := range v {
			sum += float64(x)
		}
		fmt.Fprintf(w, "%-48s n=%-8d p50=%.3f p90=%.3f p99=%.3f mean=%.3f\n", k, len(v), v[(len(v)-1)/2], v[(len(v)-1)*9/10], v[(len(v)-1)*99/100], sum/float64(len(v)))
	}
}
