package main

import (
	"fmt"
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
	cpu0, cpu1               benchkit.CPUSample
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
		m.cpu0 = benchkit.SampleCPU(pids())
		var ok0, ok1 bool
		m.c0, m.cs0, m.o0, ok0 = scrapeCommits(httpAddrs)
		if !sleepTo(stop, win.End) {
			return
		}
		m.cpu1 = benchkit.SampleCPU(pids())
		m.c1, m.cs1, m.o1, ok1 = scrapeCommits(httpAddrs)
		m.okC = ok0 && ok1
		m.rssEnd = benchkit.SumRSS(pids())
	}()
	return m
}

func (m *meter) notes() string {
	<-m.done
	wall := m.cpu1.Wall.Sub(m.cpu0.Wall).Seconds()
	if wall <= 0 {
		return ""
	}
	s := benchkit.CPUNotes(m.cpu0, m.cpu1, len(m.pids()) > 0)
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
