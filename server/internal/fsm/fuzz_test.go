package fsm

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// go test ./internal/fsm -run TestFuzzSeeds -update rewrites the seed corpus
// of FuzzDecodeBatch and FuzzReadSnapshot in testdata/fuzz.
var update = flag.Bool("update", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// FuzzDecodeBatch: DecodeBatch never panics, fails only with ErrCorrupt, and
// a batch that decodes re-encodes to exactly its bytes (the encoding is
// canonical) and applies without panicking.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range batchSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// As given (mostly stopped by the checksum), and with a valid
		// checksum so that the decoder itself is exercised.
		for _, data := range [][]byte{raw, withCRC(raw)} {
			fuzzBatch(t, data)
		}
	})
}

func fuzzBatch(t *testing.T, data []byte) {
	{
		b, err := DecodeBatch(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSnapshotVersion) {
				t.Fatalf("error not wrapping ErrCorrupt or ErrSnapshotVersion: %v", err)
			}
			return
		}
		if enc := AppendBatch(nil, &b); !bytes.Equal(enc, data) {
			t.Fatalf("not canonical:\nread    %x\nencoded %x", data, enc)
		}
		s := bigState(3)
		if res := s.Apply(b); len(res) != len(b.Ops) {
			t.Fatalf("%d results for %d ops", len(res), len(b.Ops))
		}
		if s.LastTime() < b.Time {
			t.Fatalf("last time %d after a batch at %d", s.LastTime(), b.Time)
		}
	}
}

// FuzzReadSnapshot: ReadSnapshot never panics and fails only with ErrCorrupt;
// a state that reads writes a snapshot that reads back to an equal state and
// writes exactly the same bytes again (holds and members in key order).
func FuzzReadSnapshot(f *testing.F) {
	for _, s := range snapshotSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, data := range [][]byte{raw, withCRC(raw)} {
			fuzzSnapshot(t, data)
		}
	})
}

func fuzzSnapshot(t *testing.T, data []byte) {
	{
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSnapshotVersion) {
				t.Fatalf("error not wrapping ErrCorrupt or ErrSnapshotVersion: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := s.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		first := append([]byte(nil), buf.Bytes()...)
		r, err := ReadSnapshot(&buf)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !sameState(r, s) {
			t.Fatal("state differs after a second round trip")
		}
		var again bytes.Buffer
		if err := r.WriteSnapshot(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again.Bytes()) {
			t.Fatal("equal states wrote different snapshot bytes")
		}
		s.Apply(Batch{Time: s.LastTime() + 1, Ops: []Op{takeover("n", "a"), acq("k", ownerA, 1)}})
	}
}

func batchSeeds() [][]byte {
	var out [][]byte
	cluster := Batch{Time: 3, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{0xc1, 0x05}}, {Kind: OpAdmit, NodeID: "n1"}, {Kind: OpForget, NodeID: "n2"},
		{Kind: OpAdmit, NodeID: "n3", Incarnation: 0x1c0ffee}}}
	for _, b := range []Batch{{}, allKindsBatch(), {Time: 9, Ops: make200Acquires()[:130]}, cluster} {
		out = append(out, AppendBatch(nil, &b))
	}
	return out
}

func snapshotSeeds() [][]byte {
	var out [][]byte
	// At most one member and one hold each, so that the bytes are deterministic.
	one := New()
	one.Apply(Batch{Time: 1_700_000_000_000, Ops: []Op{takeover("node-1", "10.0.0.1:5225"), acq("orders/42", ownerA, 30000)}})
	two := New()
	two.Apply(Batch{Time: 5, Ops: []Op{acq("a", ownerA, 1), rel("a", 1), acq("clé", ownerB, 250000), takeover("", ""),
		{Kind: OpSetCluster, Cluster: ClusterID{0xc1, 0x05}}, {Kind: OpAdmit, NodeID: "n1", Incarnation: 0x1c0ffee}}})
	for _, s := range []*State{New(), one, two} {
		var buf bytes.Buffer
		if err := s.WriteSnapshot(&buf); err != nil {
			panic(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

func corpusFile(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
}

// TestFuzzSeeds keeps testdata/fuzz in step with the seeds above, so that
// `go test` (without -fuzz) runs them as regression inputs.
func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range map[string][][]byte{
		"FuzzDecodeBatch":  batchSeeds(),
		"FuzzReadSnapshot": snapshotSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, s := range seeds {
			path := filepath.Join(dir, fmt.Sprintf("seed-%d", i))
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
				t.Errorf("%s missing or stale: run go test ./internal/fsm -run TestFuzzSeeds -update", path)
			}
		}
	}
}
