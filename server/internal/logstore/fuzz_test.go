package logstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

// FuzzDecodeEntry: the entry decoder never panics, accepts only what
// appendEntry writes (it reads back to the same bytes), and the frame
// decoder (raft-wal's encoding around it) never panics either.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(appendEntry(nil, newLog(7)))
	f.Add(appendEntry(nil, &raft.Log{Index: 1, Type: raft.LogConfiguration, Extensions: []byte("x")}))
	f.Add(appendEntry(nil, &raft.Log{Index: 1<<64 - 1, Term: 3, AppendedAt: time.Unix(0, 1)}))
	f.Add([]byte("TKL1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		_ = decodeFrame(b, &l)
		if err := decodeEntry(b, &l); err != nil {
			return
		}
		if again := appendEntry(nil, &l); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, which encodes as %x", b, again)
		}
	})
}

// FuzzScanTail: checking a last segment never panics, whatever its bytes,
// and never keeps more than the file holds.
func FuzzScanTail(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, Options{SegmentSize: testSegment})
	if err != nil {
		f.Fatal(err)
	}
	for i := uint64(1); i <= 12; i += 3 {
		if err := s.StoreLogs([]*raft.Log{newLog(i), newLog(i + 1), newLog(i + 2)}); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	names := segmentsOf(dir)
	seg, err := readTrimmed(names[len(names)-1])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg)
	f.Add(seg[:len(seg)/2])
	f.Add([]byte{})
	info := types.SegmentInfo{ID: 0, BaseIndex: 1}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := scanTail(b, info)
		if err != nil {
			return
		}
		if r.cut > int64(len(b)) || r.cut+r.torn > int64(len(b)) {
			t.Fatalf("cut at %d, %d torn bytes, of a %d-byte file", r.cut, r.torn, len(b))
		}
	})
}
