package fsm

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestPrincipalSnapshot: a hold's principal is kept in snapshots (format 3).
func TestPrincipalSnapshot(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1000, Ops: []Op{acqBy("orders/1", ownerA, 5000, "orders"), acq("free-for-all", ownerB, 5000)}})
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if v := buf.Bytes()[4]; v != snapshotVersion {
		t.Fatalf("snapshot format %d, want %d", v, snapshotVersion)
	}
	r, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := r.Get("orders/1"); h.Principal != "orders" {
		t.Fatalf("principal after a snapshot: %q", h.Principal)
	}
	if h, _ := r.Get("free-for-all"); h.Principal != "" {
		t.Fatalf("no principal became %q", h.Principal)
	}
	if got := r.Apply(Batch{Time: 1100, Ops: []Op{relBy("orders/1", 1, "billing")}}); got[0].Status != Forbidden {
		t.Fatalf("release by another principal after a restore: %v", got[0].Status)
	}
}

// oldSnapshot builds a snapshot of format 1 or 2 by hand, as older servers
// wrote it: one hold, no principal.
func oldSnapshot(version byte) []byte {
	b := []byte{'T', 'K', 'S', 'N', version}
	b = binary.BigEndian.AppendUint64(b, 7)    // last token
	b = binary.BigEndian.AppendUint64(b, 5000) // last time
	b = binary.AppendUvarint(b, 0)             // members
	b = binary.AppendUvarint(b, 1)             // holds
	b = appendStr(b, "k")
	b = binary.BigEndian.AppendUint64(b, 7)
	b = append(b, ownerA[:]...)
	b = binary.BigEndian.AppendUint32(b, 3000)
	b = binary.BigEndian.AppendUint64(b, 4000)
	b = binary.BigEndian.AppendUint64(b, 7000)
	if version >= 2 {
		b = append(b, make([]byte, 16)...) // cluster id
		b = binary.AppendUvarint(b, 0)     // participants
	}
	return withCRC(b)
}

// TestSnapshotReadsOldFormats: snapshots of formats 1 and 2 (before
// principals) still load; their holds have no principal, so any principal
// allowed on the key may release them.
func TestSnapshotReadsOldFormats(t *testing.T) {
	for _, v := range []byte{1, 2} {
		s, err := ReadSnapshot(bytes.NewReader(oldSnapshot(v)))
		if err != nil {
			t.Fatalf("format %d: %v", v, err)
		}
		h, ok := s.Get("k")
		if !ok || h.Token != 7 || h.Owner != ownerA || h.LeaseMs != 3000 || h.GrantedAt != 4000 || h.ExpiresAt != 7000 || h.Principal != "" || s.LastToken() != 7 {
			t.Fatalf("format %d: hold %+v %v", v, h, ok)
		}
		if got := s.Apply(Batch{Time: 6000, Ops: []Op{relBy("k", 7, "billing")}}); got[0].Status != Released {
			t.Fatalf("format %d: release by a principal of a hold without one: %v", v, got[0].Status)
		}
	}
}

// TestPrincipalSnapshotFuzzSeed keeps a snapshot with principals in the
// FuzzReadSnapshot corpus (go test -run TestPrincipalSnapshotFuzzSeed -update).
func TestPrincipalSnapshotFuzzSeed(t *testing.T) {
	s := New()
	s.Apply(Batch{Time: 1000, Ops: []Op{acqBy("orders/1", ownerA, 5000, "orders"), acq("x", ownerB, 1), acqBy("é", ownerC, 9, "b")}})
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "fuzz", "FuzzReadSnapshot", "principals")
	want := corpusFile(buf.Bytes())
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s missing or stale: run go test ./internal/fsm -run TestPrincipalSnapshotFuzzSeed -update", path)
	}
}
