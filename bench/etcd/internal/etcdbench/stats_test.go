package etcdbench

import (
	"os"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); got != (Percentiles{}) {
		t.Fatalf("empty: %+v", got)
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := Summarize(d)
	want := Percentiles{P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Fatalf("got %+v want %+v", got, want)
	}
	if got := Summarize([]time.Duration{1500 * time.Microsecond}); got.P50 != 1.5 || got.Max != 1.5 {
		t.Fatalf("single: %+v", got)
	}
}

func TestProcSelf(t *testing.T) {
	rss, err := ReadRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("ReadRSS(self) = %d, %v", rss, err)
	}
	if _, err := ReadCPU(os.Getpid()); err != nil {
		t.Fatalf("ReadCPU(self): %v", err)
	}
	if SumRSS([]int{os.Getpid(), -1}) <= 0 { // unreadable pids are skipped
		t.Fatal("SumRSS")
	}
}
