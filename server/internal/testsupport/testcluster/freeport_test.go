package testcluster

import "testing"

// FreePort never hands one address out twice in a process, even when the
// kernel offers a port it gave out a moment ago.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr := FreePort(t)
		if seen[addr] {
			t.Fatalf("FreePort returned %s twice", addr)
		}
		seen[addr] = true
	}
}
