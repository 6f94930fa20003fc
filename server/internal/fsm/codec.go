package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
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
var ErrCorrupt = errors.New("fsm: corrupt data")

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
				dst = appendCoordOp(dst, op.Kind, op.Coord)
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

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

type dec struct {
	b            []byte
	err          error
	coordVersion uint8 // of the coordination section being read
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated at %s", ErrCorrupt, what)
	}
}

func (d *dec) u8(what string) byte {
	if len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) u32(what string) uint32 {
	if len(d.b) < 4 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) u64(what string) uint64 {
	if len(d.b) < 8 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// uvarint reads a minimally encoded uvarint, the only form AppendUvarint
// writes. An overlong one (a last byte of 0x00 after continuation bytes, such
// as 80 00 for 0) is corrupt: accepting it would give one batch several
// encodings.
func (d *dec) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: overlong varint at %s", ErrCorrupt, what)
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) str(what string) string {
	n := d.uvarint(what)
	if uint64(len(d.b)) < n {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) owner(o *Owner) {
	if len(d.b) < len(o) {
		d.fail("owner")
		return
	}
	copy(o[:], d.b)
	d.b = d.b[len(o):]
}

func (d *dec) cluster(c *ClusterID) {
	if len(d.b) < len(c) {
		d.fail("cluster id")
		return
	}
	copy(c[:], d.b)
	d.b = d.b[len(c):]
}

// DecodeBatch decodes an entry written by AppendBatch.
func DecodeBatch(data []byte) (Batch, error) {
	body, err := checkCRC(data, "log entry")
	if err != nil {
		return Batch{}, err
	}
	d := dec{b: body}
	if f := d.u8("format"); d.err == nil && f != batchFormat {
		return Batch{}, fmt.Errorf("%w: unknown batch format %d", ErrCorrupt, f)
	}
	b := Batch{Time: int64(d.u64("time"))}
	n := d.uvarint("op count")
	if n > uint64(len(d.b)) { // every op takes at least one byte
		return Batch{}, fmt.Errorf("%w: %d ops in %d bytes", ErrCorrupt, n, len(d.b))
	}
	// Grown as ops decode rather than sized from the count, so that a bogus
	// count costs nothing before the data runs out.
	b.Ops = make([]Op, 0, min(n, 256))
	for i := uint64(0); i < n; i++ {
		b.Ops = append(b.Ops, Op{})
		op := &b.Ops[len(b.Ops)-1]
		kind := d.u8("op kind")
		op.Kind = OpKind(kind &^ (kindPrincipal | kindIncarnation))
		if kind&kindIncarnation != 0 && op.Kind != OpAdmit && d.err == nil {
			return Batch{}, fmt.Errorf("%w: op %d of kind %d has the incarnation flag", ErrCorrupt, i, op.Kind)
		}
		switch op.Kind {
		case OpAcquire:
			op.Key = d.str("key")
			d.owner(&op.Owner)
			op.LeaseMs = d.u32("lease")
		case OpRelease, OpExpire:
			op.Key = d.str("key")
			op.Token = d.u64("token")
		case OpTakeover:
			op.NodeID = d.str("node id")
			op.Addr = d.str("address")
		case OpReleaseOwner:
			op.Key = d.str("key")
			d.owner(&op.Owner)
		case OpSetCluster:
			d.cluster(&op.Cluster)
		case OpAdmit, OpForget:
			op.NodeID = d.str("node id")
			if kind&kindIncarnation != 0 {
				// Zero would re-encode without the flag: one batch, two encodings.
				if op.Incarnation = d.u64("incarnation"); op.Incarnation == 0 && d.err == nil {
					return Batch{}, fmt.Errorf("%w: op %d has the incarnation flag and incarnation 0", ErrCorrupt, i)
				}
			}
		default:
			if isCoordKind(op.Kind) {
				op.Coord = d.coordOp(op.Kind)
			} else if d.err == nil {
				return Batch{}, fmt.Errorf("%w: unknown op kind %d", ErrCorrupt, op.Kind)
			}
		}
		if kind&kindPrincipal != 0 {
			// Empty would re-encode without the flag: one batch, two encodings.
			if op.Principal = d.str("principal"); op.Principal == "" && d.err == nil {
				return Batch{}, fmt.Errorf("%w: op %d has the principal flag and an empty principal", ErrCorrupt, i)
			}
		}
		if d.err != nil {
			return Batch{}, d.err
		}
	}
	if d.err != nil {
		return Batch{}, d.err
	}
	if len(d.b) != 0 {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return b, nil
}

// A snapshot starts with "TKSN" and a format version. Version 2 adds the
// cluster ID and its participants after the holds; version 1 is still read.
var snapshotMagic = [4]byte{'T', 'K', 'S', 'N'}

// Version 3 adds each hold's principal (who it was granted to) after the
// hold's other fields; versions 1 and 2 are read with no principals.
// Version 4 adds each participant's incarnation (u64, 0 if unknown) after
// its node id; older versions are read with incarnation 0.
const snapshotVersion = 4

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
		buf = binary.BigEndian.AppendUint64(buf, s.admitted[id])
	}
	// The coordination section stays last: it is read only when present.
	buf = s.coord.appendSnapshot(buf)
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
	d := dec{b: data}
	if len(d.b) < len(snapshotMagic)+1 || [4]byte(d.b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a Ticketing snapshot (it does not start with TKSN)", ErrCorrupt)
	}
	version := d.b[4]
	if version == 0 {
		return nil, fmt.Errorf("%w: snapshot format version 0 does not exist", ErrCorrupt)
	}
	if version > snapshotVersion {
		return nil, fmt.Errorf("%w: it is format version %d, this ticketd reads versions 1 to %d: use the ticketd version that wrote it, or a newer one", ErrSnapshotVersion, version, snapshotVersion)
	}
	d.b = d.b[5:]
	s := New()
	s.lastToken = d.u64("last token")
	s.lastTime = int64(d.u64("last time"))
	nm := d.uvarint("member count")
	for i := uint64(0); i < nm && d.err == nil; i++ {
		id := d.str("member id")
		s.members[id] = d.str("member address")
	}
	nh := d.uvarint("hold count")
	if d.err != nil {
		// Before the size check: after an error nh is read from wherever the
		// decoder stopped, and preallocating a map of that size can exhaust memory.
		return nil, d.err
	}
	if nh > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d holds in %d bytes", ErrCorrupt, nh, len(d.b))
	}
	s.holds = make(map[string]Hold, nh)
	s.order = newKeyOrder()
	for i := uint64(0); i < nh && d.err == nil; i++ {
		k := d.str("key")
		var h Hold
		h.Token = d.u64("token")
		d.owner(&h.Owner)
		h.LeaseMs = d.u32("lease")
		h.GrantedAt = int64(d.u64("granted at"))
		h.ExpiresAt = int64(d.u64("expires at"))
		if version >= 3 {
			h.Principal = d.str("principal")
		}
		s.holds[k] = h
		s.order.ReplaceOrInsert(k)
	}
	if version >= 2 && d.err == nil {
		d.cluster(&s.cluster)
		np := d.uvarint("participant count")
		if d.err == nil && np > uint64(len(d.b)) {
			return nil, fmt.Errorf("%w: %d participants in %d bytes", ErrCorrupt, np, len(d.b))
		}
		for i := uint64(0); i < np && d.err == nil; i++ {
			id := d.str("participant")
			var inc uint64
			if version >= 4 {
				inc = d.u64("participant incarnation")
			}
			s.admitted[id] = inc
		}
	}
	if d.err == nil && len(d.b) > 0 && d.b[0] == coordSectionTag {
		d.readCoordSection(s)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in snapshot", ErrCorrupt, len(d.b))
	}
	s.reindex()
	return s, nil
}
