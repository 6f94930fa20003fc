package transport

import (
	"slices"
	"testing"
	"time"
)

// The order of one round of connection attempts: the leader named by the
// last M, the last server that accepted a session, then the configured
// addresses in order, each once.
func TestDialOrder(t *testing.T) {
	b := &Client{addrs: []string{"a:1", "b:1", "c:1"}}
	cases := []struct {
		hint, last, dead string
		want             []string
	}{
		{"", "", "", []string{"a:1", "b:1", "c:1"}},
		{"", "c:1", "", []string{"c:1", "a:1", "b:1"}},
		{"b:1", "c:1", "", []string{"b:1", "c:1", "a:1"}},
		{"x:1", "b:1", "", []string{"x:1", "b:1", "a:1", "c:1"}},
		{"a:1", "a:1", "", []string{"a:1", "b:1", "c:1"}},
		// The server that just went silent is tried last, unless named.
		{"", "a:1", "a:1", []string{"b:1", "c:1", "a:1"}},
		{"", "c:1", "a:1", []string{"c:1", "b:1", "a:1"}},
		{"a:1", "a:1", "a:1", []string{"a:1", "b:1", "c:1"}},
	}
	for _, c := range cases {
		b.lastGood, b.lastDead = c.last, c.dead
		if got := b.dialOrder(c.hint); !slices.Equal(got, c.want) {
			t.Errorf("hint %q, last %q, dead %q: order %v, want %v", c.hint, c.last, c.dead, got, c.want)
		}
	}
}

// The reconnect backoff protocol.md describes: the n-th delay is uniform in
// [d/2, d], d = 25 ms doubled n-1 times, at most DefaultBackoffMax (500 ms).
func TestBackoffIsJitteredExponential(t *testing.T) {
	cfg := DefaultConfig()
	b := &Client{cfg: &cfg}
	for n := 1; n <= 10; n++ {
		d := min(25*time.Millisecond<<(n-1), DefaultBackoffMax)
		lo, hi := d, time.Duration(0)
		for range 500 {
			got := b.backoff(n)
			lo, hi = min(lo, got), max(hi, got)
		}
		if lo < d/2 || hi > d {
			t.Errorf("backoff(%d) ranged over [%v, %v], want within [%v, %v]", n, lo, hi, d/2, d)
		}
		if hi-lo < d/4 { // 500 uniform draws cover most of the range
			t.Errorf("backoff(%d) ranged over [%v, %v] only: not jittered over [%v, %v]", n, lo, hi, d/2, d)
		}
	}
}
