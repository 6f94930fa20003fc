package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestAdmitIncarnation: an OpAdmit carries the participant's data-directory
// incarnation through the log encoding and through a snapshot; an admit
// without one is encoded as older servers wrote it; a new cluster ID
// forgets the incarnations with the participants.
func TestAdmitIncarnation(t *testing.T) {
	b := Batch{Time: 1, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{7}},
		{Kind: OpAdmit, NodeID: "n1", Incarnation: 0xfeedface12345678}, {Kind: OpAdmit, NodeID: "n2"}}}
	enc := AppendBatch(nil, &b)
	got, err := DecodeBatch(enc)
	if err != nil || got.Ops[1].Incarnation != 0xfeedface12345678 || got.Ops[2].Incarnation != 0 {
		t.Fatalf("batch round trip: %+v, %v", got, err)
	}
	// Without an incarnation the admit is the old encoding: kind, node id.
	old := AppendBatch(nil, &Batch{Time: 1, Ops: []Op{{Kind: OpAdmit, NodeID: "n2"}}})
	if want := withCRC(append(binary.BigEndian.AppendUint64([]byte{batchFormat}, 1), 1, byte(OpAdmit), 2, 'n', '2')); !bytes.Equal(old, want) {
		t.Fatalf("admit without incarnation: %x, want the old encoding %x", old, want)
	}
	for name, data := range map[string][]byte{
		"flag on another kind": withCRC(append(binary.BigEndian.AppendUint64([]byte{batchFormat}, 1), 1, byte(OpForget)|kindIncarnation, 2, 'n', '2', 0, 0, 0, 0, 0, 0, 0, 1)),
		"flag with zero":       withCRC(append(binary.BigEndian.AppendUint64([]byte{batchFormat}, 1), 1, byte(OpAdmit)|kindIncarnation, 2, 'n', '2', 0, 0, 0, 0, 0, 0, 0, 0)),
		"truncated":            withCRC(append(binary.BigEndian.AppendUint64([]byte{batchFormat}, 1), 1, byte(OpAdmit)|kindIncarnation, 2, 'n', '2', 0, 0, 1)),
	} {
		if _, err := DecodeBatch(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}

	s := New()
	s.Apply(got)
	if s.Incarnation("n1") != 0xfeedface12345678 || !s.Admitted("n2") || s.Incarnation("n2") != 0 || s.Incarnation("n9") != 0 {
		t.Fatalf("applied: n1 %x, n2 %v %x", s.Incarnation("n1"), s.Admitted("n2"), s.Incarnation("n2"))
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Incarnation("n1") != 0xfeedface12345678 || !r.Admitted("n2") || r.Incarnation("n2") != 0 {
		t.Fatalf("after a snapshot: n1 %x, n2 %v %x", r.Incarnation("n1"), r.Admitted("n2"), r.Incarnation("n2"))
	}
	if c := s.Clone(); c.Incarnation("n1") != 0xfeedface12345678 {
		t.Fatalf("clone lost the incarnation: %x", c.Incarnation("n1"))
	}
	s.Apply(Batch{Time: 2, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{8}}}})
	if s.Admitted("n1") || s.Incarnation("n1") != 0 {
		t.Fatal("a new cluster ID must forget the participants and their incarnations")
	}
}

// TestSnapshotFormat3ParticipantsWithoutIncarnation: a format 3 snapshot
// (before incarnations) loads its participants with incarnation 0 (unknown).
func TestSnapshotFormat3ParticipantsWithoutIncarnation(t *testing.T) {
	b := []byte{'T', 'K', 'S', 'N', 3}
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.AppendUvarint(b, 0) // members
	b = binary.AppendUvarint(b, 0) // holds
	b = append(b, 5)               // cluster id
	b = append(b, make([]byte, 15)...)
	b = binary.AppendUvarint(b, 2)
	b = appendStr(b, "n1")
	b = appendStr(b, "n2")
	s, err := ReadSnapshot(bytes.NewReader(withCRC(b)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster() != (ClusterID{5}) || !s.Admitted("n1") || !s.Admitted("n2") || s.Incarnation("n1") != 0 {
		t.Fatalf("format 3: cluster %x, participants %v", s.Cluster(), s.Participants())
	}
}

// TestAdmissionIndex: an admission records its entry's log index, a later
// admission of the same node id replaces it, and the index survives a
// snapshot and a clone; a new cluster ID forgets it with the participant.
func TestAdmissionIndex(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1, Index: 3, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{7}}, {Kind: OpAdmit, NodeID: "n1", Incarnation: 11}}})
	s.Apply(Batch{Time: 2, Index: 9, Ops: []Op{{Kind: OpAdmit, NodeID: "n2", Incarnation: 21}}})
	s.Apply(Batch{Time: 3, Index: 14, Ops: []Op{{Kind: OpForget, NodeID: "n2"}}})
	s.Apply(Batch{Time: 4, Index: 15, Ops: []Op{{Kind: OpAdmit, NodeID: "n2", Incarnation: 22}}})
	want := map[string]Admission{"n1": {11, 3}, "n2": {22, 15}}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*State{"applied": s, "snapshot": r, "clone": s.Clone()} {
		for id, a := range want {
			if got := st.AdmissionOf(id); got != a {
				t.Errorf("%s: %s recorded as %+v, want %+v", name, id, got, a)
			}
		}
	}
	s.Apply(Batch{Time: 5, Index: 20, Ops: []Op{{Kind: OpSetCluster, Cluster: ClusterID{8}}}})
	if s.AdmissionOf("n1") != (Admission{}) {
		t.Fatalf("a new cluster ID must forget the admissions: n1 %+v", s.AdmissionOf("n1"))
	}
}
