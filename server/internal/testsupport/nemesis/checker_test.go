package nemesis

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker must catch what it is there to catch: these feed it histories
// of broken servers (planted bugs), without any process, and a correct one.

const ms = time.Millisecond

type hb struct{ ops []Op }

func (b *hb) add(op Op) *hb {
	op.Index = len(b.ops)
	if op.Key == "" {
		op.Key = "k"
	}
	b.ops = append(b.ops, op)
	return b
}

func (b *hb) grant(w int, call, ret time.Duration, token uint64, deadline time.Duration) *hb {
	return b.add(Op{Worker: w, Kind: Acquire, Call: call, Return: ret, Outcome: OK, Token: token, Deadline: deadline, Lease: 2 * time.Second})
}

func (b *hb) refused(w int, call, ret time.Duration) *hb {
	return b.add(Op{Worker: w, Kind: Acquire, Call: call, Return: ret, Outcome: Refused})
}

func (b *hb) unknownAcq(w int, call, ret time.Duration) *hb {
	return b.add(Op{Worker: w, Kind: Acquire, Call: call, Return: ret, Outcome: Unknown})
}

func (b *hb) release(w int, call, ret time.Duration, token uint64, out Outcome) *hb {
	return b.add(Op{Worker: w, Kind: Release, Call: call, Return: ret, Outcome: out, Token: token})
}

func (b *hb) describe(w int, call, ret time.Duration, held bool, token uint64) *hb {
	return b.add(Op{Worker: w, Kind: Describe, Call: call, Return: ret, Outcome: OK, Held: held, Token: token})
}

func TestCheckerAcceptsCorrectHistories(t *testing.T) {
	cases := map[string]*hb{
		"grant, release, grant": new(hb).grant(0, 0, 10*ms, 5, 900*ms).release(0, 100*ms, 110*ms, 5, OK).grant(1, 120*ms, 130*ms, 6, 1000*ms),
		"expiry then a new holder": new(hb).grant(0, 0, 10*ms, 5, 900*ms).grant(1, 950*ms, 960*ms, 6, 1900*ms).
			release(0, 1000*ms, 1010*ms, 5, Refused),
		"held past the conservative deadline": new(hb).grant(0, 0, 10*ms, 5, 900*ms).refused(1, 950*ms, 960*ms).
			describe(2, 970*ms, 980*ms, true, 5).release(0, 990*ms, 1000*ms, 5, OK),
		"unknown acquire revealed, then ends": new(hb).unknownAcq(0, 0, 10*ms).describe(1, 20*ms, 30*ms, true, 7).
			describe(1, 40*ms, 50*ms, false, 0).grant(2, 60*ms, 70*ms, 8, 900*ms),
		"unknown acquire never in effect":      new(hb).unknownAcq(0, 0, 10*ms).grant(1, 20*ms, 30*ms, 3, 900*ms),
		"W while another acquire is committed": new(hb).grant(0, 0, 20*ms, 4, 900*ms).refused(1, 5*ms, 10*ms),
		"unknown release either way": new(hb).grant(0, 0, 10*ms, 5, 900*ms).release(0, 20*ms, 30*ms, 5, Unknown).
			describe(1, 40*ms, 50*ms, true, 5).describe(1, 60*ms, 70*ms, false, 0),
		"two keys, tokens interleaved": new(hb).grant(0, 0, 10*ms, 5, 900*ms).
			add(Op{Worker: 1, Kind: Acquire, Key: "j", Call: 20 * ms, Return: 30 * ms, Outcome: OK, Token: 6, Deadline: 900 * ms}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			res := Check(b.ops, CheckOptions{})
			if len(res.Violations) > 0 || res.Linearizable != porcupine.Ok {
				t.Fatalf("a correct history was flagged: linearizable=%v violations %v", res.Linearizable, res.Violations)
			}
		})
	}
}

func TestCheckerCatchesPlantedBugs(t *testing.T) {
	cases := []struct {
		name   string
		h      *hb
		checks []string // every one of them must be reported
	}{
		{"second grant while held (expiry ignoring the lease)",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).grant(1, 500*ms, 510*ms, 6, 1400*ms),
			[]string{"overlap", "linearizability"}},
		{"token reused on another key",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).add(Op{Worker: 1, Kind: Acquire, Key: "j", Call: 20 * ms, Return: 30 * ms, Outcome: OK, Token: 5, Deadline: 900 * ms}),
			[]string{"token-reuse", "token-order"}},
		{"token goes back after a release",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).release(0, 20*ms, 30*ms, 5, OK).grant(1, 40*ms, 50*ms, 4, 900*ms),
			[]string{"token-order", "linearizability"}},
		{"acknowledged grant lost",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).describe(1, 20*ms, 30*ms, false, 0),
			[]string{"grant-lost", "linearizability"}},
		{"acknowledged release undone",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).release(0, 20*ms, 30*ms, 5, OK).describe(1, 40*ms, 50*ms, true, 5),
			[]string{"release-lost", "linearizability"}},
		{"W on a free key, nothing else in flight",
			new(hb).refused(0, 0, 10*ms),
			[]string{"linearizability"}},
		{"release answered R for a token that never held",
			new(hb).grant(0, 0, 10*ms, 5, 900*ms).release(1, 20*ms, 30*ms, 4, OK),
			[]string{"linearizability"}},
		{"G from a deposed leader: granted late, deadline past the next leader's grant",
			// The stall-after-commit fault before the fix: A called at 0,
			// its G came at 4.9 s with queued_ms ~4.9 s and a 2 s lease
			// (deadline 6.7 s), while the new leader granted B at 4.95 s.
			new(hb).grant(0, 0, 4900*ms, 5, 6700*ms).grant(1, 4920*ms, 4950*ms, 6, 6900*ms),
			[]string{"overlap"}},
		{"holder nobody asked for",
			new(hb).describe(0, 0, 10*ms, true, 9),
			[]string{"linearizability"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.h.ops, CheckOptions{})
			for _, c := range tc.checks {
				found := false
				for _, v := range res.Violations {
					if v.Check == c {
						found = true
					}
				}
				if !found {
					var got []string
					for _, v := range res.Violations {
						got = append(got, v.String())
					}
					t.Errorf("check %q did not fire; violations:\n%s", c, strings.Join(got, "\n"))
				}
			}
		})
	}
}
