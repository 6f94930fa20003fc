package nemesis

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A recorded history reads back as it was written, so that ticketjepsen
// -check can check it again.
func TestHistoryRoundTrip(t *testing.T) {
	us := time.Microsecond
	ops := []Op{
		{Worker: 0, Kind: Acquire, Key: "k0", Call: 443 * us, Return: 27819 * us, Outcome: OK, Token: 3, Deadline: 1907349 * us},
		{Worker: 1, Kind: Acquire, Key: "k1", Call: 612676 * us, Return: 2545718 * us, Outcome: Refused, Err: `ticketing: acquire "k1": not acquired (one immediate attempt, wait 0)`},
		{Worker: 2, Kind: Acquire, Key: "k2", Call: 61*time.Second + 5*us, Return: 62 * time.Second, Outcome: Unknown, Err: "outcome unknown"},
		{Worker: 3, Kind: Acquire, Key: "k3", Call: 1 * us, Return: 2 * us, Outcome: NotSent, Err: "not sent"},
		{Worker: 0, Kind: Release, Key: "k0", Call: 204763 * us, Return: 2751311 * us, Outcome: OK, Token: 3},
		{Worker: 4, Kind: Release, Key: "k0", Call: 3 * time.Second, Return: 4 * time.Second, Outcome: Refused, Token: 9, Err: "does not hold the key (it expired or was released before)"},
		{Worker: 5, Kind: Describe, Key: "k0", Call: 5 * time.Second, Return: 6 * time.Second, Outcome: OK, Held: true, Token: 9},
		{Worker: 5, Kind: Describe, Key: "k1", Call: 7 * time.Second, Return: 8 * time.Second, Outcome: OK},
	}
	for i := range ops {
		ops[i].Index = i
	}
	text := formatHistory(ops, []FaultEvent{{Kind: KillLeader, Target: "leader n1", Start: time.Second, Healed: 2 * time.Second}})
	got, err := ParseHistory(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[int]Op{}
	for _, op := range got {
		byIndex[op.Index] = op
	}
	if len(got) != len(ops) {
		t.Fatalf("read %d operations back, wrote %d:\n%s", len(got), len(ops), text)
	}
	for _, want := range ops {
		if g := byIndex[want.Index]; !reflect.DeepEqual(g, want) {
			t.Errorf("read back\n  %+v\nwrote\n  %+v", g, want)
		}
	}

	// N to a retried release is read as unknown, as the workload records it.
	line := "  1s #0 w0 release(k0, 5) [1s, 2s] -> refused (the server answered that this token does not hold the key (it expired or was released before); an earlier attempt whose answer was lost may have released it)\n"
	got, err = ParseHistory(strings.NewReader(line))
	if err != nil || len(got) != 1 || got[0].Outcome != Unknown {
		t.Fatalf("retried release read as %+v, %v; want unknown", got, err)
	}
	if _, err := ParseHistory(strings.NewReader("  1s #x w0 nonsense -> ok\n")); err == nil {
		t.Fatal("a malformed line was accepted")
	}
}
