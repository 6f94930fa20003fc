package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// goldenBatch has an op of every kind, with and without the optional flags
// (principal, incarnation).
func goldenBatch() Batch {
	b := allKindsBatch()
	b.Ops = append(b.Ops,
		Op{Kind: OpSetCluster, Cluster: ClusterID{0xc1, 0x05, 0xff}},
		Op{Kind: OpAdmit, NodeID: "n1"},
		Op{Kind: OpAdmit, NodeID: "n3", Incarnation: 0x1c0ffee},
		Op{Kind: OpForget, NodeID: "n2"},
		Op{Kind: OpAcquire, Key: "p", Owner: ownerA, LeaseMs: 5, Principal: "alice"},
	)
	b.Ops = append(b.Ops, allCoordOps()...)
	return b
}

// TestGoldenBytes: the log entry of every op kind and the snapshot of a state
// with every part (tickets, members, cluster, participants, coordination)
// are the bytes written before the coordination state machine became its
// own package (testdata/golden, written once with -update): a log entry or
// snapshot of an older server reads back identically, and this one writes
// what older servers read.
func TestGoldenBytes(t *testing.T) {
	rich := richCoordState(t)
	rich.Apply(Batch{Time: rich.LastTime(), Index: 42, Ops: []Op{takeover("node-1", "10.0.0.1:5225"),
		{Kind: OpSetCluster, Cluster: ClusterID{0xc1, 0x05}}, {Kind: OpAdmit, NodeID: "n1", Incarnation: 7}, {Kind: OpAdmit, NodeID: "n2"},
		acqBy("by-alice", ownerB, 900, "alice")}})
	b := goldenBatch()
	for name, got := range map[string][]byte{
		"every-kind.batch": AppendBatch(nil, &b),
		"rich.snapshot":    snapshotBytes(t, rich),
	} {
		path := filepath.Join("testdata", "golden", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: written\n%x\nwant\n%x", name, got, want)
		}
		// Read back and written again: the same bytes.
		var again []byte
		if filepath.Ext(name) == ".batch" {
			d, err := DecodeBatch(want)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			again = AppendBatch(nil, &d)
		} else {
			s, err := ReadSnapshot(bytes.NewReader(want))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			again = snapshotBytes(t, s)
		}
		if !bytes.Equal(again, want) {
			t.Errorf("%s: read and written again as\n%x\nwant\n%x", name, again, want)
		}
	}
	// The same state as written in format 4, before admission indexes: read
	// with every index 0 (unknown), the rest as it was.
	old, err := os.ReadFile(filepath.Join("testdata", "golden", "rich-v4.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadSnapshot(bytes.NewReader(old))
	if err != nil {
		t.Fatalf("rich-v4.snapshot: %v", err)
	}
	if s.AdmissionOf("n1") != (Admission{Incarnation: 7}) || s.AdmissionOf("n2") != (Admission{}) || !s.Admitted("n2") {
		t.Fatalf("rich-v4.snapshot: n1 %+v, n2 %+v", s.AdmissionOf("n1"), s.AdmissionOf("n2"))
	}
	s.Apply(Batch{Time: s.LastTime(), Index: 42, Ops: []Op{{Kind: OpAdmit, NodeID: "n1", Incarnation: 7}, {Kind: OpAdmit, NodeID: "n2"}}})
	if got := snapshotBytes(t, s); !bytes.Equal(got, snapshotBytes(t, rich)) {
		t.Errorf("rich-v4.snapshot with the indexes set: written\n%x\nwant\n%x", got, snapshotBytes(t, rich))
	}
}
