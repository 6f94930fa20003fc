package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// entryMagic starts every encoded entry, so that a scan for entries after
// damaged data (see scanTail) can tell one from other bytes cheaply.
var entryMagic = [4]byte{'T', 'K', 'L', '1'}

// entryHeaderLen: magic, CRC-32C, index, term, type, appended-at, data
// length, extensions length.
const entryHeaderLen = 4 + 4 + 8 + 8 + 1 + 8 + 4 + 4

// maxEntryLen bounds what a decoder accepts (raft-wal's own limit).
const maxEntryLen = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrChecksum is what decoding an entry whose bytes do not match its
// checksum returns; ErrEncoding an entry that is not one at all.
var (
	ErrChecksum = errors.New("log entry checksum mismatch")
	ErrEncoding = errors.New("not a log entry")
)

// Every entry is stored sealed: its whole encoding (appendEntry, with a
// CRC-32C over all its other bytes) is the Data of the entry raft-wal
// stores, and it is checked whenever the entry is read. raft-wal itself
// checks a CRC only for the last batch of its last segment, at open.
// (raft-wal v0.4.0 takes a codec of its own, but writes every new segment
// with its built-in codec's ID and then refuses to open it again.)

// seal is what raft-wal stores for l.
func seal(l *raft.Log) *raft.Log {
	return &raft.Log{Index: l.Index, Term: l.Term, Type: l.Type, Data: appendEntry(nil, l)}
}

// unseal decodes what raft-wal stored at index into l.
func unseal(stored *raft.Log, index uint64, l *raft.Log) error {
	if err := decodeEntry(stored.Data, l); err != nil {
		return err
	}
	if l.Index != index || stored.Index != index {
		return fmt.Errorf("%w: entry %d is stored as entry %d", ErrChecksum, index, l.Index)
	}
	return nil
}

// decodeFrame decodes an entry frame's payload as raft-wal wrote it.
func decodeFrame(payload []byte, l *raft.Log) (err error) {
	var stored raft.Log
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrEncoding, r)
		}
	}()
	if err := (&wal.BinaryCodec{}).Decode(payload, &stored); err != nil {
		return fmt.Errorf("%w: %v", ErrEncoding, err)
	}
	return unseal(&stored, stored.Index, l)
}

// appendEntry appends l's encoding to b.
func appendEntry(b []byte, l *raft.Log) []byte {
	start := len(b)
	b = append(b, entryMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, 0) // checksum, filled in below
	b = binary.LittleEndian.AppendUint64(b, l.Index)
	b = binary.LittleEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(at))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Extensions)))
	b = append(b, l.Data...)
	b = append(b, l.Extensions...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+8:], castagnoli))
	return b
}

// decodeEntry decodes exactly one entry, which must fill b. Data and
// Extensions are copies: raft-wal reuses its read buffers.
func decodeEntry(b []byte, l *raft.Log) error {
	if len(b) < entryHeaderLen {
		return fmt.Errorf("%w: %d bytes, shorter than an entry's header", ErrEncoding, len(b))
	}
	if [4]byte(b[:4]) != entryMagic {
		return fmt.Errorf("%w: no entry marker", ErrEncoding)
	}
	dataLen := uint64(binary.LittleEndian.Uint32(b[33:]))
	extLen := uint64(binary.LittleEndian.Uint32(b[37:]))
	if want := entryHeaderLen + dataLen + extLen; want != uint64(len(b)) || want > maxEntryLen {
		return fmt.Errorf("%w: %d bytes, but its lengths say %d", ErrEncoding, len(b), want)
	}
	if got, want := crc32.Checksum(b[8:], castagnoli), binary.LittleEndian.Uint32(b[4:]); got != want {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	l.Index = binary.LittleEndian.Uint64(b[8:])
	l.Term = binary.LittleEndian.Uint64(b[16:])
	l.Type = raft.LogType(b[24])
	l.AppendedAt = time.Time{}
	if at := int64(binary.LittleEndian.Uint64(b[25:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := b[entryHeaderLen:]
	l.Data = copyOrNil(rest[:dataLen])
	l.Extensions = copyOrNil(rest[dataLen:])
	return nil
}

func copyOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
