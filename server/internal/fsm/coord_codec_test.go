package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// allCoordOps has one op of every coordination kind with every field of its
// kind set to a value that is not zero.
func allCoordOps() []Op {
	cfg := coordsm.NodeConfig{SelfCheckMs: 500, GraceMs: 7000, ReadMode: coordsm.ReadStrict, AttachMode: coordsm.AttachRelaxed, MaxSessions: 3, MaxSemaphores: 4, MaxWaiters: 5}
	return []Op{
		{Kind: OpKind(coordsm.CreateNode), Coord: &coordsm.Op{Path: "/p", Config: cfg}},
		{Kind: OpKind(coordsm.AlterNode), Coord: &coordsm.Op{Path: "/p", Config: coordsm.NodeConfig{GraceMs: 8000}}},
		{Kind: OpKind(coordsm.Attach), Coord: &coordsm.Op{Path: "/p", Key: "key", SeqNo: 7, TimeoutMs: 60000, Desc: "worker 1"}},
		{Kind: OpKind(coordsm.Attach), Coord: &coordsm.Op{Path: "/p", Session: 1, Key: "key", SeqNo: 8, TimeoutMs: 60000, Desc: "worker 1"}},
		{Kind: OpKind(coordsm.CreateSem), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "sem", Limit: 3, Data: "cfg"}},
		{Kind: OpKind(coordsm.UpdateSem), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "sem", Data: "cfg2"}},
		{Kind: OpKind(coordsm.Acquire), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "eph", Count: coordsm.Exclusive, TimeoutMs: coordsm.WaitForever, Data: "me", Ephemeral: true}},
		{Kind: OpKind(coordsm.Acquire), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "sem", Count: 2, TimeoutMs: 100}},
		{Kind: OpKind(coordsm.Timeout), Coord: &coordsm.Op{Session: 1, Name: "sem", OrderID: 9}},
		{Kind: OpKind(coordsm.Release), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "sem"}},
		{Kind: OpKind(coordsm.DeleteSem), Coord: &coordsm.Op{Session: 1, SeqNo: 8, Name: "sem", Force: true}},
		{Kind: OpKind(coordsm.Detach), Coord: &coordsm.Op{Session: 1, SeqNo: 8}},
		{Kind: OpKind(coordsm.Expire), Coord: &coordsm.Op{Session: 1}},
		{Kind: OpKind(coordsm.Stop), Coord: &coordsm.Op{Session: 1, SeqNo: 8}},
		{Kind: OpKind(coordsm.DropNode), Coord: &coordsm.Op{Path: "/p"}},
	}
}

func TestCoordBatchRoundTrip(t *testing.T) {
	b := Batch{Time: 42, Ops: allCoordOps()}
	seen := map[OpKind]bool{}
	for _, op := range b.Ops {
		seen[op.Kind] = true
	}
	for _, k := range registry() {
		if k.owner == ownerCoordination && !seen[k.kind] {
			t.Fatalf("allCoordOps lacks kind %d", k.kind)
		}
	}
	enc := AppendBatch(nil, &b)
	got, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", got, b)
	}
	// Cut anywhere, it is refused.
	for n := 0; n < len(enc)-crcLen; n++ {
		_, err := DecodeBatch(withCRC(enc[:n]))
		wantCorrupt(t, err, fmt.Sprintf("cut to %d of %d", n, len(enc)))
	}
	// Fields not of the kind are not encoded: the op decodes without them.
	extra := Batch{Time: 1, Ops: []Op{{Kind: OpKind(coordsm.Expire), Coord: &coordsm.Op{Session: 1, Name: "ignored", Limit: 9}}}}
	got, err = DecodeBatch(AppendBatch(nil, &extra))
	if err != nil || !reflect.DeepEqual(got.Ops[0].Coord, &coordsm.Op{Session: 1}) {
		t.Fatalf("expire with extra fields decoded as %+v, %v", got.Ops[0].Coord, err)
	}
}

// TestCoordBatchLayout pins the bytes of one acquire, so that a change of
// the log format is deliberate.
func TestCoordBatchLayout(t *testing.T) {
	b := Batch{Time: 0x0102030405060708, Ops: []Op{{Kind: OpKind(coordsm.Acquire), Coord: &coordsm.Op{
		Session: 5, SeqNo: 2, Name: "s", Count: 1, TimeoutMs: 300, Data: "d", Ephemeral: true}}}}
	want := []byte{1, 1, 2, 3, 4, 5, 6, 7, 8, 1,
		42,   // kind
		5, 2, // session, seq_no (uvarints)
		0xac, 0x02, // timeout 300
		1, 's', // name
		1,      // count
		1, 'd', // data
		1, // ephemeral
	}
	if got := AppendBatch(nil, &b); !bytes.Equal(got, withCRC(want)) {
		t.Fatalf("AppendBatch =\n%x\nwant\n%x", got, withCRC(want))
	}
}

func TestCoordBatchCorrupt(t *testing.T) {
	head := []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1}
	for _, c := range []struct {
		name string
		op   []byte
	}{
		{"ephemeral 2", []byte{42, 5, 2, 1, 's', 1, 0, 0, 2}},
		{"force 7", []byte{41, 5, 2, 1, 's', 7}},
		{"self-check above 32 bits", append(append([]byte{32, 2, '/', 'p'}, binary.AppendUvarint(nil, 1<<32)...), 0, 0, 0, 0, 0, 0)},
		{"kind 45", []byte{45}},
		{"kind 31", []byte{31}},
		{"overlong session", []byte{37, 0x81, 0x00}},
	} {
		_, err := DecodeBatch(withCRC(append(append([]byte(nil), head...), c.op...)))
		wantCorrupt(t, err, c.name)
	}
}

// richCoordState builds a state with every part of the coordination section:
// two nodes, attached and detached sessions, persistent and ephemeral
// semaphores with owners and waiters, and tickets.
func richCoordState(t testing.TB) *State {
	h := &harness{t: t, s: New(), now: 1_700_000_000_000}
	h.s.Apply(Batch{Time: h.now, Ops: []Op{acq("ticket", ownerA, 30000)}})
	h.want(coordsm.Success, coordsm.CreateNode, coordsm.Op{Path: "/n", Config: coordsm.NodeConfig{GraceMs: 12345, MaxWaiters: 7}})
	h.node("/other")
	a := h.start("/n", "key-a")
	b := h.start("/n", "")
	c := h.want(coordsm.Success, coordsm.Attach, coordsm.Op{Path: "/n", SeqNo: 1, TimeoutMs: 5000, Desc: "c"}).Session
	h.want(coordsm.Success, coordsm.CreateSem, coordsm.Op{Session: a, SeqNo: 1, Name: "s", Limit: 3, Data: "config"})
	h.want(coordsm.Success, coordsm.Acquire, coordsm.Op{Session: a, SeqNo: 1, Name: "s", Count: 2, Data: "a's"})
	h.acquire(b, "s", 2, 60000)
	h.want(coordsm.Success, coordsm.Acquire, coordsm.Op{Session: c, SeqNo: 1, Name: "s", Count: coordsm.Exclusive, TimeoutMs: coordsm.WaitForever})
	h.want(coordsm.Success, coordsm.Acquire, coordsm.Op{Session: b, SeqNo: 1, Name: "eph", Count: 1, Ephemeral: true, Data: "endpoint"})
	h.want(coordsm.Success, coordsm.Detach, coordsm.Op{Session: c, SeqNo: 1})
	h.start("/other", "")
	return h.s
}

func snapshotBytes(t testing.TB, s *State) []byte {
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCoordSnapshotRoundTrip(t *testing.T) {
	s := richCoordState(t)
	data := snapshotBytes(t, s)
	r, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), data) {
		t.Fatal("snapshot round trip changed the bytes")
	}
	for _, name := range []string{"s", "eph"} {
		a, _ := s.DescribeSemaphore("/n", name, true, true)
		b, _ := r.DescribeSemaphore("/n", name, true, true)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: %+v after reading, was %+v", name, b, a)
		}
	}
	if !reflect.DeepEqual(s.Sessions(""), r.Sessions("")) {
		t.Fatalf("sessions %+v after reading, were %+v", r.Sessions(""), s.Sessions(""))
	}
	if n, _ := r.DescribeNode("/n"); n.Waiters != 2 || n.Config.GraceMs != 12345 {
		t.Fatalf("node after reading: %+v", n)
	}
	// The protection key survives: a restore with a wrong one is refused.
	res := r.Apply(Batch{Time: r.LastTime(), Ops: []Op{{Kind: OpKind(coordsm.Attach), Coord: &coordsm.Op{Path: "/n", Session: 1, Key: "x", SeqNo: 2, TimeoutMs: 1}},
		{Kind: OpKind(coordsm.Attach), Coord: &coordsm.Op{Path: "/n", Session: 1, Key: "key-a", SeqNo: 2, TimeoutMs: 1}}}})
	if res[0].Coord.Status != coordsm.BadSession || res[1].Coord.Status != coordsm.Success {
		t.Fatalf("restores after reading: %v, %v", res[0].Coord.Status, res[1].Coord.Status)
	}
}

// TestCoordSnapshotCompatible: a snapshot written before coordination
// existed still reads, and a state without coordination writes no section
// (TestFuzzSeeds also pins those bytes: its corpus predates this section).
func TestCoordSnapshotCompatible(t *testing.T) {
	// Version 1, written by the server before coordination nodes.
	old := "TKSN\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x01\x8b\xcf\xe5h\x00\x01\x06node-1\r10.0.0.1:5225\x01\torders/42\x00\x00\x00\x00\x00\x00\x00\x01\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00u0\x00\x00\x01\x8b\xcf\xe5h\x00\x00\x00\x01\x8b\xcf\xe5\xdd0fGM\xf0"
	r, err := ReadSnapshot(strings.NewReader(old))
	if err != nil {
		t.Fatalf("old snapshot: %v", err)
	}
	if h, ok := r.Get("orders/42"); !ok || h.Token != 1 {
		t.Fatalf("old snapshot read as %+v %v", h, ok)
	}
	if !r.coord.Empty() {
		t.Fatal("old snapshot read with coordination state")
	}
	// A node created and dropped leaves nothing: still no section.
	h := &harness{t: t, s: r, now: r.LastTime()}
	before := snapshotBytes(t, h.s)
	h.node("/n")
	h.want(coordsm.Success, coordsm.DropNode, coordsm.Op{Path: "/n"})
	if !bytes.Equal(snapshotBytes(t, h.s), before) {
		t.Fatal("an empty coordination state changed the snapshot bytes")
	}
	// Once a session existed the section stays (the session counter must
	// never go back), so ids are not reused after a snapshot.
	h.node("/n")
	id := h.start("/n", "")
	h.want(coordsm.Success, coordsm.DropNode, coordsm.Op{Path: "/n"})
	r2, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, h.s)))
	if err != nil {
		t.Fatal(err)
	}
	h2 := &harness{t: t, s: r2, now: r2.LastTime()}
	h2.node("/n")
	if id2 := h2.start("/n", ""); id2 <= id {
		t.Fatalf("session id %d reused after a snapshot (was %d)", id2, id)
	}
}

// TestCoordSnapshotVersion1: a section written in format 1 (before
// semaphore versions) still reads, with every version 0, and the versions
// drawn after it are new.
func TestCoordSnapshotVersion1(t *testing.T) {
	s := richCoordState(t)
	v2 := snapshotBytes(t, s)
	body := v2[:len(v2)-crcLen]
	prefix := body[:len(body)-len(s.coord.AppendSnapshotFormat(nil, coordsm.SectionVersion))]
	old := withCRC(s.coord.AppendSnapshotFormat(bytes.Clone(prefix), 1))
	r, err := ReadSnapshot(bytes.NewReader(old))
	if err != nil {
		t.Fatalf("version 1 section: %v", err)
	}
	a, _ := s.DescribeSemaphore("/n", "s", true, true)
	b, _ := r.DescribeSemaphore("/n", "s", true, true)
	if a.Version == 0 || b.Version != 0 {
		t.Fatalf("versions %d written, %d read from format 1", a.Version, b.Version)
	}
	a.Version = 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("read from format 1 as %+v, was %+v", b, a)
	}
	h := &harness{t: t, s: r, now: r.LastTime()}
	h.want(coordsm.Success, coordsm.UpdateSem, coordsm.Op{Session: 1, SeqNo: 1, Name: "s", Data: "new"})
	if c, _ := r.DescribeSemaphore("/n", "s", false, false); c.Version == 0 {
		t.Fatal("an update after a format-1 snapshot kept version 0")
	}
}

// TestCoordSnapshotCorrupt: a section that is not a state the operations
// reach is refused as corrupt, never loaded.
func TestCoordSnapshotCorrupt(t *testing.T) {
	good := snapshotBytes(t, richCoordState(t))
	body := good[:len(good)-crcLen]
	at := bytes.LastIndex(body, []byte{coordsm.SectionTag, coordsm.SectionVersion, 4}) // tag, version, last session 4
	if at < 0 {
		t.Fatal("section not found")
	}
	prefix, section := body[:at], body[at:]
	mutate := func(old, new string) []byte {
		t.Helper()
		if !bytes.Contains(section, []byte(old)) {
			t.Fatalf("%q not in the section", old)
		}
		return bytes.Replace(section, []byte(old), []byte(new), 1)
	}
	for _, c := range []struct {
		name    string
		section []byte
	}{
		{"newer version", append([]byte{coordsm.SectionTag, coordsm.SectionVersion + 1}, section[2:]...)},
		{"version 0", append([]byte{coordsm.SectionTag, 0}, section[2:]...)},
		{"present but empty", []byte{coordsm.SectionTag, coordsm.SectionVersion, 0, 0, 0}},
		{"last session below an id", append([]byte{coordsm.SectionTag, coordsm.SectionVersion, 3}, section[3:]...)},
		{"invalid path", mutate("\x02/n", "\x02n/")},
		{"bad attached byte", mutate("\x01c\x00\x00", "\x01c\x00\x02")},
		{"cut", section[:len(section)-1]},
		{"trailing byte", append(bytes.Clone(section), 0)},
		{"unknown tag", append([]byte{'X'}, section[1:]...)},
	} {
		data := withCRC(append(bytes.Clone(prefix), c.section...))
		_, err := ReadSnapshot(bytes.NewReader(data))
		if err == nil || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
	// States no operation reaches, built directly, are refused too: see
	// coordsm's TestSnapshotRefusesUnreachable.
}

// FuzzDecodeCoordBatch runs the checks of FuzzDecodeBatch from seeds made of
// coordination ops, so that their decoder is explored.
func FuzzDecodeCoordBatch(f *testing.F) {
	for _, s := range coordBatchSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, data := range [][]byte{raw, withCRC(raw)} {
			fuzzBatch(t, data)
		}
	})
}

// FuzzReadCoordSnapshot runs the checks of FuzzReadSnapshot from snapshots
// with a coordination section.
func FuzzReadCoordSnapshot(f *testing.F) {
	for _, s := range coordSnapshotSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, data := range [][]byte{raw, withCRC(raw)} {
			fuzzSnapshot(t, data)
		}
	})
}

func coordBatchSeeds() [][]byte {
	var out [][]byte
	b := Batch{Time: 5, Ops: allCoordOps()}
	out = append(out, AppendBatch(nil, &b))
	for _, op := range allCoordOps()[:9] {
		one := Batch{Time: 7, Ops: []Op{op, takeover("n", "a")}}
		out = append(out, AppendBatch(nil, &one))
	}
	return out
}

func coordSnapshotSeeds(t testing.TB) [][]byte {
	small := New()
	small.Apply(Batch{Time: 3, Ops: []Op{{Kind: OpKind(coordsm.CreateNode), Coord: &coordsm.Op{Path: "/n"}}}})
	var out [][]byte
	for _, s := range []*State{small, richCoordState(t)} {
		var buf bytes.Buffer
		if err := s.WriteSnapshot(&buf); err != nil {
			panic(err)
		}
		out = append(out, buf.Bytes())
	}
	// The rich state again with a format-1 section (no semaphore versions).
	rich := out[len(out)-1]
	c := richCoordState(t).coord
	prefix := rich[:len(rich)-crcLen-len(c.AppendSnapshotFormat(nil, coordsm.SectionVersion))]
	return append(out, withCRC(c.AppendSnapshotFormat(bytes.Clone(prefix), 1)))
}

// TestCoordFuzzSeeds keeps testdata/fuzz/Fuzz*Coord* in step with the seeds
// above (go test ./internal/fsm -run TestCoordFuzzSeeds -update).
func TestCoordFuzzSeeds(t *testing.T) {
	for target, seeds := range map[string][][]byte{
		"FuzzDecodeCoordBatch":  coordBatchSeeds(),
		"FuzzReadCoordSnapshot": coordSnapshotSeeds(t),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, s := range seeds {
			path := filepath.Join(dir, "seed-"+strconv.Itoa(i))
			want := corpusFile(s)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s missing or stale: run go test ./internal/fsm -run TestCoordFuzzSeeds -update", path)
			}
		}
	}
}

// TestCoordSnapshotVersion2DetachTimes: a section written before detach
// times were kept reads a detached session's detach time as its expiry
// minus its timeout, and an attached one's as 0.
func TestCoordSnapshotVersion2DetachTimes(t *testing.T) {
	s := richCoordState(t)
	v3 := snapshotBytes(t, s)
	body := v3[:len(v3)-crcLen]
	prefix := body[:len(body)-len(s.coord.AppendSnapshotFormat(nil, coordsm.SectionVersion))]
	r, err := ReadSnapshot(bytes.NewReader(withCRC(s.coord.AppendSnapshotFormat(bytes.Clone(prefix), 2))))
	if err != nil {
		t.Fatalf("version 2 section: %v", err)
	}
	if !reflect.DeepEqual(s.Sessions(""), r.Sessions("")) {
		t.Fatalf("sessions %+v read from format 2, were %+v", r.Sessions(""), s.Sessions(""))
	}
}
