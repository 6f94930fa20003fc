package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testSegment is small, so that a few hundred entries fill several sealed
// segments.
const testSegment = 16 << 10

// payload is entry i's data: recognisable in the files, and checkable.
func payload(i uint64) []byte {
	return []byte(fmt.Sprintf("entry-%08d|%s", i, strings.Repeat("x", int(i%50))))
}

func newLog(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/100, Type: raft.LogCommand, Data: payload(i), AppendedAt: time.Unix(1700000000, int64(i))}
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{SegmentSize: testSegment})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return s
}

// appendBatches appends entries from..to in batches of size n; each batch
// is one StoreLogs (one write and fsync).
func appendBatches(t *testing.T, s *Store, from, to uint64, n int) {
	t.Helper()
	for i := from; i <= to; i += uint64(n) {
		var logs []*raft.Log
		for j := i; j <= to && j < i+uint64(n); j++ {
			logs = append(logs, newLog(j))
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatalf("store %d..: %v", i, err)
		}
	}
}

// checkEntries: the store holds exactly entries first..last, intact.
func checkEntries(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("holds %d..%d, want %d..%d", f, l, first, last)
	}
	var got raft.Log
	for i := first; i <= last; i++ {
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		want := newLog(i)
		if got.Index != i || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d differs: %+v", i, got)
		}
	}
}

// segments lists the store's segment files, oldest first; the last is the
// unsealed tail.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(names)
	return names
}

// offsetOf is the offset of entry i's data in file.
func offsetOf(t *testing.T, file string, i uint64) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(b, []byte(fmt.Sprintf("entry-%08d|", i)))
	if off < 0 {
		t.Fatalf("entry %d is not in %s", i, file)
	}
	return int64(off)
}

// frameOf is the offset of the frame that holds entry i in file.
func frameOf(t *testing.T, file string, i uint64) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for p := (offsetOf(t, file, i) - entryHeaderLen) &^ (frameHeaderLen - 1); p >= segHeaderLen; p -= frameHeaderLen {
		if isFrameHeader(b[p:]) && b[p] == frameEntry {
			return p
		}
	}
	t.Fatalf("no frame header before entry %d", i)
	return 0
}

func flipByte(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// wantDamaged: Open refuses with ErrDamaged naming file.
func wantDamaged(t *testing.T, dir, file string) {
	t.Helper()
	s, err := Open(dir, Options{SegmentSize: testSegment})
	if err == nil {
		last, _ := s.LastIndex()
		s.Close()
		t.Fatalf("opened a damaged store (last entry %d); want it refused naming %s", last, filepath.Base(file))
	}
	var d *DamageError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &d) {
		t.Fatalf("refused, but not as damage: %v", err)
	}
	if d.Path != file {
		t.Fatalf("refused naming %s, want %s: %v", d.Path, file, err)
	}
	t.Logf("refused: %v", err)
}

func TestReopenKeepsEntriesAndStableValues(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 600, 7)
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := len(segments(t, dir)); n < 3 {
		t.Fatalf("%d segments; the test wants sealed ones", n)
	}
	s = open(t, dir)
	defer s.Close()
	checkEntries(t, s, 1, 600)
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("CurrentTerm %d %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("LastVoteCand %q %v", v, err)
	}
	if s.Cut != (TailCut{}) {
		t.Fatalf("cut %+v from an intact store", s.Cut)
	}
}

// A torn tail (the batch being written when the server stopped) is cut back
// to the last batch written whole; nothing of it is served, and the store
// goes on from there.
// crash closes the store as a stop would leave it: the high-water mark
// not recorded since the last time.
func (s *Store) crash() {
	close(s.stopMark)
	<-s.markDone
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.closeFiles()
}

// openUnmarked opens a store that records no high-water mark on its own.
func openUnmarked(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{SegmentSize: testSegment, markEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeThenStop appends 1..mid and closes (the mark is at mid), then
// appends mid+1..last in batches of n and stops without recording them.
func writeThenStop(t *testing.T, dir string, mid, last uint64, n int) {
	t.Helper()
	s := open(t, dir)
	appendBatches(t, s, 1, mid, n)
	s.Close()
	s = openUnmarked(t, dir)
	appendBatches(t, s, mid+1, last, n)
	s.crash()
}

func TestTruncatedTailIsCutToTheLastWholeBatch(t *testing.T) {
	for _, into := range []int64{1, 8, 20, 60} { // bytes into the last batch that survive
		t.Run(fmt.Sprint(into), func(t *testing.T) {
			dir := t.TempDir()
			writeThenStop(t, dir, 50, 100, 10)
			tail := segments(t, dir)[len(segments(t, dir))-1]
			start := frameOf(t, tail, 91) // the last batch is entries 91..100
			if err := os.Truncate(tail, start+into); err != nil {
				t.Fatal(err)
			}
			s := open(t, dir)
			checkEntries(t, s, 1, 90)
			// Bytes counts up to the last byte that is not zero.
			if s.Cut.LastIndex != 90 || s.Cut.Bytes <= 0 || s.Cut.Bytes > into || s.Cut.File != tail {
				t.Fatalf("cut %+v, want up to %d bytes after entry 90 of %s", s.Cut, into, tail)
			}
			appendBatches(t, s, 91, 120, 4)
			s.Close()
			s = open(t, dir)
			defer s.Close()
			checkEntries(t, s, 1, 120)
		})
	}
}

// A whole batch that was written with its commit frame but was never synced
// may be missing entirely (the file ends at the previous batch): the store
// opens with what is there.
func TestTailEndingAtABatchOpens(t *testing.T) {
	dir := t.TempDir()
	writeThenStop(t, dir, 20, 50, 10)
	tail := segments(t, dir)[len(segments(t, dir))-1]
	if err := os.Truncate(tail, frameOf(t, tail, 41)); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	defer s.Close()
	checkEntries(t, s, 1, 40)
}

// A tail cut off after it was synced and recorded (a truncated file, not a
// torn write): refused, although it looks like a stop before the batch was
// written.
func TestTruncatedAfterSyncIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 100, 10)
	s.Close()
	tail := segments(t, dir)[len(segments(t, dir))-1]
	if err := os.Truncate(tail, frameOf(t, tail, 91)); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, dir, tail)
}

// Damage to an entry acknowledged long ago in the last segment, followed by
// intact ones: raft-wal alone would take it for a torn tail and drop every
// entry after it. Refused.
func TestDamageBeforeTheTailIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 60, 5)
	s.Close()
	tail := segments(t, dir)[len(segments(t, dir))-1]
	flipByte(t, tail, offsetOf(t, tail, 23)+3)
	wantDamaged(t, dir, tail)
}

// Damage to the frame header of an entry before the tail (its length):
// raft-wal stops reading there. Refused.
func TestDamagedFrameHeaderBeforeTheTailIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 60, 5)
	s.Close()
	tail := segments(t, dir)[len(segments(t, dir))-1]
	flipByte(t, tail, frameOf(t, tail, 23)+5)
	wantDamaged(t, dir, tail)
}

// The last batch, written whole (its commit frame is there), with one of
// its entries damaged: not a torn write. Refused.
func TestDamagedLastWholeBatchIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 60, 5)
	s.Close()
	tail := segments(t, dir)[len(segments(t, dir))-1]
	flipByte(t, tail, offsetOf(t, tail, 60)+2)
	wantDamaged(t, dir, tail)
}

func TestFlippedByteInASealedSegmentIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 600, 7)
	s.Close()
	sealed := segments(t, dir)[1]
	b, _ := os.ReadFile(sealed)
	i := bytes.Index(b, []byte("entry-"))
	var idx uint64
	fmt.Sscanf(string(b[i:i+14]), "entry-%08d", &idx)
	flipByte(t, sealed, offsetOf(t, sealed, idx+3)+10)
	wantDamaged(t, dir, sealed)
}

func TestMissingSegmentIsRefused(t *testing.T) {
	for _, which := range []string{"sealed", "tail"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			appendBatches(t, s, 1, 600, 7)
			s.Close()
			segs := segments(t, dir)
			gone := segs[1]
			if which == "tail" {
				gone = segs[len(segs)-1]
			}
			if err := os.Remove(gone); err != nil {
				t.Fatal(err)
			}
			wantDamaged(t, dir, gone)
		})
	}
}

func TestMissingMetadataIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 100, 7)
	s.Close()
	meta := filepath.Join(dir, MetaFile)
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, dir, meta)
}

func TestTruncatedMetadataIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 100, 7)
	s.Close()
	meta := filepath.Join(dir, MetaFile)
	if err := os.Truncate(meta, 4096); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, dir, meta)
}

// Deleting a prefix (after a snapshot) and a suffix (a follower's
// conflicting entries) keeps the rest, across a reopen.
func TestDeleteRangeAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 600, 7)
	if err := s.DeleteRange(1, 250); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(551, 600); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, s, 551, 570, 3)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	f, _ := s.FirstIndex()
	checkEntries(t, s, f, 570)
	if f > 251 {
		t.Fatalf("first entry %d, want at most 251", f)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, l := range []*raft.Log{
		newLog(7),
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte{1, 2}, Extensions: []byte("ext")},
		{Index: 2},
	} {
		var got raft.Log
		if err := decodeEntry(appendEntry(nil, l), &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != l.Index || got.Term != l.Term || got.Type != l.Type || !bytes.Equal(got.Data, l.Data) ||
			!bytes.Equal(got.Extensions, l.Extensions) || !got.AppendedAt.Equal(l.AppendedAt) {
			t.Fatalf("round trip: %+v, want %+v", got, l)
		}
	}
	b := appendEntry(nil, newLog(7))
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		var got raft.Log
		if err := decodeEntry(c, &got); err == nil {
			t.Fatalf("decoded an entry with byte %d changed", i)
		}
	}
}

// A suffix deleted inside the last segment: raft-wal seals that segment
// without an index (and then cannot read it after a restart); the store
// writes the index at open.
func TestSuffixDeletedInTheLastSegmentSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	appendBatches(t, s, 1, 30, 3)
	if err := s.DeleteRange(25, 30); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, s, 25, 40, 3)
	s.Close()
	s = open(t, dir)
	checkEntries(t, s, 1, 40)
	appendBatches(t, s, 41, 50, 3)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	checkEntries(t, s, 1, 50)
}
