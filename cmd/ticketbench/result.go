package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

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

func startMeter(pids func() []int, httpAddrs []string, win benchkit.Window, stop <-chan struct{}) *meter {
	m := &meter{pids: pids, httpAddrs: httpAddrs, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if !sleepTo(stop, win.Start) {
			return
		}
		m.wall0, m.srv0, m.self0, m.mach0 = time.Now(), benchkit.SumCPU(pids()), benchkit.SelfCPU(), benchkit.MachineCPU()
		var ok0, ok1 bool
		m.c0, m.cs0, m.o0, ok0 = scrapeCommits(httpAddrs)
		if !sleepTo(stop, win.End) {
			return
		}
		m.wall1, m.srv1, m.self1, m.mach1 = time.Now(), benchkit.SumCPU(pids()), benchkit.SelfCPU(), benchkit.MachineCPU()
		m.c1, m.cs1, m.o1, ok1 = scrapeCommits(httpAddrs)
		m.okC = ok0 && ok1
		m.rssEnd = benchkit.SumRSS(pids())
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
