package crashtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// The checks must catch what they are there to catch: these feed them
// histories of a broken server, without any process.

func owner(n byte) wire.Owner { return wire.Owner{n, 0xA5} }

func TestModelRejectsBrokenHistories(t *testing.T) {
	acq := func(o byte, call, ret int64, out opOut) porcupine.Operation {
		return porcupine.Operation{Input: opIn{key: "k", kind: acquireOp, owner: owner(o)}, Call: call, Return: ret, Output: out}
	}
	rel := func(tok uint64, call, ret int64, out opOut) porcupine.Operation {
		return porcupine.Operation{Input: opIn{key: "k", kind: releaseOp, token: tok}, Call: call, Return: ret, Output: out}
	}
	desc := func(call, ret int64, out opOut) porcupine.Operation {
		return porcupine.Operation{Input: opIn{key: "k", kind: describeOp}, Call: call, Return: ret, Output: out}
	}
	g := func(tok uint64) opOut { return opOut{ok: true, token: tok} }
	heldBy := func(tok uint64, o byte) opOut { return opOut{ok: true, token: tok, owner: owner(o)} }
	unknown := opOut{unknown: true}
	cases := []struct {
		name string
		ok   bool
		h    []porcupine.Operation
	}{
		{"grant, release, grant", true, []porcupine.Operation{acq(1, 0, 1, g(5)), rel(5, 2, 3, g(0)), acq(2, 4, 5, g(6))}},
		{"two grants, no release", false, []porcupine.Operation{acq(1, 0, 1, g(5)), acq(2, 2, 3, g(6))}},
		{"token goes back", false, []porcupine.Operation{acq(1, 0, 1, g(5)), rel(5, 2, 3, g(0)), acq(2, 4, 5, g(4))}},
		{"acknowledged grant lost", false, []porcupine.Operation{acq(1, 0, 1, g(5)), desc(2, 3, opOut{})}},
		{"acknowledged release undone", false, []porcupine.Operation{acq(1, 0, 1, g(5)), rel(5, 2, 3, g(0)), desc(4, 5, heldBy(5, 1))}},
		{"W on a free key", false, []porcupine.Operation{acq(1, 0, 1, opOut{})}},
		{"lost acquire in effect", true, []porcupine.Operation{acq(1, 0, never, unknown), desc(2, 3, heldBy(7, 1)), rel(7, 4, 5, g(0))}},
		{"lost acquire not in effect", true, []porcupine.Operation{acq(1, 0, never, unknown), desc(2, 3, opOut{}), acq(2, 4, 5, g(3))}},
		{"holder nobody asked for", false, []porcupine.Operation{acq(1, 0, never, unknown), desc(2, 3, heldBy(7, 9))}},
		{"lost acquire half in effect", false, []porcupine.Operation{acq(1, 0, never, unknown), desc(2, 3, heldBy(7, 1)), desc(4, 5, opOut{})}},
		{"lost release either way", true, []porcupine.Operation{acq(1, 0, 1, g(5)), rel(5, 2, never, unknown), desc(3, 4, heldBy(5, 1)), desc(5, 6, opOut{})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(ticketModel, tc.h); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}

// recorder is a testing.TB that keeps the book's violations instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestBookCatchesViolations(t *testing.T) {
	setup := func() (*book, *recorder) {
		r := &recorder{TB: t}
		b := newBook(r)
		b.addKey("p", 0)
		b.addKey("s", -1)
		return b, r
	}
	describe := func(b *book, key string, f wire.Frame) int {
		op := b.beginDescribe(verifierClient, key)
		f.Type = wire.TypeInfo
		b.endDescribe(op, f, answered)
		return op
	}
	want := func(t *testing.T, r *recorder, substr string) {
		t.Helper()
		for _, e := range r.errs {
			if strings.Contains(e, substr) {
				return
			}
		}
		t.Fatalf("no violation containing %q; got %q", substr, r.errs)
	}
	t.Run("acknowledged grant lost after restart", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{Type: wire.TypeGranted, Token: 5}, answered)
		b.verifyKey("p", describe(b, "p", wire.Frame{}), "test")
		want(t, r, "lost the acknowledged grant 5")
	})
	t.Run("token not above one seen before", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{Type: wire.TypeGranted, Token: 5}, answered)
		a = b.beginAcquire(0, "s", owner(2))
		b.endAcquire(a, wire.Frame{Type: wire.TypeGranted, Token: 5}, answered)
		want(t, r, "not above token 5")
	})
	t.Run("release answered N", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{Type: wire.TypeGranted, Token: 5}, answered)
		g := b.heldBy(0)[0]
		b.beginRelease(g)
		b.endRelease(g, wire.Frame{Type: wire.TypeNotHeld}, answered)
		want(t, r, "an acknowledged grant was lost")
	})
	t.Run("W on a free private key", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{Type: wire.TypeNotAcquired}, answered)
		want(t, r, "answered W, but it was free")
	})
	t.Run("released token still holds", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{Type: wire.TypeGranted, Token: 5}, answered)
		g := b.heldBy(0)[0]
		b.beginRelease(g)
		b.endRelease(g, wire.Frame{Type: wire.TypeReleased}, answered)
		b.verifyKey("p", describe(b, "p", wire.Frame{Flags: 1, Token: 5, Owner: owner(1)}), "test")
		want(t, r, "whose release was acknowledged")
	})
	t.Run("phantom holder", func(t *testing.T) {
		b, r := setup()
		b.verifyKey("s", describe(b, "s", wire.Frame{Flags: 1, Token: 9, Owner: owner(7)}), "test")
		want(t, r, "that no client was granted")
	})
	t.Run("lost acquire settled both ways", func(t *testing.T) {
		b, r := setup()
		a := b.beginAcquire(0, "p", owner(1))
		b.endAcquire(a, wire.Frame{}, lost)
		b.verifyKey("p", describe(b, "p", wire.Frame{Flags: 1, Token: 3, Owner: owner(1)}), "test")
		if len(r.errs) > 0 || len(b.heldBy(0)) != 1 {
			t.Fatalf("a lost acquire seen in effect: errors %q, held %d", r.errs, len(b.heldBy(0)))
		}
		a = b.beginAcquire(0, "s", owner(2))
		b.endAcquire(a, wire.Frame{}, lost)
		b.verifyKey("s", describe(b, "s", wire.Frame{}), "test")
		if len(r.errs) > 0 {
			t.Fatalf("a lost acquire not in effect: %q", r.errs)
		}
		if _, ok := b.unsettled(0); ok {
			t.Fatal("lost requests left unsettled after verification")
		}
	})
}
