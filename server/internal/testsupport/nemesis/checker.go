package nemesis

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Violation is one broken promise found in a history.
type Violation struct {
	Check string // which check: overlap, token-order, token-reuse, grant-lost, release-lost, linearizability
	Key   string
	Text  string
}

func (v Violation) String() string { return fmt.Sprintf("[%s] key %q: %s", v.Check, v.Key, v.Text) }

// CheckResult is the outcome of Check.
type CheckResult struct {
	Ops        int // operations checked (sent ones)
	Grants     int
	Unknown    int
	Violations []Violation
	// Linearizable is porcupine's answer over every key: porcupine.Ok,
	// Illegal, or Unknown when it did not finish within the time limit.
	Linearizable porcupine.CheckResult
	// LinearizationTime is how long porcupine took.
	LinearizationTime time.Duration
	// Visualization is porcupine's HTML file for a non-linearizable history.
	Visualization string
}

// CheckOptions tunes Check.
type CheckOptions struct {
	// LinearizabilityTimeout bounds porcupine (default 60 s); a timeout
	// is reported as Unknown, not as a violation.
	LinearizabilityTimeout time.Duration
	// VisualizationFile, when set, receives porcupine's visualization of a
	// non-linearizable history.
	VisualizationFile string
}

// never is the return time of an operation whose effect may still come.
const never = math.MaxInt64 / 4

// holdInterval is when a client held a key by its own reckoning: from the
// grant's arrival to the conservative deadline, or to the call of its
// release if that came first. The client works only inside it.
func holdInterval(g Op, release *Op) (from, to time.Duration) {
	from, to = g.Return, g.Deadline
	if release != nil && release.Call < to {
		to = release.Call
	}
	return from, to
}

// Check runs every check over a history.
func Check(ops []Op, opt CheckOptions) CheckResult {
	var res CheckResult
	clean := make([]Op, 0, len(ops))
	for _, op := range ops {
		if op.Outcome == Pending {
			op.Outcome = Unknown // still running when the history was taken
		}
		if op.Outcome == NotSent {
			continue
		}
		clean = append(clean, op)
		if op.Kind == Acquire && op.Outcome == OK {
			res.Grants++
		}
		if op.Outcome == Unknown {
			res.Unknown++
		}
	}
	res.Ops = len(clean)
	add := func(check, key, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Check: check, Key: key, Text: fmt.Sprintf(format, args...)})
	}

	// The release of each grant by its holder (workers release only their
	// own acknowledged tokens).
	releaseOf := map[uint64]*Op{}
	for i := range clean {
		op := &clean[i]
		if op.Kind == Release {
			if r, ok := releaseOf[op.Token]; !ok || op.Call < r.Call {
				releaseOf[op.Token] = op
			}
		}
	}

	// Tokens: never granted twice; strictly larger than every token granted
	// (acknowledged) before the acquire was invoked, for any key.
	var grants []Op
	seen := map[uint64]Op{}
	for _, op := range clean {
		if op.Kind != Acquire || op.Outcome != OK {
			continue
		}
		if prev, ok := seen[op.Token]; ok {
			add("token-reuse", op.Key, "token %d granted twice: %v and %v", op.Token, prev, op)
		}
		seen[op.Token] = op
		grants = append(grants, op)
	}
	byRet := append([]Op(nil), grants...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
	byCall := append([]Op(nil), grants...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	var maxBefore Op
	j := 0
	for _, op := range byCall {
		for j < len(byRet) && byRet[j].Return < op.Call {
			if byRet[j].Token > maxBefore.Token {
				maxBefore = byRet[j]
			}
			j++
		}
		if maxBefore.Token != 0 && op.Token <= maxBefore.Token {
			add("token-order", op.Key, "token %d is not above token %d, granted before the acquire was invoked: %v after %v", op.Token, maxBefore.Token, op, maxBefore)
		}
	}

	keyed, keys := byKey(clean)
	for _, key := range keys {
		kops := keyed[key]
		// Overlap: no two holders' intervals intersect.
		type iv struct {
			from, to time.Duration
			g        Op
		}
		var ivs []iv
		for _, op := range kops {
			if op.Kind == Acquire && op.Outcome == OK {
				from, to := holdInterval(op, releaseOf[op.Token])
				if to > from {
					ivs = append(ivs, iv{from, to, op})
				}
			}
		}
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].from < ivs[j].from })
		// Sorted by start: an interval overlaps an earlier one exactly when
		// it starts before the latest end so far.
		for i, last := 1, 0; i < len(ivs); i++ {
			if ivs[last].to > ivs[i].from {
				add("overlap", key, "two holders at once: token %d held [%v, %v] and token %d held [%v, %v] (%v; %v)",
					ivs[last].g.Token, ivs[last].from.Round(time.Microsecond), ivs[last].to.Round(time.Microsecond),
					ivs[i].g.Token, ivs[i].from.Round(time.Microsecond), ivs[i].to.Round(time.Microsecond), ivs[last].g, ivs[i].g)
			}
			if ivs[i].to > ivs[last].to {
				last = i
			}
		}
		// Acknowledged grants and releases are never lost: a describe made
		// wholly inside a hold interval sees that holder; one made wholly
		// after an acknowledged release never sees the released token.
		for _, d := range kops {
			if d.Kind != Describe || d.Outcome != OK {
				continue
			}
			for _, h := range ivs {
				if d.Call >= h.from && d.Return <= h.to && !(d.Held && d.Token == h.g.Token) {
					add("grant-lost", key, "a describe inside the hold of token %d [%v, %v] did not see it: %v", h.g.Token, h.from.Round(time.Microsecond), h.to.Round(time.Microsecond), d)
				}
			}
			if d.Held {
				if r := releaseOf[d.Token]; r != nil && r.Outcome == OK && d.Call > r.Return {
					add("release-lost", key, "token %d still held after its release was acknowledged: %v after %v", d.Token, d, *r)
				}
			}
		}
	}

	// Linearizability of each key's history (porcupine).
	h := make([]porcupine.Operation, 0, len(clean))
	for _, op := range clean {
		in := modelIn{key: op.Key, kind: op.Kind, token: op.Token, call: int64(op.Call), ret: int64(op.Return), deadline: int64(op.Deadline)}
		out := modelOut{outcome: op.Outcome, token: op.Token, held: op.Held}
		ret := int64(op.Return)
		if op.Outcome == Unknown {
			ret, in.ret = never, never
		}
		if op.Kind == Acquire && op.Outcome == Refused {
			in.contended = contended(keyed[op.Key], op)
		}
		h = append(h, porcupine.Operation{ClientId: op.Worker, Input: in, Output: out, Call: int64(op.Call), Return: ret})
	}
	timeout := opt.LinearizabilityTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	start := time.Now()
	lin, info := porcupine.CheckOperationsVerbose(ticketModel, h, timeout)
	res.LinearizationTime = time.Since(start)
	res.Linearizable = lin
	if lin == porcupine.Illegal {
		for _, part := range ticketModel.Partition(h) {
			if !porcupine.CheckOperations(ticketModel, part) {
				key := part[0].Input.(modelIn).key
				var b strings.Builder
				for _, op := range keyed[key] {
					fmt.Fprintf(&b, "\n    %v", op)
				}
				add("linearizability", key, "the key's history is not linearizable; its operations by call time:%s", b.String())
			}
		}
		if opt.VisualizationFile != "" {
			if err := porcupine.VisualizePath(ticketModel, info, opt.VisualizationFile); err == nil {
				res.Visualization = opt.VisualizationFile
			}
		}
	}
	return res
}

// contended reports whether another acquire of the key overlapped op in
// time: then a W may come from the server's "one attempt per key at a time"
// rule (or its queue) although the key was free at every moment.
func contended(kops []Op, op Op) bool {
	for _, o := range kops {
		if o.Index == op.Index || o.Kind != Acquire {
			continue
		}
		oret := o.Return
		if o.Outcome == Unknown {
			oret = never
		}
		if o.Call < op.Return && op.Call < oret {
			return true
		}
	}
	return false
}

// The porcupine model: one key's sequential specification, with time.

type modelIn struct {
	key       string
	kind      OpKind
	token     uint64 // release: the token released
	call, ret int64  // ns since the start; ret is never for unknown outcomes
	deadline  int64  // acquire OK: the conservative deadline
	contended bool   // acquire W: another acquire of the key overlapped it
}

type modelOut struct {
	outcome Outcome
	token   uint64
	held    bool
}

// keyState is one key: free, or held under a token. A hold whose grant was
// never acknowledged has known=false and a token larger than max until a
// describe reveals it; it may end at any moment (the client never learned
// it, and the leader releases grants nobody can learn). An acknowledged hold
// cannot end before until (the conservative deadline) except by a release.
type keyState struct {
	held  bool
	known bool
	token uint64
	max   uint64 // the largest token this key has been granted
	until int64
}

func (s keyState) matches(tok uint64) bool {
	return s.held && ((s.known && s.token == tok) || (!s.known && tok > s.max))
}

func stepKey(st keyState, in modelIn, out modelOut) []keyState {
	pre := []keyState{st}
	// The lease may have ended (on the server's clock) at any moment after
	// the conservative deadline; the op is linearized no later than ret.
	if st.held && in.ret >= st.until {
		pre = append(pre, keyState{max: st.max})
	}
	var next []keyState
	for _, p := range pre {
		switch in.kind {
		case Acquire:
			switch out.outcome {
			case Unknown:
				next = append(next, p)
				if !p.held {
					next = append(next, keyState{held: true, max: p.max})
				}
			case OK:
				if !p.held && out.token > p.max {
					next = append(next, keyState{held: true, known: true, token: out.token, max: out.token, until: in.deadline})
				}
			case Refused:
				if p.held || in.contended {
					next = append(next, p)
				}
			}
		case Release:
			freed := keyState{max: max(p.max, in.token)}
			switch out.outcome {
			case Unknown:
				next = append(next, p)
				if p.matches(in.token) {
					next = append(next, freed)
				}
			case OK:
				if p.matches(in.token) {
					next = append(next, freed)
				}
			case Refused:
				if !(p.held && p.known && p.token == in.token) {
					next = append(next, p)
				}
			}
		case Describe:
			switch {
			case !out.held:
				if !p.held {
					next = append(next, p)
				}
			case p.matches(out.token):
				p.known, p.token, p.max = true, out.token, max(p.max, out.token)
				next = append(next, p)
			}
		}
	}
	return next
}

var ticketModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			k := op.Input.(modelIn).key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{keyState{}} },
	Step: func(state, input, output any) []any {
		next := stepKey(state.(keyState), input.(modelIn), output.(modelOut))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Equal: func(a, b any) bool { return a.(keyState) == b.(keyState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(modelIn), output.(modelOut)
		switch in.kind {
		case Acquire:
			if out.outcome == OK {
				return fmt.Sprintf("acquire(%s) -> token %d", in.key, out.token)
			}
			return fmt.Sprintf("acquire(%s) -> %v", in.key, out.outcome)
		case Release:
			return fmt.Sprintf("release(%s, %d) -> %v", in.key, in.token, out.outcome)
		}
		if out.held {
			return fmt.Sprintf("describe(%s) -> held by %d", in.key, out.token)
		}
		return fmt.Sprintf("describe(%s) -> free", in.key)
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		if !s.held {
			return fmt.Sprintf("free (max %d)", s.max)
		}
		if !s.known {
			return fmt.Sprintf("held by an unacknowledged grant (max %d)", s.max)
		}
		return fmt.Sprintf("held by %d until at least %v (max %d)", s.token, time.Duration(s.until), s.max)
	},
}).ToModel()
