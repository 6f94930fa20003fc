package benchkit

import (
	"fmt"
	"runtime"
	"time"
)

// CPUSample is the CPU time used so far by the servers, by this process and
// by the whole machine, at Wall.
type CPUSample struct {
	Wall                  time.Time
	Server, Self, Machine time.Duration
}

// SampleCPU takes a CPUSample now; server CPU is summed over pids.
func SampleCPU(pids []int) CPUSample {
	return CPUSample{Wall: time.Now(), Server: SumCPU(pids), Self: SelfCPU(), Machine: MachineCPU()}
}

// CPUNotes describes the CPU used between s0 and s1 as key=value notes:
// server CPU (when havePids), the benchmark's own, and the machine's busy
// cores with what other processes took (a noise indicator: the machine may
// be shared; /proc/stat counts in 10 ms ticks, so ~0.05 is noise). Nil when
// no time passed.
func CPUNotes(s0, s1 CPUSample, havePids bool) []string {
	wall := s1.Wall.Sub(s0.Wall).Seconds()
	if wall <= 0 {
		return nil
	}
	var s []string
	srv := (s1.Server - s0.Server).Seconds()
	if havePids {
		s = append(s, fmt.Sprintf("server_cpu_s=%.2f server_cpu_cores=%.2f", srv, srv/wall))
	}
	self := (s1.Self - s0.Self).Seconds()
	s = append(s, fmt.Sprintf("bench_cpu_s=%.2f bench_cpu_cores=%.2f", self, self/wall))
	if mach := (s1.Machine - s0.Machine).Seconds(); mach > 0 {
		other := mach - self
		if havePids {
			other -= srv
		}
		s = append(s, fmt.Sprintf("machine_busy_cores=%.2f of %d other_cpu_cores=%.2f", mach/wall, runtime.NumCPU(), max(other, 0)/wall))
	}
	return s
}
