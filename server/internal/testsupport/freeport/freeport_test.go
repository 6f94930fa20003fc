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
	addrs, err := Take(2) // two free ports: one made busy, one left free
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := func(a string) int { _, ps, _ := net.SplitHostPort(a); p, _ := strconv.Atoi(ps); return p }
	busy, free := port(addrs[0]), port(addrs[1])
	handedOut.Lock()
	delete(handedOut.ports, busy) // as if never handed out
	delete(handedOut.ports, free)
	handedOut.Unlock()
	draws := []int{busy - lowest, busy - lowest, free - lowest} // the busy port twice, then the free one
	defer func(p func(int) int) { pick = p }(pick)
	pick = func(int) int { d := draws[0]; draws = draws[1:]; return d }
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if a != addrs[1] {
		t.Fatalf("got %s, want %s (the busy %s skipped)", a, addrs[1], addrs[0])
	}
}
