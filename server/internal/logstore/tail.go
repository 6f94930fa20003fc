package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

// raft-wal's segment format (v0.4.0, its README): a 32-byte file header,
// then 8-byte aligned frames, each an 8-byte header (type, three zero bytes,
// length or, for a commit frame, a CRC-32C of everything written since the
// previous commit frame, the file header included in the first) and its
// payload padded to 8 bytes. A batch of entry frames ends with a commit
// frame, and the whole batch is written and fsynced at once.
const (
	segHeaderLen   = 32
	segMagic       = 0x58eb6b0d
	frameHeaderLen = 8
	frameEntry     = 1
	frameIndex     = 2
	frameCommit    = 3
)

// tailReport is what checking the unsealed last segment found.
type tailReport struct {
	cut       int64  // offset just after the last intact commit frame (0: none)
	lastIndex uint64 // the last entry before cut (0: none)
	torn      int64  // bytes after cut that are not zero: a torn write, cut away
	// unsealAt, when not zero, is the offset of an index frame written by
	// the segment's last batch (raft-wal seals a full segment so) although
	// the metadata still has the segment unsealed: raft-wal stopped before
	// it recorded the seal. raft-wal would then refuse every append for
	// good; writing a commit frame with unsealCRC there undoes the seal and
	// keeps the batch's entries.
	unsealAt  int64
	unsealCRC uint32
}

func padded(n uint64) uint64 { return (n + frameHeaderLen - 1) &^ (frameHeaderLen - 1) }

// scanTail checks the last segment's bytes b before raft-wal reads them.
//
// raft-wal recovers the last segment by reading frames until one does not
// parse and checking only the final batch's CRC: anything after the first
// bad frame is taken to be a torn write and dropped. That is right for a
// batch that was being written when the server stopped (it was never
// fsynced, so never acknowledged), and wrong for damage to an entry that
// was acknowledged long ago and is followed by others: they would vanish
// silently, and the server would serve an older state than it promised.
//
// scanTail reads the segment the same way but checks every entry's own
// checksum and every batch's CRC, and stops at the first thing that does
// not check out. What follows that point is the torn tail only if no
// intact entry with a later index lies beyond the point, and no complete
// batch (one that ends in a commit frame) was damaged: otherwise the
// damage is before the tail and scanTail returns a damage error.
func scanTail(b []byte, info types.SegmentInfo) (tailReport, error) {
	var r tailReport
	if len(b) < segHeaderLen {
		if bytes.Count(b, []byte{0}) == len(b) {
			return r, nil
		}
		r.torn = int64(len(b))
		return r, nil
	}
	headerOK := binary.LittleEndian.Uint64(b[0:8]) == segMagic
	if headerOK {
		id, base, cdc := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[24:])
		if id != info.ID || base != info.BaseIndex || cdc != info.Codec {
			return r, fmt.Errorf("%w: the segment's header (id %d, first index %d, codec %x) does not match the store's metadata (id %d, first index %d, codec %x)",
				ErrChecksum, id, base, cdc, info.ID, info.BaseIndex, info.Codec)
		}
	}
	var (
		off      = uint64(segHeaderLen)
		crcStart uint64
		next     = info.BaseIndex // the index the next entry must have
		pending  uint64           // last entry since the last commit frame
		l        raft.Log
		stop     string // why the sequential read stopped
		indexAt  uint64 // offset of an index frame (a seal)
		indexCRC uint32 // CRC of the batch up to the index frame
	)
	size := uint64(len(b))
read:
	for headerOK && off+frameHeaderLen <= size {
		h := b[off : off+frameHeaderLen]
		if h[1] != 0 || h[2] != 0 || h[3] != 0 {
			stop = "a frame header that does not parse"
			break
		}
		n := uint64(binary.LittleEndian.Uint32(h[4:]))
		switch h[0] {
		case 0:
			if n != 0 {
				stop = "a frame header that does not parse"
			}
			break read // zeros: the end of what was written
		case frameEntry, frameIndex:
			end := off + frameHeaderLen + padded(n)
			if end > size {
				stop = "a frame that runs past the end of the file"
				break read
			}
			if h[0] == frameIndex {
				indexAt, indexCRC = off, crc32.Checksum(b[crcStart:off], castagnoli)
			}
			if h[0] == frameEntry {
				if err := decodeFrame(b[off+frameHeaderLen:off+frameHeaderLen+n], &l); err != nil {
					stop = fmt.Sprintf("entry %d: %v", next, err)
					if following := end; following+frameHeaderLen <= size && b[following] == frameCommit && isFrameHeader(b[following:]) {
						return r, fmt.Errorf("%w: entry %d at offset %d is damaged (%v) in a batch that was written whole (its commit frame follows)",
							ErrChecksum, next, off, err)
					}
					break read
				}
				if l.Index != next {
					stop = fmt.Sprintf("entry %d stored where entry %d belongs", l.Index, next)
					break read
				}
				pending = l.Index
				next++
			}
			off = end
		case frameCommit:
			if got := crc32.Checksum(b[crcStart:off], castagnoli); got != uint32(n) {
				if pending > r.lastIndex {
					// A batch that was written whole (its commit frame is
					// there) and does not match: damage, not a torn write.
					return r, fmt.Errorf("%w: the batch ending with entry %d at offset %d does not match its CRC (stored %08x, computed %08x)",
						ErrChecksum, pending, off, n, got)
				}
				stop = "a commit frame whose CRC does not match"
				break read
			}
			off += frameHeaderLen
			r.cut, r.lastIndex, crcStart = int64(off), pending, off
		default:
			stop = fmt.Sprintf("a frame of unknown type %d", h[0])
			break read
		}
	}
	if indexAt != 0 {
		if n := uint64(binary.LittleEndian.Uint32(b[indexAt+4:])); uint64(r.cut) == indexAt+frameHeaderLen+padded(n)+frameHeaderLen {
			r.unsealAt, r.unsealCRC = int64(indexAt), indexCRC
		}
	}
	// The sequential read stopped at off. Every entry after the last commit
	// frame (up to off) was never confirmed as fsynced. Beyond off, an
	// intact entry with a later index means the log goes on after damage.
	for p := (max(off, uint64(r.cut)) + frameHeaderLen - 1) &^ (frameHeaderLen - 1); p+frameHeaderLen+entryHeaderLen <= size; p += frameHeaderLen {
		if b[p] != frameEntry || !isFrameHeader(b[p:]) {
			continue
		}
		n := uint64(binary.LittleEndian.Uint32(b[p+4:]))
		if n < entryHeaderLen || p+frameHeaderLen+n > size || !bytes.Contains(b[p+frameHeaderLen:p+frameHeaderLen+min(n, 32)], entryMagic[:]) {
			continue
		}
		if decodeFrame(b[p+frameHeaderLen:p+frameHeaderLen+n], &l) == nil && l.Index > r.lastIndex {
			if stop == "" {
				stop = "the first frame that does not parse"
			}
			return r, fmt.Errorf("%w: the segment holds entry %d at offset %d after %s at offset %d: the log is damaged before its end",
				ErrChecksum, l.Index, p, stop, off)
		}
	}
	if !headerOK && r.cut == 0 && nonZero(b) {
		// Nothing was ever committed in this segment (the header is part of
		// the first commit), and nothing intact follows: a torn first write.
		r.torn = int64(len(b))
		return r, nil
	}
	if rest := b[r.cut:]; nonZero(rest) {
		r.torn = int64(len(bytes.TrimRight(rest, "\x00")))
	}
	return r, nil
}

// isFrameHeader: a known frame type followed by the three zero bytes.
func isFrameHeader(h []byte) bool {
	return len(h) >= frameHeaderLen && h[0] >= frameEntry && h[0] <= frameCommit && h[1] == 0 && h[2] == 0 && h[3] == 0
}

func nonZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

// writeIndex writes the index a sealed segment lacks (b is its content):
// the offset of every entry's frame from info.BaseIndex to info.MaxIndex,
// as raft-wal writes when it seals a full segment, in an index frame after
// the last batch written whole. It returns where the offsets start
// (SegmentInfo.IndexStart). Run again after a crash, it writes the same
// frame at the same place.
func writeIndex(path string, b []byte, info types.SegmentInfo) (uint64, error) {
	var (
		offsets []uint32
		end     uint64 // just after the last commit frame
		next    = info.BaseIndex
		l       raft.Log
	)
	size := uint64(len(b))
	for off := uint64(segHeaderLen); off+frameHeaderLen <= size; {
		h := b[off : off+frameHeaderLen]
		if !isFrameHeader(h) {
			break
		}
		n := uint64(binary.LittleEndian.Uint32(h[4:]))
		if h[0] == frameCommit {
			off += frameHeaderLen
			end = off
			continue
		}
		frameEnd := off + frameHeaderLen + padded(n)
		if frameEnd > size {
			break
		}
		if h[0] == frameEntry {
			if decodeFrame(b[off+frameHeaderLen:off+frameHeaderLen+n], &l) != nil || l.Index != next {
				break
			}
			offsets = append(offsets, uint32(off))
			next++
		}
		off = frameEnd
	}
	want := info.MaxIndex - info.BaseIndex + 1
	if info.MaxIndex < info.BaseIndex || uint64(len(offsets)) < want {
		return 0, fmt.Errorf("%w: the segment holds entries %d to %d, but the store's metadata says it ends at %d",
			ErrChecksum, info.BaseIndex, next-1, info.MaxIndex)
	}
	frame := make([]byte, frameHeaderLen+padded(want*4))
	frame[0] = frameIndex
	binary.LittleEndian.PutUint32(frame[4:], uint32(want*4))
	for i, o := range offsets[:want] {
		binary.LittleEndian.PutUint32(frame[frameHeaderLen+4*i:], o)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(frame, int64(end)); err != nil {
		_ = f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, err
	}
	return end + frameHeaderLen, f.Close()
}
