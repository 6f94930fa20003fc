// Package enc holds the binary encoding shared by the state machine's log
// entries and snapshots, so that the ticket and coordination parts write
// strings and varints alike and refuse bad input with one error.
//
// Every value has one encoding: a decoder refuses an overlong varint or a
// boolean other than 0 or 1, so that a log entry re-encodes to its bytes.
package enc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrCorrupt reports an entry or snapshot that does not decode.
var ErrCorrupt = errors.New("fsm: corrupt data")

// AppendStr appends s as a uvarint length and its bytes.
func AppendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBool appends v as one byte, 0 or 1.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Decoder reads from B. The first failure is kept in Err and every later
// read returns zero, so a caller checks Err once after a group of reads.
type Decoder struct {
	B   []byte
	Err error
}

// Fail records that the data ended before what.
func (d *Decoder) Fail(what string) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: truncated at %s", ErrCorrupt, what)
	}
}

// Failf records a corruption described by format, unless one is recorded.
func (d *Decoder) Failf(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

// U8 reads one byte.
func (d *Decoder) U8(what string) byte {
	if len(d.B) < 1 {
		d.Fail(what)
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

// U32 reads a big-endian uint32.
func (d *Decoder) U32(what string) uint32 {
	if len(d.B) < 4 {
		d.Fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(d.B)
	d.B = d.B[4:]
	return v
}

// U64 reads a big-endian uint64.
func (d *Decoder) U64(what string) uint64 {
	if len(d.B) < 8 {
		d.Fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(d.B)
	d.B = d.B[8:]
	return v
}

// Uvarint reads a minimally encoded uvarint, the only form AppendUvarint
// writes. An overlong one (a last byte of 0x00 after continuation bytes, such
// as 80 00 for 0) is corrupt: accepting it would give one batch several
// encodings.
func (d *Decoder) Uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail(what)
		return 0
	}
	if n > 1 && d.B[n-1] == 0 {
		d.Failf("overlong varint at %s", what)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Uvarint32 reads a uvarint that must fit 32 bits.
func (d *Decoder) Uvarint32(what string) uint32 {
	v := d.Uvarint(what)
	if v > math.MaxUint32 {
		d.Failf("%s %d does not fit 32 bits", what, v)
	}
	return uint32(v)
}

// Str reads a string written by AppendStr.
func (d *Decoder) Str(what string) string {
	n := d.Uvarint(what)
	if uint64(len(d.B)) < n {
		d.Fail(what)
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

// Boolean reads a byte written by AppendBool.
func (d *Decoder) Boolean(what string) bool {
	v := d.U8(what)
	if v > 1 {
		d.Failf("%s is %d, not 0 or 1", what, v)
	}
	return v == 1
}

// Fixed fills dst from the next len(dst) bytes.
func (d *Decoder) Fixed(dst []byte, what string) {
	if len(d.B) < len(dst) {
		d.Fail(what)
		return
	}
	copy(dst, d.B)
	d.B = d.B[len(dst):]
}
