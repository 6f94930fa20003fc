package coordsm

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// TestRequestsBuildTheirOps: a command a request asks for builds its op
// with every field its log entry carries (from a request with all fields
// set, none is left zero) and only with those (what it builds survives the entry's encoding unchanged),
// leaves a session request's session to the leader, and its sub-op leads
// back to it.
func TestRequestsBuildTheirOps(t *testing.T) {
	full := wire.Coord{Path: []byte("/p"), Name: []byte("n"), Key: []byte("k"), Desc: []byte("d"), Data: []byte("x"),
		Session: 7, SeqNo: 8, TimeoutMs: 9, Limit: 10, Count: 11, OrderID: 12,
		SelfCheckMs: 13, GraceMs: 14, MaxSessions: 15, MaxSemaphores: 16, MaxWaiters: 17, ReadMode: ReadStrict, AttachMode: AttachRelaxed,
		Flags: 0xff, After: 18}
	for _, c := range commands {
		if c.request == 0 {
			if c.build != nil || c.inSession {
				t.Errorf("%s: builds from a request but declares no request sub-op", c.name)
			}
			continue
		}
		if c.build == nil {
			t.Errorf("%s: request sub-op %d without build", c.name, c.request)
			continue
		}
		r, ok := ForRequest(c.request)
		if !ok || r.Kind != c.kind || r.InSession != c.inSession || RequestOf(c.kind) != c.request {
			t.Errorf("%s: ForRequest(%d) = %+v %v, RequestOf = %d", c.name, c.request, r, ok, RequestOf(c.kind))
		}
		o := r.Build(&full)
		if c.inSession && (o.Session != 0 || o.SeqNo != 0) {
			t.Errorf("%s: a session request's op took session %d seq_no %d from the request, not from its attach", c.name, o.Session, o.SeqNo)
		}
		if c.inSession {
			o.Session, o.SeqNo = 1, 2
		}
		for bit, set := range fieldIsSet {
			if c.fields&bit != 0 && !set(&o) {
				t.Errorf("%s: built %+v from a request with every field set, but left field %#x of its log entry zero", c.name, o, bit)
			}
		}
		d := &enc.Decoder{B: AppendOp(nil, c.kind, &o)}
		if back := DecodeOp(d, c.kind); d.Err != nil || !reflect.DeepEqual(*back, o) {
			t.Errorf("%s: built %+v, its log entry carries %+v (%v): build sets a field the kind does not encode", c.name, o, back, d.Err)
		}
	}
}

// fieldIsSet tells, for each field of an op's log entry, whether an op has
// it non-zero.
var fieldIsSet = map[fieldSet]func(o *Op) bool{
	fPath:      func(o *Op) bool { return o.Path != "" },
	fConfig:    func(o *Op) bool { return o.Config != NodeConfig{} },
	fSession:   func(o *Op) bool { return o.Session != 0 },
	fSeqNo:     func(o *Op) bool { return o.SeqNo != 0 },
	fKey:       func(o *Op) bool { return o.Key != "" },
	fTimeout:   func(o *Op) bool { return o.TimeoutMs != 0 },
	fDesc:      func(o *Op) bool { return o.Desc != "" },
	fName:      func(o *Op) bool { return o.Name != "" },
	fLimit:     func(o *Op) bool { return o.Limit != 0 },
	fCount:     func(o *Op) bool { return o.Count != 0 },
	fData:      func(o *Op) bool { return o.Data != "" },
	fEphemeral: func(o *Op) bool { return o.Ephemeral },
	fForce:     func(o *Op) bool { return o.Force },
	fOrder:     func(o *Op) bool { return o.OrderID != 0 },
}

// TestLimitsOfTheLog: the sizes and the session timeout the state machine
// checks decide how logged ops apply on every replica. Raising one lets a
// new leader commit ops that an older follower refuses; lowering one makes
// ops already in the log apply differently: either needs every server
// upgraded first and a new op format, not a changed constant.
func TestLimitsOfTheLog(t *testing.T) {
	got := []int{MaxPath, MaxName, MaxData, MaxDesc, MaxKey, MaxSessionTimeout}
	want := []int{1024, 1024, 1 << 20, 1024, 16, 30 * 60 * 1000}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("limits (path, name, data, description, key, session timeout ms) %v, were %v: see the comment above", got, want)
	}
}

// TestRegisterRefusesTakenNumbers: a second command with a taken kind or a
// taken request sub-op stops the package from loading (here: panics, and
// leaves the registry as it was).
func TestRegisterRefusesTakenNumbers(t *testing.T) {
	before := len(commands)
	for _, c := range []*command{{kind: CreateNode, name: "again"}, {kind: 99, name: "asked twice", request: wire.CoordAttach}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", c.name)
				}
			}()
			register(c)
		}()
	}
	if len(commands) != before || byKind[99] != nil || byRequest[wire.CoordAttach].kind != Attach {
		t.Fatal("a refused registration changed the registry")
	}
}

// TestCoordinationDocListsEveryKind: the kind table of docs/coordination.md
// ("Replicated state") has a row for every registered kind and no other.
func TestCoordinationDocListsEveryKind(t *testing.T) {
	const path = "../../../../docs/coordination.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n| Kind | Operation |\n|---|---|\n")
	if !ok {
		t.Fatalf("%s: no \"| Kind | Operation |\" table", path)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			break
		}
		rows[strings.TrimSpace(cells[1])] = true
	}
	for _, k := range Kinds() {
		n := strconv.Itoa(int(k.Kind))
		if !rows[n] {
			t.Errorf("%s: the kind table has no row for %s (%s); add \"| %s | %s (its fields) |\"", path, n, k.Name, n, k.Name)
		}
		delete(rows, n)
	}
	for n := range rows {
		t.Errorf("%s: the kind table lists %s, which is not a coordination kind", path, n)
	}
}
