package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Every address is free, distinct from every other this process got, and
// below the ephemeral range, where no outgoing connection is given it.
func TestTakeIsFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	top := ephemeralStart()
	seen := map[string]bool{}
	for range 50 {
		addrs, err := Take(4)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%s handed out twice", a)
			}
			seen[a] = true
			_, ps, _ := net.SplitHostPort(a)
			p, _ := strconv.Atoi(ps)
			if p < lowest || p >= top {
				t.Fatalf("%s is outside [%d, %d)", a, lowest, top)
			}
			ln, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("%s is not free: %v", a, err)
			}
			ln.Close()
		}
	}
}

// A port someone listens on is never handed out.
func TestTakeSkipsABusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lowest+7))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	draws := []int{7, 7, 8} // the busy port twice, then its neighbour
	defer func(p func(int) int) { pick = p }(pick)
	pick = func(int) int { d := draws[0]; draws = draws[1:]; return d }
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if want := "127.0.0.1:" + strconv.Itoa(lowest+8); a != want {
		t.Fatalf("got %s, want %s (the busy port skipped)", a, want)
	}
}
