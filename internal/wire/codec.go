package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Append encodes f and appends the whole frame, length prefix included, to
// dst. It does not validate ranges; callers encode what they mean to send.
func Append(dst []byte, f *Frame) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(f.Type))
	switch f.Type {
	case TypeHello:
		dst = putU16(dst, f.Version)
		dst = append(dst, f.Flags)
		dst = putStr(dst, f.Text)
	case TypeReady:
		dst = putU16(dst, f.Version)
		dst = append(dst, f.Flags)
		dst = putU32(dst, f.Interval)
		dst = putU32(dst, f.Count)
		dst = putStr(dst, f.Text)
		if f.Flags&ReadyClusterID != 0 {
			dst = append(dst, f.ClusterID[:]...)
		}
		if f.Flags&ReadyIdlePings != 0 {
			dst = putU32(dst, f.IdleInterval)
		}
	case TypeAcquire:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Owner[:]...)
		dst = append(dst, f.Wait, f.Lease)
		dst = putStr(dst, f.Key)
	case TypeCancel:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Owner[:]...)
	case TypeRelease:
		dst = putU32(dst, f.ID)
		dst = putU64(dst, f.Token)
		dst = putStr(dst, f.Key)
	case TypeDescribe:
		dst = putU32(dst, f.ID)
		dst = putStr(dst, f.Key)
	case TypeReleaseOwner:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Owner[:]...)
		dst = putStr(dst, f.Key)
	case TypeAdmin:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Text...)
	case TypeAdminReply:
		dst = putU32(dst, f.ID)
		dst = putU16(dst, f.Code)
		dst = append(dst, f.Text...)
	case TypeGranted:
		dst = putU32(dst, f.ID)
		dst = putU64(dst, f.Token)
		dst = putU32(dst, f.LeaseMs)
		dst = putU32(dst, f.QueuedMs)
	case TypeNotAcquired:
		dst = putU32(dst, f.ID)
		dst = putU32(dst, f.QueuedMs)
	case TypeQueued:
		dst = putU32(dst, f.ID)
		dst = putU32(dst, f.Count)
	case TypeCancelled, TypeReleased, TypeNotHeld:
		dst = putU32(dst, f.ID)
	case TypeCapacity:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Reason)
	case TypeForbidden:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Reason)
	case TypeNotLeader:
		dst = putStr(dst, f.Text)
	case TypeError:
		dst = putU16(dst, f.Code)
		dst = putStr(dst, f.Text)
	case TypeInfo:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Flags)
		dst = putU64(dst, f.Token)
		dst = append(dst, f.Owner[:]...)
		dst = putU32(dst, f.Remaining)
		dst = putU32(dst, f.LeaseMs)
		dst = putU32(dst, f.Count)
	case TypePing, TypePong:
		dst = putU64(dst, f.Nonce)
	case TypeCoord:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Op)
		dst = append(dst, f.Text...)
	case TypeCoordReply:
		dst = putU32(dst, f.ID)
		dst = append(dst, f.Op)
		dst = putU16(dst, f.Code)
		dst = append(dst, f.Text...)
	}
	be.PutUint32(dst[start:], uint32(len(dst)-start-HeaderLen))
	return dst
}

// decoder walks a payload; the first short read sets bad and every later read
// returns zero, so Decode checks once at the end.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u16() uint16 {
	if len(d.b) < 2 {
		d.bad = true
		return 0
	}
	v := be.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.bad = true
		return 0
	}
	v := be.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.bad = true
		return 0
	}
	v := be.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) owner(o *Owner) { d.fixed(o[:]) }

// fixed fills dst with the next len(dst) bytes.
func (d *decoder) fixed(dst []byte) {
	if len(d.b) < len(dst) {
		d.bad = true
		return
	}
	copy(dst, d.b)
	d.b = d.b[len(dst):]
}

func (d *decoder) str() []byte {
	n := int(d.u16())
	if len(d.b) < n {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) rest() []byte {
	v := d.b
	d.b = nil
	return v
}

// Decode parses one frame body (type byte and payload, without the length
// prefix) into f. Byte slices in f alias body. Errors are *Error with
// CodeMalformedFrame or CodeUnknownFrame.
func Decode(body []byte, f *Frame) error {
	if len(body) == 0 {
		return errorf(CodeMalformedFrame, "empty frame: a frame has at least its type byte")
	}
	*f = Frame{Type: Type(body[0])}
	d := decoder{b: body[1:]}
	switch f.Type {
	case TypeHello:
		f.Version = d.u16()
		f.Flags = d.u8()
		f.Text = d.str()
	case TypeReady:
		f.Version = d.u16()
		f.Flags = d.u8()
		f.Interval = d.u32()
		f.Count = d.u32()
		f.Text = d.str()
		if f.Flags&ReadyClusterID != 0 {
			d.fixed(f.ClusterID[:])
		}
		if f.Flags&ReadyIdlePings != 0 {
			f.IdleInterval = d.u32()
		}
	case TypeAcquire:
		f.ID = d.u32()
		d.owner(&f.Owner)
		f.Wait = d.u8()
		f.Lease = d.u8()
		f.Key = d.str()
	case TypeCancel:
		f.ID = d.u32()
		d.owner(&f.Owner)
	case TypeRelease:
		f.ID = d.u32()
		f.Token = d.u64()
		f.Key = d.str()
	case TypeDescribe:
		f.ID = d.u32()
		f.Key = d.str()
	case TypeReleaseOwner:
		f.ID = d.u32()
		d.owner(&f.Owner)
		f.Key = d.str()
	case TypeAdmin:
		f.ID = d.u32()
		f.Text = d.rest()
	case TypeAdminReply:
		f.ID = d.u32()
		f.Code = d.u16()
		f.Text = d.rest()
	case TypeGranted:
		f.ID = d.u32()
		f.Token = d.u64()
		f.LeaseMs = d.u32()
		f.QueuedMs = d.u32()
	case TypeNotAcquired:
		f.ID = d.u32()
		f.QueuedMs = d.u32()
	case TypeQueued:
		f.ID = d.u32()
		f.Count = d.u32()
	case TypeCancelled, TypeReleased, TypeNotHeld:
		f.ID = d.u32()
	case TypeCapacity:
		f.ID = d.u32()
		f.Reason = d.u8()
	case TypeForbidden:
		f.ID = d.u32()
		f.Reason = d.u8()
	case TypeNotLeader:
		f.Text = d.str()
	case TypeError:
		f.Code = d.u16()
		f.Text = d.str()
	case TypeInfo:
		f.ID = d.u32()
		f.Flags = d.u8()
		f.Token = d.u64()
		d.owner(&f.Owner)
		f.Remaining = d.u32()
		f.LeaseMs = d.u32()
		f.Count = d.u32()
	case TypePing, TypePong:
		f.Nonce = d.u64()
	case TypeCoord:
		f.ID = d.u32()
		f.Op = d.u8()
		f.Text = d.rest()
	case TypeCoordReply:
		f.ID = d.u32()
		f.Op = d.u8()
		f.Code = d.u16()
		f.Text = d.rest()
	default:
		return errorf(CodeUnknownFrame, "unknown frame type %s", f.Type)
	}
	if d.bad {
		return errorf(CodeMalformedFrame, "frame %s is shorter than its layout", f.Type)
	}
	if len(d.b) != 0 {
		return errorf(CodeMalformedFrame, "frame %s has %d trailing bytes", f.Type, len(d.b))
	}
	return nil
}

// Validate checks the semantic ranges of a client request: key length, lease
// and hello token length (all CodeInvalidArgument). It does not check the
// hello's version: that is CodeUnsupportedVersion, the server's to check.
// The server answers a failure with an E frame.
func Validate(f *Frame) error {
	switch f.Type {
	case TypeHello:
		if len(f.Text) > MaxToken {
			return errorf(CodeInvalidArgument, "hello token is %d bytes, at most %d are allowed", len(f.Text), MaxToken)
		}
	case TypeAcquire:
		if f.Lease < MinLease || f.Lease > MaxLease {
			return errorf(CodeInvalidArgument, "lease %d s is outside %d..%d s", f.Lease, MinLease, MaxLease)
		}
		return validKey(f.Key)
	case TypeRelease, TypeDescribe, TypeReleaseOwner:
		return validKey(f.Key)
	case TypeCoord:
		var c Coord
		return DecodeCoord(f, &c)
	}
	return nil
}

func validKey(k []byte) error {
	if len(k) == 0 || len(k) > MaxKey {
		return errorf(CodeInvalidArgument, "key is %d bytes, it must be 1..%d", len(k), MaxKey)
	}
	return nil
}

// Reader reads frames from a byte stream with one reusable buffer.
type Reader struct {
	r   *bufio.Reader
	buf []byte
	max int
	// coordMax, when set, bounds K and Z frames instead of max.
	coordMax int
	// replies, set by AllowCoordReplies (possibly while Next runs), lets
	// T frames be up to MaxCoordFrame long.
	replies atomic.Bool
	hdr     [HeaderLen]byte // a field, not a local: passed to io.ReadFull, a local escapes and costs an allocation per frame
}

// NewReader returns a Reader that accepts frames up to MaxFrame.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 4<<10), max: MaxFrame}
}

// Next reads and decodes the next frame into f. Byte slices in f stay valid
// until the following call. I/O errors are returned as they are (io.EOF at a
// clean frame boundary, io.ErrUnexpectedEOF inside a frame); protocol errors
// are *Error. A frame longer than MaxFrame is refused before its payload is
// read.
func (r *Reader) Next(f *Frame) error {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return err
	}
	n := be.Uint32(r.hdr[:])
	if n == 0 {
		return errorf(CodeMalformedFrame, "frame length 0: a frame has at least its type byte")
	}
	if n > uint32(r.max) && !(n <= uint32(r.coordMax) && r.coordNext()) && !(n <= MaxCoordFrame && r.replies.Load() && r.replyNext()) {
		if r.coordMax > 0 && n <= MaxCoordSkip && r.requestNext() {
			return r.skipCoord(n)
		}
		if r.coordMax > 0 {
			return errorf(CodeFrameTooLarge, "frame of %d bytes exceeds the maximum of %d (%d for K and Z frames)", n, r.max, r.coordMax)
		}
		return errorf(CodeFrameTooLarge, "frame of %d bytes exceeds the maximum of %d", n, r.max)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n, max(int(n), 512))
	}
	body := r.buf[:n]
	if _, err := io.ReadFull(r.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return Decode(body, f)
}

// AllowCoordFrames lets K and Z frames be up to MaxCoordFrame long (other
// frames keep MaxFrame). It is for a side that serves coordination requests:
// without it every frame is bounded by MaxFrame and the Reader never reads
// past an oversized frame's length prefix.
func (r *Reader) AllowCoordFrames() { r.coordMax = MaxCoordFrame }

// coordNext reports whether the frame whose length prefix was just read is a
// K or Z frame, which may be longer than MaxFrame. It peeks at the type byte
// only, so a refused frame's payload is still never read.
func (r *Reader) coordNext() bool {
	b, err := r.r.Peek(1)
	return err == nil && (Type(b[0]) == TypeCoord || Type(b[0]) == TypeCoordReply)
}

// AllowCoordReplies lets T frames be up to MaxCoordFrame long from now on
// (other frames keep MaxFrame). It is for a client, once it has sent a
// coordination request: until then an oversized frame is refused on its
// length prefix alone, as before. It may be called while Next runs.
func (r *Reader) AllowCoordReplies() { r.replies.Store(true) }

// replyNext reports whether the frame whose length prefix was just read is
// a T frame (its type byte only is peeked).
func (r *Reader) replyNext() bool {
	b, err := r.r.Peek(1)
	return err == nil && Type(b[0]) == TypeCoordReply
}

// requestNext reports whether the oversized frame whose length prefix was
// just read is a K request (its type byte only is peeked).
func (r *Reader) requestNext() bool {
	b, err := r.r.Peek(1)
	return err == nil && Type(b[0]) == TypeCoord
}

// skipCoord reads the id and sub-op of an oversized K request of n bytes
// and discards the rest, so that the connection stays usable and the
// request alone can be refused.
func (r *Reader) skipCoord(n uint32) error {
	var head [6]byte // type, id, sub-op
	if n < uint32(len(head)) {
		return errorf(CodeMalformedFrame, "K frame of %d bytes is shorter than its id and sub-op", n)
	}
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		return io.ErrUnexpectedEOF
	}
	if _, err := io.CopyN(io.Discard, r.r, int64(n)-int64(len(head))); err != nil {
		return io.ErrUnexpectedEOF
	}
	return &OversizedRequestError{ID: be.Uint32(head[1:5]), Op: head[5], Len: n}
}

// OversizedRequestError is a K request longer than MaxCoordFrame (and at
// most MaxCoordSkip) that the Reader skipped: the connection is still in
// step, and the receiver answers the request alone BAD_REQUEST.
type OversizedRequestError struct {
	ID  uint32
	Op  uint8
	Len uint32
}

func (e *OversizedRequestError) Error() string {
	return fmt.Sprintf("coordination request %d (sub-op %d) of %d bytes exceeds the largest coordination frame, %d bytes: data (semaphore, owner) is at most %d bytes, paths and names %d",
		e.ID, e.Op, e.Len, MaxCoordFrame, MaxCoordData, MaxCoordName)
}

// Buffered reports how many bytes are already buffered, so a writer can
// decide whether more requests are coming before it flushes.
func (r *Reader) Buffered() int { return r.r.Buffered() }
