package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketing-io/ticketing/internal/wire"
)

type opKind uint8

const (
	acquireOp opKind = iota + 1 // wait 0
	releaseOp
	describeOp
)

type opIn struct {
	key   string
	kind  opKind
	owner wire.Owner // acquire
	token uint64     // release
	// contended: an acquire answered W while another acquire of the key
	// was in flight (see book.history).
	contended bool
}

// opOut is a request's answer: ok is G (acquire), R (release) or "held"
// (describe, with token and owner). unknown: the answer was lost.
type opOut struct {
	unknown bool
	ok      bool
	token   uint64
	owner   wire.Owner
}

// keyState is the sequential specification of one key: free, or held by an
// owner under a token. A grant whose answer was lost holds the key under a
// token nobody has seen yet (known false), larger than every earlier one.
type keyState struct {
	held  bool
	known bool
	token uint64
	owner wire.Owner
	max   uint64 // the largest token granted for this key so far
}

func (s keyState) holds(token uint64) bool {
	return s.held && ((s.known && s.token == token) || (!s.known && token > s.max))
}

func stepKey(st keyState, in opIn, out opOut) []any {
	switch in.kind {
	case acquireOp:
		granted := func(tok uint64, known bool) keyState {
			return keyState{held: true, known: known, token: tok, owner: in.owner, max: max(st.max, tok)}
		}
		switch {
		case out.unknown:
			if st.held {
				return []any{st} // W, or lost: nothing changed
			}
			return []any{st, granted(0, false)}
		case out.ok:
			if !st.held && out.token > st.max {
				return []any{granted(out.token, true)}
			}
		default: // W: the key was held, or another attempt on it was being committed
			if st.held || in.contended {
				return []any{st}
			}
		}
	case releaseOp:
		freed := keyState{max: max(st.max, in.token)}
		switch {
		case out.unknown:
			if st.holds(in.token) {
				return []any{st, freed}
			}
			return []any{st}
		case out.ok:
			if st.holds(in.token) {
				return []any{freed}
			}
		default: // N
			if !st.held || !st.known || st.token != in.token {
				return []any{st}
			}
		}
	case describeOp:
		if !out.ok {
			if !st.held {
				return []any{st}
			}
			return nil
		}
		if st.held && st.owner == out.owner && st.holds(out.token) {
			return []any{keyState{held: true, known: true, token: out.token, owner: out.owner, max: max(st.max, out.token)}}
		}
	}
	return nil
}

var ticketModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			k := op.Input.(opIn).key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{keyState{}} },
	Step: func(state, input, output any) []any {
		return stepKey(state.(keyState), input.(opIn), output.(opOut))
	},
	Equal: func(a, b any) bool { return a.(keyState) == b.(keyState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(opIn), output.(opOut)
		res := "?"
		if !out.unknown {
			res = fmt.Sprintf("ok=%v token=%d", out.ok, out.token)
		}
		switch in.kind {
		case acquireOp:
			return fmt.Sprintf("acquire(%s, %x) -> %s", in.key, in.owner[:4], res)
		case releaseOp:
			return fmt.Sprintf("release(%s, %d) -> %s", in.key, in.token, res)
		}
		return fmt.Sprintf("describe(%s) -> %s owner %x", in.key, res, out.owner[:4])
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		if !s.held {
			return fmt.Sprintf("free (max %d)", s.max)
		}
		return fmt.Sprintf("held %d known=%v owner %x (max %d)", s.token, s.known, s.owner[:4], s.max)
	},
}).ToModel()

// checkLinearizable checks the book's history with porcupine. A violation
// writes a visualization next to the test's temporary files.
func checkLinearizable(t *testing.T, b *book) {
	t.Helper()
	h := b.history()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(ticketModel, h, 60*time.Second)
	switch res {
	case porcupine.Ok:
		t.Logf("linearizability (porcupine, one-key model per key): ok, %d operations checked in %v", len(h), time.Since(start).Round(time.Millisecond))
	case porcupine.Unknown:
		t.Logf("linearizability (porcupine): no answer within 60 s for %d operations; not counted as a failure", len(h))
	default:
		file := filepath.Join(os.TempDir(), fmt.Sprintf("ticketing-crashtest-%s-%d.html", t.Name(), time.Now().UnixNano()))
		if err := porcupine.VisualizePath(ticketModel, info, file); err != nil {
			file = "(visualization failed: " + err.Error() + ")"
		}
		t.Errorf("VIOLATION: the acquire/release/describe history (%d operations) is not linearizable; visualization: %s", len(h), file)
		for _, part := range ticketModel.Partition(h) {
			if !porcupine.CheckOperations(ticketModel, part) {
				key := part[0].Input.(opIn).key
				t.Errorf("key %q is not linearizable; its requests by call time:\n%s", key, b.keyHistory(key))
			}
		}
	}
}
