package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// TestOpKindsRegistered: every kind is registered once, with an owner, is
// not zero and uses no flag bit of the kind byte; the kind constants are
// all registered; the dispatcher routes by the registry.
func TestOpKindsRegistered(t *testing.T) {
	var m [256]owner
	for _, k := range registry() {
		if err := checkKind(m, k); err != nil {
			t.Fatal(err)
		}
		if k.owner == ownerNone || k.name == "" || k.doc == "" {
			t.Fatalf("kind %d: owner %v, name %q, doc %q", k.kind, k.owner, k.name, k.doc)
		}
		m[k.kind] = k.owner
		if isCoordKind(k.kind) != (k.owner == ownerCoordination) {
			t.Fatalf("kind %d of %v routed to coordination: %v", k.kind, k.owner, isCoordKind(k.kind))
		}
	}
	for _, k := range []OpKind{OpAcquire, OpRelease, OpExpire, OpTakeover, OpReleaseOwner, OpSetCluster, OpAdmit, OpForget} {
		if m[k] == ownerNone {
			t.Errorf("kind %d is not registered", k)
		}
	}
	for _, k := range []coordsm.Kind{coordsm.CreateNode, coordsm.AlterNode, coordsm.DropNode, coordsm.Attach, coordsm.Detach,
		coordsm.Expire, coordsm.Stop, coordsm.CreateSem, coordsm.UpdateSem, coordsm.DeleteSem, coordsm.Acquire, coordsm.Release, coordsm.Timeout} {
		if m[k] != ownerCoordination {
			t.Errorf("coordination kind %d is not registered to coordination", k)
		}
	}
	// The check refuses a taken kind and a flag bit.
	if checkKind(m, kindSpec{kind: OpKind(coordsm.Attach), name: "again", owner: ownerTickets}) == nil {
		t.Error("a taken kind was accepted")
	}
	if checkKind(m, kindSpec{kind: 0x41, name: "flagged", owner: ownerTickets}) == nil {
		t.Error("a kind with a flag bit was accepted")
	}
}

// TestEveryOpKindDecodes: every registered kind has an encoder and a
// decoder (an op of the kind round-trips), and every other kind byte is
// refused as corrupt.
func TestEveryOpKindDecodes(t *testing.T) {
	var registered [256]bool
	for _, k := range registry() {
		registered[k.kind] = true
		b := Batch{Time: 1, Ops: []Op{{Kind: k.kind}}}
		if k.owner == ownerCoordination {
			b.Ops[0].Coord = &coordsm.Op{}
		}
		data := AppendBatch(nil, &b)
		got, err := DecodeBatch(data)
		if err != nil {
			t.Fatalf("kind %d (%s): %v", k.kind, k.name, err)
		}
		if again := AppendBatch(nil, &got); !bytes.Equal(again, data) {
			t.Fatalf("kind %d (%s) re-encodes as %x, was %x", k.kind, k.name, again, data)
		}
	}
	head := []byte{batchFormat, 0, 0, 0, 0, 0, 0, 0, 1, 1}
	for k := 0; k < kindIncarnation; k++ {
		if registered[k] {
			continue
		}
		// Trailing zero bytes stand in for fields, so only the kind fails.
		_, err := DecodeBatch(withCRC(append(append([]byte(nil), head...), byte(k), 0, 0, 0, 0)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "unknown op kind") {
			t.Errorf("unregistered kind %d: %v, want ErrCorrupt for an unknown op kind", k, err)
		}
	}
}

const (
	kindsBegin = "<!-- op kinds: generated from the registry (server/internal/fsm/kinds.go); go test ./server/internal/fsm -run TestDesignListsEveryOpKind -update -->"
	kindsEnd   = "<!-- end of op kinds -->"
)

// kindsTable is the list of op kinds docs/design.md shows.
func kindsTable() string {
	var b strings.Builder
	b.WriteString("  | Kind | Part | Operation | What it does |\n  |---:|---|---|---|\n")
	for _, k := range registry() {
		fmt.Fprintf(&b, "  | %d | %s | %s | %s |\n", k.kind, k.owner, k.name, k.doc)
	}
	return b.String()
}

// TestDesignListsEveryOpKind: docs/design.md lists the registered kinds,
// generated from the registry, so a new kind cannot go undocumented.
func TestDesignListsEveryOpKind(t *testing.T) {
	const path = "../../../docs/design.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, kindsBegin), strings.Index(s, kindsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q around the op kinds", path, kindsBegin, kindsEnd)
	}
	// The markers sit in a list item: indented like its text.
	got, want := s[i+len(kindsBegin):j], "\n"+kindsTable()+"  "
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:i+len(kindsBegin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the op kinds differ from the registry; run go test ./server/internal/fsm -run TestDesignListsEveryOpKind -update\nhave:%s\nwant:%s", path, got, want)
}
