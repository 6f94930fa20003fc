package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// batchFormat is the first byte of every encoded Batch, so the log format can
// change without misreading old entries.
const batchFormat = 1

// Every encoded batch and snapshot ends with a CRC-32C of the bytes before
// it. A damaged entry or backup is then refused instead of applied as some
// other valid-looking operation (a changed byte in a key would otherwise
// grant a different key).
var crcTable = crc32.MakeTable(crc32.Castagnoli)

const crcLen = 4

func appendCRC(b []byte, from int) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[from:], crcTable))
}

// checkCRC verifies the trailing checksum and returns the bytes before it.
func checkCRC(data []byte, what string) ([]byte, error) {
	if len(data) < crcLen {
		return nil, fmt.Errorf("%w: %s of %d bytes is too short for its checksum", ErrCorrupt, what, len(data))
	}
	body := data[:len(data)-crcLen]
	if want, got := binary.BigEndian.Uint32(data[len(body):]), crc32.Checksum(body, crcTable); want != got {
		return nil, fmt.Errorf("%w: %s checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, what, want, got)
	}
	return body, nil
}

// ErrCorrupt reports an entry or snapshot that does not decode.
var ErrCorrupt = enc.ErrCorrupt

// AppendBatch encodes b and appends it to dst.
func AppendBatch(dst []byte, b *Batch) []byte {
	start := len(dst)
	dst = append(dst, batchFormat)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.Time))
	dst = binary.AppendUvarint(dst, uint64(len(b.Ops)))
	for i := range b.Ops {
		op := &b.Ops[i]
		k := byte(op.Kind)
		if op.Principal != "" {
			k |= kindPrincipal
		}
		if op.Kind == OpAdmit && op.Incarnation != 0 {
			k |= kindIncarnation
		}
		dst = append(dst, k)
		switch op.Kind {
		case OpAcquire:
			dst = appendStr(dst, op.Key)
			dst = append(dst, op.Owner[:]...)
			dst = binary.BigEndian.AppendUint32(dst, op.LeaseMs)
		case OpRelease, OpExpire:
			dst = appendStr(dst, op.Key)
			dst = binary.BigEndian.AppendUint64(dst, op.Token)
		case OpTakeover:
			dst = appendStr(dst, op.NodeID)
			dst = appendStr(dst, op.Addr)
		case OpReleaseOwner:
			dst = appendStr(dst, op.Key)
			dst = append(dst, op.Owner[:]...)
		case OpSetCluster:
			dst = append(dst, op.Cluster[:]...)
		case OpAdmit, OpForget:
			dst = appendStr(dst, op.NodeID)
			if k&kindIncarnation != 0 {
				dst = binary.BigEndian.AppendUint64(dst, op.Incarnation)
			}
		default:
			if isCoordKind(op.Kind) {
				dst = coordsm.AppendOp(dst, coordsm.Kind(op.Kind), op.Coord)
			}
		}
		if op.Principal != "" {
			dst = appendStr(dst, op.Principal)
		}
	}
	return appendCRC(dst, start)
}

// kindPrincipal, set in an op's kind byte, means the op's fields are
// followed by the principal's name. Ops without a principal are encoded as
// before authorization existed, so a cluster without principals writes the
// same log entries as older servers.
const kindPrincipal = 0x80

// kindIncarnation, set in an OpAdmit's kind byte, means the node id is
// followed by the participant's incarnation (u64, not zero). An admit
// without one is encoded as older servers wrote it.
const kindIncarnation = 0x40

var appendStr = enc.AppendStr

func readOwner(d *enc.Decoder, o *Owner) { d.Fixed(o[:], "owner") }

func readCluster(d *enc.Decoder, c *ClusterID) { d.Fixed(c[:], "cluster id") }

// DecodeBatch decodes an entry written by AppendBatch.
func DecodeBatch(data []byte) (Batch, error) {
	body, err := checkCRC(data, "log entry")
	if err != nil {
		return Batch{}, err
	}
	d := enc.Decoder{B: body}
	if f := d.U8("format"); d.Err == nil && f != batchFormat {
		return Batch{}, fmt.Errorf("%w: unknown batch format %d", ErrCorrupt, f)
	}
	b := Batch{Time: int64(d.U64("time"))}
	n := d.Uvarint("op count")
	if n > uint64(len(d.B)) { // every op takes at least one byte
		return Batch{}, fmt.Errorf("%w: %d ops in %d bytes", ErrCorrupt, n, len(d.B))
	}
	// Grown as ops decode rather than sized from the count, so that a bogus
	// count costs nothing before the data runs out.
	b.Ops = make([]Op, 0, min(n, 256))
	for i := uint64(0); i < n; i++ {
		b.Ops = append(b.Ops, Op{})
		op := &b.Ops[len(b.Ops)-1]
		kind := d.U8("op kind")
		op.Kind = OpKind(kind &^ (kindPrincipal | kindIncarnation))
		if kind&kindIncarnation != 0 && op.Kind != OpAdmit && d.Err == nil {
			return Batch{}, fmt.Errorf("%w: op %d of kind %d has the incarnation flag", ErrCorrupt, i, op.Kind)
		}
		switch op.Kind {
		case OpAcquire:
			op.Key = d.Str("key")
			readOwner(&d, &op.Owner)
			op.LeaseMs = d.U32("lease")
		case OpRelease, OpExpire:
			op.Key = d.Str("key")
			op.Token = d.U64("token")
		case OpTakeover:
			op.NodeID = d.Str("node id")
			op.Addr = d.Str("address")
		case OpReleaseOwner:
			op.Key = d.Str("key")
			readOwner(&d, &op.Owner)
		case OpSetCluster:
			readCluster(&d, &op.Cluster)
		case OpAdmit, OpForget:
			op.NodeID = d.Str("node id")
			if kind&kindIncarnation != 0 {
				// Zero would re-encode without the flag: one batch, two encodings.
				if op.Incarnation = d.U64("incarnation"); op.Incarnation == 0 && d.Err == nil {
					return Batch{}, fmt.Errorf("%w: op %d has the incarnation flag and incarnation 0", ErrCorrupt, i)
				}
			}
		default:
			if isCoordKind(op.Kind) {
				op.Coord = coordsm.DecodeOp(&d, coordsm.Kind(op.Kind))
			} else if d.Err == nil {
				return Batch{}, fmt.Errorf("%w: unknown op kind %d", ErrCorrupt, op.Kind)
			}
		}
		if kind&kindPrincipal != 0 {
			// Empty would re-encode without the flag: one batch, two encodings.
			if op.Principal = d.Str("principal"); op.Principal == "" && d.Err == nil {
				return Batch{}, fmt.Errorf("%w: op %d has the principal flag and an empty principal", ErrCorrupt, i)
			}
		}
		if d.Err != nil {
			return Batch{}, d.Err
		}
	}
	if d.Err != nil {
		return Batch{}, d.Err
	}
	if len(d.B) != 0 {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.B))
	}
	return b, nil
}

// A snapshot starts with "TKSN" and a format version. Version 2 adds the
// cluster ID and its participants after the holds; version 1 is still read.
var snapshotMagic = [4]byte{'T', 'K', 'S', 'N'}

// Version 3 adds each hold's principal (who it was granted to) after the
// hold's other fields; versions 1 and 2 are read with no principals.
// Version 4 adds each participant's incarnation (u64, 0 if unknown) after
// its node id; older versions are read with incarnation 0. Version 5 adds
// the log index of each participant's admission (u64, 0 if unknown) after
// its incarnation; older versions are read with index 0.
const snapshotVersion = 5

// ErrSnapshotVersion reports a snapshot written by a newer ticketd.
var ErrSnapshotVersion = errors.New("fsm: snapshot format is newer than this ticketd")

// WriteSnapshot writes the whole state to w in a compact binary form. Members
// and holds are written in key order, so equal states give identical bytes
// (two backups of one state have one checksum).
func (s *State) WriteSnapshot(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	var crc uint32
	var buf []byte
	buf = append(buf, snapshotMagic[:]...)
	buf = append(buf, snapshotVersion)
	buf = binary.BigEndian.AppendUint64(buf, s.lastToken)
	buf = binary.BigEndian.AppendUint64(buf, uint64(s.lastTime))
	buf = binary.AppendUvarint(buf, uint64(len(s.members)))
	for _, m := range s.Members() {
		buf = appendStr(buf, m[0])
		buf = appendStr(buf, m[1])
	}
	buf = binary.AppendUvarint(buf, uint64(len(s.holds)))
	keys := make([]string, 0, len(s.holds))
	for k := range s.holds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h := s.holds[k]
		buf = appendStr(buf, k)
		buf = binary.BigEndian.AppendUint64(buf, h.Token)
		buf = append(buf, h.Owner[:]...)
		buf = binary.BigEndian.AppendUint32(buf, h.LeaseMs)
		buf = binary.BigEndian.AppendUint64(buf, uint64(h.GrantedAt))
		buf = binary.BigEndian.AppendUint64(buf, uint64(h.ExpiresAt))
		buf = appendStr(buf, h.Principal)
		if len(buf) > 64<<10 {
			crc = crc32.Update(crc, crcTable, buf)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, s.cluster[:]...)
	parts := s.Participants()
	buf = binary.AppendUvarint(buf, uint64(len(parts)))
	for _, id := range parts {
		buf = appendStr(buf, id)
		a := s.admitted[id]
		buf = binary.BigEndian.AppendUint64(buf, a.Incarnation)
		buf = binary.BigEndian.AppendUint64(buf, a.Index)
	}
	// The coordination section stays last: it is read only when present.
	buf = s.coord.AppendSnapshot(buf)
	crc = crc32.Update(crc, crcTable, buf)
	buf = binary.BigEndian.AppendUint32(buf, crc)
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadSnapshot reads a state written by WriteSnapshot.
func ReadSnapshot(r io.Reader) (*State, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if data, err = checkCRC(data, "snapshot"); err != nil {
		return nil, err
	}
	d := enc.Decoder{B: data}
	if len(d.B) < len(snapshotMagic)+1 || [4]byte(d.B[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a Ticketing snapshot (it does not start with TKSN)", ErrCorrupt)
	}
	version := d.B[4]
	if version == 0 {
		return nil, fmt.Errorf("%w: snapshot format version 0 does not exist", ErrCorrupt)
	}
	if version > snapshotVersion {
		return nil, fmt.Errorf("%w: it is format version %d, this ticketd reads versions 1 to %d: use the ticketd version that wrote it, or a newer one", ErrSnapshotVersion, version, snapshotVersion)
	}
	d.B = d.B[5:]
	s := New()
	s.lastToken = d.U64("last token")
	s.lastTime = int64(d.U64("last time"))
	nm := d.Uvarint("member count")
	for i := uint64(0); i < nm && d.Err == nil; i++ {
		id := d.Str("member id")
		s.members[id] = d.Str("member address")
	}
	nh := d.Uvarint("hold count")
	if d.Err != nil {
		// Before the size check: after an error nh is read from wherever the
		// decoder stopped, and preallocating a map of that size can exhaust memory.
		return nil, d.Err
	}
	if nh > uint64(len(d.B)) {
		return nil, fmt.Errorf("%w: %d holds in %d bytes", ErrCorrupt, nh, len(d.B))
	}
	s.holds = make(map[string]Hold, nh)
	s.order = newKeyOrder()
	for i := uint64(0); i < nh && d.Err == nil; i++ {
		k := d.Str("key")
		var h Hold
		h.Token = d.U64("token")
		readOwner(&d, &h.Owner)
		h.LeaseMs = d.U32("lease")
		h.GrantedAt = int64(d.U64("granted at"))
		h.ExpiresAt = int64(d.U64("expires at"))
		if version >= 3 {
			h.Principal = d.Str("principal")
		}
		s.holds[k] = h
		s.order.ReplaceOrInsert(k)
	}
	if version >= 2 && d.Err == nil {
		readCluster(&d, &s.cluster)
		np := d.Uvarint("participant count")
		if d.Err == nil && np > uint64(len(d.B)) {
			return nil, fmt.Errorf("%w: %d participants in %d bytes", ErrCorrupt, np, len(d.B))
		}
		for i := uint64(0); i < np && d.Err == nil; i++ {
			id := d.Str("participant")
			var a Admission
			if version >= 4 {
				a.Incarnation = d.U64("participant incarnation")
			}
			if version >= 5 {
				a.Index = d.U64("participant admission index")
			}
			s.admitted[id] = a
		}
	}
	if d.Err == nil && len(d.B) > 0 && d.B[0] == coordsm.SectionTag {
		s.coord.ReadSnapshot(&d, s.lastToken)
	}
	if d.Err != nil {
		return nil, d.Err
	}
	if len(d.B) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in snapshot", ErrCorrupt, len(d.B))
	}
	s.reindex()
	return s, nil
}
