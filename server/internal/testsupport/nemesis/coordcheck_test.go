package nemesis

import (
	"strings"
	"testing"
	"time"
)

// The coordination checks find each planted violation and pass the clean
// histories next to them.
func TestCheckCoordFindsPlantedViolations(t *testing.T) {
	lim := CoordLimits{Limits: map[string]uint64{"one": 1, "three": 3, "recipe/election/e": 1}, ExpiryBound: 10 * time.Second, MaxLag: 100 * ms}
	hold := func(session uint64, sem string, count, token uint64, from, to time.Duration) CoordHold {
		return CoordHold{Session: session, Sem: sem, Count: count, Token: token, Call: from - ms, From: from, To: to, Election: strings.HasPrefix(sem, "recipe/"), Why: "released"}
	}
	cases := []struct {
		name     string
		holds    []CoordHold
		calls    []CoordCall
		expiries []CoordExpiry
		want     string // "" for a clean history
	}{
		{name: "limit-1 holds touching", holds: []CoordHold{hold(1, "one", 1, 5, 10*ms, 20*ms), hold(2, "one", 1, 6, 20*ms, 30*ms)}},
		{name: "limit-1 overlap", holds: []CoordHold{hold(1, "one", 1, 5, 10*ms, 25*ms), hold(2, "one", 1, 6, 20*ms, 30*ms)}, want: "2 units held at once"},
		{name: "limit-3 at the limit", holds: []CoordHold{hold(1, "three", 2, 5, 10*ms, 40*ms), hold(2, "three", 1, 6, 20*ms, 30*ms)}},
		{name: "limit-3 over", holds: []CoordHold{hold(1, "three", 2, 5, 10*ms, 40*ms), hold(2, "three", 1, 6, 20*ms, 30*ms), hold(3, "three", 1, 7, 25*ms, 50*ms)}, want: "4 units held at once"},
		{name: "two leaders", holds: []CoordHold{hold(1, "recipe/election/e", 1, 5, 10*ms, 40*ms), hold(2, "recipe/election/e", 1, 6, 39*ms, 50*ms)}, want: "two leaders"},
		{name: "order id backwards", holds: []CoordHold{hold(1, "one", 1, 9, 10*ms, 20*ms), hold(2, "three", 1, 8, 30*ms, 40*ms)}, want: "[order]"},
		{name: "a hold returned again keeps its order id", holds: []CoordHold{hold(1, "three", 1, 5, 10*ms, 20*ms), hold(2, "one", 1, 6, 25*ms, 28*ms), hold(1, "three", 1, 5, 30*ms, 40*ms)}},
		{name: "late return", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Return: time.Second + 101*ms}}, want: "[lag]"},
		{name: "late after the context's end", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Ended: 1010 * ms, Return: 1200 * ms}}, want: "[lag]"},
		{name: "prompt after a late timer", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Ended: 1200 * ms, Return: 1250 * ms}}},
		{name: "late only by the process's stall", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Return: 1150 * ms, Stalled: 100 * ms}}},
		{name: "late beyond the process's stall", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Return: 1150 * ms, Stalled: 40 * ms}}, want: "[lag]"},
		{name: "prompt return", calls: []CoordCall{{Op: "acquire one", Deadline: time.Second, Return: time.Second + 99*ms}, {Op: "acquire one", Deadline: time.Second, Return: time.Second / 2}}},
		{name: "expiry late", expiries: []CoordExpiry{{Session: 3, Detached: time.Second, LastSeen: 12 * time.Second, Gone: 12200 * ms}}, want: "[expiry]"},
		{name: "never gone", expiries: []CoordExpiry{{Session: 3, Detached: time.Second, LastSeen: 2 * time.Second, Gone: -1}}, want: "never seen gone"},
		{name: "expiry in time", expiries: []CoordExpiry{{Session: 3, Detached: time.Second, LastSeen: 10 * time.Second, Gone: 10200 * ms}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := CheckCoord(c.holds, c.calls, c.expiries, lim)
			got := strings.Join(r.Violations, "\n")
			if c.want == "" && got != "" {
				t.Fatalf("a clean history was reported: %s", got)
			}
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("want a violation containing %q, got %q", c.want, got)
			}
		})
	}
}
