package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Result is the one JSON object printed with -json. It has exactly the
// schema of bench/etcd's etcdbench (same keys, same meaning) so that a
// script can join the two; System is "ticketing". Figures that etcdbench
// has no key for (restart_s, ...) go into Notes as key=value.
type Result struct {
	System           string      `json:"system"`   // always "ticketing"
	Workload         string      `json:"workload"` // uncontended|contended|hold|connections
	Nodes            int         `json:"nodes"`
	Clients          int         `json:"clients"`    // active workers
	DurationS        float64     `json:"duration_s"` // measured window (after warmup)
	Ops              int64       `json:"ops"`        // acquire+release pairs; contended: handoffs
	OpsPerSec        float64     `json:"ops_per_sec"`
	Errors           int64       `json:"errors"`
	LatencyMs        Percentiles `json:"latency_ms"`         // pair latency; contended: = acquire
	AcquireLatencyMs Percentiles `json:"acquire_latency_ms"` // Acquire call -> return
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
	return fmt.Sprintf("ticketing %s nodes=%d clients=%d dur=%.1fs ops=%d (%.1f/s) errors=%d "+
		"lat_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f | acq_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f | "+
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

// Percentiles is the latency summary used in the JSON output, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Summarize sorts d in place and returns nearest-rank percentiles in ms, as
// etcdbench does (every sample kept, no histogram). Empty gives zeros.
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

func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// ms converts to milliseconds rounded to microsecond precision.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat.
const clockTicks = 100

// readRSS returns VmRSS of pid in bytes, from /proc/<pid>/status.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// readCPU returns utime+stime of pid from /proc/<pid>/stat.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad cpu fields in /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func sumRSS(pids []int) int64 {
	var total int64
	for _, p := range pids {
		if r, err := readRSS(p); err == nil {
			total += r
		}
	}
	return total
}

func sumCPU(pids []int) time.Duration {
	var total time.Duration
	for _, p := range pids {
		if c, err := readCPU(p); err == nil {
			total += c
		}
	}
	return total
}

// machineCPU is the busy CPU time of the whole machine so far (all cores),
// from /proc/stat: the noise indicator of a shared machine.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, s := range f[1:] {
		if i >= 8 {
			break
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// meter samples server, own and machine CPU over the window and the
// servers' RSS at its end.
type meter struct {
	pids                     func() []int
	httpAddrs                []string
	c0, cs0, o0, c1, cs1, o1 float64 // commits, commit seconds, grants+releases
	okC                      bool
	wall0, wall1             time.Time
	srv0, srv1, self0, self1 time.Duration
	mach0, mach1             time.Duration
	rssEnd                   int64
	done                     chan struct{}
}

func startMeter(pids func() []int, httpAddrs []string, win window, stop <-chan struct{}) *meter {
	m := &meter{pids: pids, httpAddrs: httpAddrs, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if !sleepTo(stop, win.start) {
			return
		}
		m.wall0, m.srv0, m.self0, m.mach0 = time.Now(), sumCPU(pids()), selfCPU(), machineCPU()
		var ok0, ok1 bool
		m.c0, m.cs0, m.o0, ok0 = scrapeCommits(httpAddrs)
		if !sleepTo(stop, win.end) {
			return
		}
		m.wall1, m.srv1, m.self1, m.mach1 = time.Now(), sumCPU(pids()), selfCPU(), machineCPU()
		m.c1, m.cs1, m.o1, ok1 = scrapeCommits(httpAddrs)
		m.okC = ok0 && ok1
		m.rssEnd = sumRSS(pids())
	}()
	return m
}

func (m *meter) notes() string {
	<-m.done
	wall := m.wall1.Sub(m.wall0).Seconds()
	if wall <= 0 {
		return ""
	}
	var s []string
	srv := (m.srv1 - m.srv0).Seconds()
	havePids := len(m.pids()) > 0
	if havePids {
		s = append(s, fmt.Sprintf("server_cpu_s=%.2f server_cpu_cores=%.2f", srv, srv/wall))
	}
	self := (m.self1 - m.self0).Seconds()
	s = append(s, fmt.Sprintf("bench_cpu_s=%.2f bench_cpu_cores=%.2f", self, self/wall))
	if mach := (m.mach1 - m.mach0).Seconds(); mach > 0 {
		other := mach - self
		if havePids {
			other -= srv
		}
		s = append(s, fmt.Sprintf("machine_busy_cores=%.2f of %d other_cpu_cores=%.2f", mach/wall, runtime.NumCPU(), max(other, 0)/wall))
	}
	if n := m.c1 - m.c0; m.okC && n > 0 {
		// Group commit: batches committed, their mean propose->applied time,
		// and grants+releases per batch (server-side view of the window).
		s = append(s, fmt.Sprintf("commits_per_s=%.0f commit_ms_mean=%.3f ops_per_commit=%.1f",
			n/wall, (m.cs1-m.cs0)/n*1000, (m.o1-m.o0)/n))
	}
	return strings.Join(s, " ")
}

// sleepTo sleeps until t; false if stop closed first.
func sleepTo(stop <-chan struct{}, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-stop:
		return false
	case <-tm.C:
		return true
	}
}
