package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func allKindsBatch() Batch {
	return Batch{Time: 1_700_000_000_123, Ops: []Op{
		acq("orders/42", Owner{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 30000),
		acq("clé/日本語", ownerB, math.MaxUint32),
		acq(strings.Repeat("k", 300), ownerC, 1), // a key length with a 2-byte uvarint
		rel("orders/42", 1),
		rel("x", math.MaxUint64),
		exp("orders/42", 7),
		exp("", 0),
		takeover("node-1", "10.0.0.1:5225"),
		takeover("", ""),
		relOwner("orders/42", Owner{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
		relOwner("", Owner{}),
	}}
}

func TestBatchRoundTrip(t *testing.T) {
	for _, b := range []Batch{
		{},
		{Time: -1},
		{Time: math.MaxInt64, Ops: []Op{rel("k", 1)}},
		allKindsBatch(),
		{Time: 5, Ops: make200Acquires()},
	} {
		enc := AppendBatch(nil, &b)
		got, err := DecodeBatch(enc)
		if err != nil {
			t.Fatalf("DecodeBatch: %v", err)
		}
		if len(b.Ops) == 0 {
			b.Ops = []Op{} // DecodeBatch returns an empty, non-nil slice
		}
		if !reflect.DeepEqual(got, b) {
			t.Fatalf("round trip:\n%+v\nwant\n%+v", got, b)
		}
		if again := AppendBatch(nil, &got); !bytes.Equal(again, enc) {
			t.Fatal("re-encoding differs")
		}
		// Appending after a prefix leaves the prefix alone.
		pre := AppendBatch([]byte("prefix"), &b)
		if !bytes.HasPrefix(pre, []byte("prefix")) || !bytes.Equal(pre[6:], enc) {
			t.Fatal("AppendBatch does not append")
		}
	}
}

func make200Acquires() []Op { // an op count with a 2-byte uvarint
	ops := make([]Op, 200)
	for i := range ops {
		ops[i] = acq(fmt.Sprint(i), Owner{byte(i)}, uint32(i+1))
	}
	return ops
}

// TestBatchLayout pins the log entry format byte by byte: entries already in
// Raft logs must keep decoding.
func TestBatchLayout(t *testing.T) {
	b := Batch{Time: 0x0102030405060708, Ops: []Op{
		acq("k", Owner{0xaa}, 0x01020304),
		rel("k", 9),
		exp("k", 10),
		takeover("n", "a"),
		relOwner("k", Owner{0xbb}),
	}}
	want := []byte{1, 1, 2, 3, 4, 5, 6, 7, 8, 5,
		1, 1, 'k', 0xaa, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4,
		2, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 9,
		3, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 10,
		4, 1, 'n', 1, 'a',
		5, 1, 'k', 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	want = withCRC(want) // CRC-32C (Castagnoli) of everything before it, big-endian
	if got := AppendBatch(nil, &b); !bytes.Equal(got, want) {
		t.Fatalf("AppendBatch =\n%x\nwant\n%x", got, want)
	}
}

func wantCorrupt(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want an error wrapping ErrCorrupt", what, err)
	}
}

func TestDecodeBatchTruncated(t *testing.T) {
	enc := AppendBatch(nil, &Batch{Time: 5, Ops: append(allKindsBatch().Ops, make200Acquires()...)})
	for n := 0; n < len(enc); n++ {
		_, err := DecodeBatch(enc[:n])
		wantCorrupt(t, err, fmt.Sprintf("batch cut to %d of %d bytes", n, len(enc)))
	}
	_, err := DecodeBatch(append(enc, 0))
	wantCorrupt(t, err, "trailing byte")
}

func TestDecodeBatchCorrupt(t *testing.T) {
	ok := AppendBatch(nil, &Batch{Time: 1, Ops: []Op{rel("k", 1)}})
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"unknown format", append([]byte{2}, ok[1:len(ok)-crcLen]...)},
		{"format 0", append([]byte{0}, ok[1:len(ok)-crcLen]...)},
		{"unknown op kind 0", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0}},
		{"unknown op kind 6", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 6}},
		{"release by owner cut inside the owner", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 5, 1, 'k', 0xbb}},
		{"op count beyond the data", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 2}},
		{"huge op count", binary.AppendUvarint([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1}, math.MaxUint64)},
		{"key length beyond the data", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0xff, 0x7f, 'k'}},
		{"varint overflow", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"overlong op count", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0x81, 0x00, 2, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 1}},
		{"overlong key length", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0x81, 0x00, 'k', 0, 0, 0, 0, 0, 0, 0, 1}},
		{"overlong zero", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0x00}},
	} {
		// With a valid checksum, so that the decoder itself must refuse them.
		_, err := DecodeBatch(withCRC(c.data))
		wantCorrupt(t, err, c.name)
	}
	// Any changed byte is caught by the checksum.
	for i := range ok {
		b := append([]byte(nil), ok...)
		b[i] ^= 0x20
		_, err := DecodeBatch(b)
		wantCorrupt(t, err, fmt.Sprintf("byte %d changed", i))
	}
}

// withCRC appends the CRC-32C trailer that every batch and snapshot carries.
func withCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, crcTable))
}

// bigState has n holds with varied fields, a few members, and a last token
// and time that no hold reaches (released and expired holds came before).
func bigState(n int) *State {
	s := New()
	s.lastToken = uint64(n) * 3
	s.lastTime = 1_700_000_000_000 + int64(n)
	s.members["node-1"] = "10.0.0.1:5225"
	s.members["node-2"] = ""
	s.members["ノード"] = "[::1]:5225"
	for i := range n {
		k := fmt.Sprintf("key/%d/%s", i, strings.Repeat("x", i%200))
		s.order.ReplaceOrInsert(k)
		s.holds[k] = Hold{
			Token: uint64(i)*3 + 1, Owner: Owner{byte(i), byte(i >> 8), byte(i >> 16), 0xff},
			LeaseMs: uint32(i%250000 + 1), GrantedAt: s.lastTime - int64(i), ExpiresAt: s.lastTime + int64(i%250000),
		}
	}
	s.reindex() // the holds were written directly
	return s
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range []*State{New(), bigState(1), bigState(5000)} {
		var buf bytes.Buffer
		if err := s.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if !sameState(got, s) {
			t.Fatalf("snapshot of %d holds: state differs after the round trip", s.Len())
		}
		if got.LastToken() != s.LastToken() || got.LastTime() != s.LastTime() || !reflect.DeepEqual(got.Members(), s.Members()) {
			t.Fatal("accessors differ")
		}
		// Read through one-byte reads too: ReadSnapshot must not depend on read sizes.
		got, err = ReadSnapshot(iotest.OneByteReader(bytes.NewReader(buf.Bytes())))
		if err != nil || !sameState(got, s) {
			t.Fatalf("one-byte reads: %v", err)
		}
	}
}

// TestSnapshotOfAppliedState: a state built by Apply, with takeovers,
// survives a snapshot and then goes on exactly like the original.
func TestSnapshotOfAppliedState(t *testing.T) {
	s := New()
	var ops []Op
	for i := range 3000 {
		ops = append(ops, acq(fmt.Sprint("k", i), Owner{byte(i)}, uint32(1000+i)))
	}
	s.Apply(Batch{Time: 1000, Ops: ops})
	s.Apply(Batch{Time: 1500, Ops: []Op{takeover("n1", "a:1"), rel("k7", 8)}})
	r := snapshotRoundTrip(t, s)
	next := Batch{Time: 2600, Ops: []Op{acq("k7", ownerB, 5), exp("k1", 2), exp("k2000", 2001), acq("new", ownerA, 1)}}
	if a, b := s.Apply(next), r.Apply(next); !reflect.DeepEqual(a, b) {
		t.Fatalf("after a snapshot the state behaves differently:\n%+v\n%+v", a, b)
	}
	if !sameState(s, r) {
		t.Fatal("states differ")
	}
}

// Equal states write identical snapshot bytes, whatever order their maps
// iterate in: two backups of one state have one checksum.
func TestSnapshotBytesAreDeterministic(t *testing.T) {
	s := bigState(2000)
	var first bytes.Buffer
	if err := s.WriteSnapshot(&first); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		for _, st := range []*State{s, s.Clone(), snapshotRoundTrip(t, s)} {
			var again bytes.Buffer
			if err := st.WriteSnapshot(&again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.Bytes(), again.Bytes()) {
				t.Fatalf("write %d: the same state gave different snapshot bytes", i)
			}
		}
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	var buf bytes.Buffer
	if err := bigState(20).WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	for n := 0; n < len(snap); n++ {
		_, err := ReadSnapshot(bytes.NewReader(snap[:n]))
		wantCorrupt(t, err, fmt.Sprintf("snapshot cut to %d of %d bytes", n, len(snap)))
	}
	_, err := ReadSnapshot(bytes.NewReader(append(append([]byte(nil), snap...), 0)))
	wantCorrupt(t, err, "trailing byte")
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("TKSX\x02"), snap[5:len(snap)-crcLen]...)},
		{"version 0", append([]byte{'T', 'K', 'S', 'N', 0}, snap[5:len(snap)-crcLen]...)},
		{"hold count beyond the data", binary.AppendUvarint(append([]byte("TKSN\x01"), make([]byte, 17)...), 1<<40)},
		{"member count beyond the data", binary.AppendUvarint(append([]byte("TKSN\x01"), make([]byte, 16)...), 1<<40)},
		{"overlong hold count", append(append([]byte("TKSN\x01"), make([]byte, 17)...), 0x80, 0x00)},
		// Found by FuzzReadSnapshot: the header is cut short, so the hold count is
		// read from the wrong place (about 3.3e10); it used to be preallocated as a map.
		{"truncated header then huge hold count", []byte("TKSN\x01\x01\x8b\xcf\xe5\xb2zz")},
	} {
		_, err := ReadSnapshot(bytes.NewReader(c.data))
		wantCorrupt(t, err, c.name+" (checksum)")
		if len(c.data) > 0 { // with a valid checksum the decoder itself must refuse it
			_, err = ReadSnapshot(bytes.NewReader(withCRC(c.data)))
			wantCorrupt(t, err, c.name)
		}
	}
	// Every flipped byte is refused (the checksum), never decoded to some other state.
	for i := range snap {
		b := append([]byte(nil), snap...)
		b[i] ^= 0xff
		_, err := ReadSnapshot(bytes.NewReader(b))
		wantCorrupt(t, err, fmt.Sprintf("flip at %d", i))
	}
}

func TestSnapshotIOErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ReadSnapshot(iotest.ErrReader(boom)); !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("read error: %v, want it returned as is", err)
	}
	for _, limit := range []int{0, 10, 100000} {
		if err := bigState(3000).WriteSnapshot(&failWriter{left: limit}); !errors.Is(err, errDiskFull) {
			t.Fatalf("write error after %d bytes: %v", limit, err)
		}
	}
}

var errDiskFull = errors.New("disk full")

type failWriter struct{ left int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errDiskFull
	}
	w.left -= len(p)
	return len(p), nil
}

func BenchmarkSnapshot(b *testing.B) {
	s := bigState(100_000)
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	b.Run("Write100k", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(buf.Len()))
		var out bytes.Buffer
		for b.Loop() {
			out.Reset()
			if err := s.WriteSnapshot(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Read100k", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(buf.Len()))
		for b.Loop() {
			if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSnapshotNewerVersion: a snapshot from a newer ticketd is reported as
// such (ErrSnapshotVersion), not as damaged or as "not a Ticketing snapshot".
func TestSnapshotNewerVersion(t *testing.T) {
	var buf bytes.Buffer
	if err := New().WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b = append([]byte(nil), b[:len(b)-crcLen]...)
	b[4] = snapshotVersion + 1
	_, err := ReadSnapshot(bytes.NewReader(withCRC(b)))
	want := fmt.Sprintf("version %d", snapshotVersion+1)
	if !errors.Is(err, ErrSnapshotVersion) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Fatalf("newer snapshot: got %v, want ErrSnapshotVersion naming %s", err, want)
	}
}

// TestClusterIdentity: the cluster ID and the participants are replicated
// state: applied from the log, kept in snapshots, reset by OpSetCluster.
func TestClusterIdentity(t *testing.T) {
	s := New()
	id := ClusterID{1, 2, 3}
	res := s.Apply(Batch{Time: 1, Ops: []Op{{Kind: OpSetCluster, Cluster: id}, {Kind: OpAdmit, NodeID: "n2"}, {Kind: OpAdmit, NodeID: "n1"},
		{Kind: OpAdmit, NodeID: "n3"}, {Kind: OpForget, NodeID: "n3"}, {Kind: OpSetCluster}, {Kind: OpAdmit}}})
	want := []Status{Done, Done, Done, Done, Done, Invalid, Invalid}
	for i, r := range res {
		if r.Status != want[i] {
			t.Errorf("op %d: %v, want %v", i, r.Status, want[i])
		}
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	// Through the log encoding as well.
	b, err := DecodeBatch(AppendBatch(nil, &Batch{Time: 1, Ops: []Op{{Kind: OpSetCluster, Cluster: id}, {Kind: OpAdmit, NodeID: "n9"}, {Kind: OpForget, NodeID: "n9"}}}))
	if err != nil || b.Ops[0].Cluster != id || b.Ops[1].NodeID != "n9" || b.Ops[2].Kind != OpForget {
		t.Fatalf("batch round trip: %+v, %v", b, err)
	}
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster() != id || !reflect.DeepEqual(r.Participants(), []string{"n1", "n2"}) {
		t.Fatalf("after snapshot: cluster %x participants %v", r.Cluster(), r.Participants())
	}
	r.Apply(Batch{Time: 2, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{9}}}})
	if r.Cluster() != (ClusterID{9}) || len(r.Participants()) != 0 || r.Admitted("n1") {
		t.Fatalf("a new cluster ID must forget the participants: %v", r.Participants())
	}
}
