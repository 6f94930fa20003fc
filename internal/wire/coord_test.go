package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
)

// fullCoord sets every field, so that each layout takes the ones it has.
func fullCoord() *Coord {
	return &Coord{Path: []byte("/p"), Name: []byte("n"), Key: []byte("k"), Desc: []byte("d"), Data: []byte("data"), Message: []byte("m"),
		Session: 1, SeqNo: 2, TimeoutMs: 3, Limit: 4, Count: 5, OrderID: 6,
		SelfCheckMs: 7, GraceMs: 8, MaxSessions: 9, MaxSemaphores: 10, MaxWaiters: 11, ReadMode: 1, AttachMode: 2,
		Flags: 1, Reason: 3, Sessions: 12, Semaphores: 13, Waiters: 14,
		Owners:  []CoordHolder{{OrderID: 1, Session: 2, Count: 3, TimeoutMs: 4, Data: []byte("o")}},
		Queue:   []CoordHolder{{OrderID: 5, Session: 6, Count: 7, TimeoutMs: math.MaxUint64}, {OrderID: 8, Data: []byte("q")}},
		Version: 20, After: 15, SessionList: []CoordSession{{Session: 16, SeqNo: 17, TimeoutMs: 18, Flags: CoordFlagAttached, Desc: []byte("s")}, {Session: 19}}}
}

// coordSamples is one frame of every sub-op in both directions, and a
// non-zero status.
func coordSamples() []*Frame {
	var out []*Frame
	for _, l := range coordLayouts {
		if l.request != nil {
			out = append(out, CoordFrame(false, 9, l.op, 0, fullCoord()))
			if coordSessionOp(l.op) {
				out = append(out, CoordFrame(false, 9, l.op|CoordForSession, 0, fullCoord()))
			}
		}
		out = append(out, CoordFrame(true, 9, l.op, 0, fullCoord()), CoordFrame(true, 9, l.op, CoordNotFound, fullCoord()))
	}
	return out
}

func TestCoordBodiesRoundTrip(t *testing.T) {
	for _, f := range coordSamples() {
		raw := Append(nil, f)
		var got Frame
		if err := NewReader(bytes.NewReader(raw)).Next(&got); err != nil {
			t.Fatalf("%s op %d: %v", f.Type, f.Op, err)
		}
		var c Coord
		if err := DecodeCoord(&got, &c); err != nil {
			t.Fatalf("%s op %d status %d: %v", f.Type, f.Op, f.Code, err)
		}
		if again := AppendCoordBody(nil, got.Type == TypeCoordReply, got.Op, got.Code, &c); !bytes.Equal(again, f.Text) {
			t.Fatalf("%s op %d: body re-encodes differently", f.Type, f.Op)
		}
		// Every byte is needed, and no byte more is accepted.
		for n := 0; n < len(f.Text); n++ {
			cut := *f
			cut.Text = f.Text[:n]
			if err := DecodeCoord(&cut, &c); !isCode(err, CodeMalformedFrame) {
				t.Fatalf("%s op %d cut to %d of %d: %v", f.Type, f.Op, n, len(f.Text), err)
			}
		}
		long := *f
		long.Text = append(bytes.Clone(f.Text), 0)
		if err := DecodeCoord(&long, &c); !isCode(err, CodeMalformedFrame) {
			t.Fatalf("%s op %d with a trailing byte: %v", f.Type, f.Op, err)
		}
	}
}

func isCode(err error, c Code) bool {
	var we *Error
	return errors.As(err, &we) && we.Code == c
}

func TestCoordUnknownOpsAndFlags(t *testing.T) {
	known := map[uint8]bool{}
	for _, l := range coordLayouts {
		known[l.op] = true
	}
	for op := 0; op < 256; op++ {
		var c Coord
		errK := DecodeCoord(&Frame{Type: TypeCoord, Op: uint8(op)}, &c)
		errZ := DecodeCoord(&Frame{Type: TypeCoordReply, Op: uint8(op), Code: 1}, &c)
		forSession := uint8(op)&CoordForSession != 0 && coordSessionOp(uint8(op)&^CoordForSession)
		if !known[uint8(op)] && !isCode(errZ, CodeUnknownFrame) {
			t.Fatalf("unknown T sub-op %d: %v", op, errZ)
		}
		if !known[uint8(op)] && !forSession && !isCode(errK, CodeUnknownFrame) {
			t.Fatalf("unknown K sub-op %d: %v", op, errK)
		}
	}
	for _, c := range []struct {
		reply bool
		op    uint8
		flags uint8
	}{{false, CoordDeleteSemaphore, 2}, {false, CoordAcquire, 2}, {false, CoordDescribeSemaphore, 32},
		{true, CoordAcquire, 2}, {true, CoordRelease, 2}, {true, CoordDescribeSemaphore, 4}, {true, CoordChanged, 4}} {
		f := CoordFrame(c.reply, 1, c.op, 0, &Coord{Flags: c.flags})
		var d Coord
		if err := DecodeCoord(f, &d); !isCode(err, CodeMalformedFrame) {
			t.Errorf("op %d reply %v flags %#x: %v, want malformed", c.op, c.reply, c.flags, err)
		}
	}
	if err := DecodeCoord(&Frame{Type: TypeAcquire}, new(Coord)); !isCode(err, CodeMalformedFrame) {
		t.Errorf("DecodeCoord of an A frame: %v", err)
	}
	// A huge holder count is refused before anything is allocated for it.
	f := &Frame{Type: TypeCoordReply, Op: CoordDescribeSemaphore, Text: append(make([]byte, 8+8+1+4), 0xff, 0xff, 0xff, 0xff)}
	if err := DecodeCoord(f, new(Coord)); !isCode(err, CodeMalformedFrame) {
		t.Errorf("holder count 2^32-1 in a short body: %v", err)
	}
}

// TestCoordFrameSizes: by default K and T frames are bounded by MaxFrame
// like all others; with AllowCoordFrames a K or T frame up to MaxCoordFrame
// is read (1 MiB of data fits), one byte more is refused, other types keep
// MaxFrame, and an oversized frame's payload is still never read.
func TestCoordFrameSizes(t *testing.T) {
	data := bytes.Repeat([]byte{'d'}, MaxCoordData)
	f := CoordFrame(false, 1, CoordUpdateSemaphore, 0, &Coord{Name: bytes.Repeat([]byte{'n'}, 1024), Data: data})
	raw := Append(nil, f)
	if n := be.Uint32(raw); n > MaxCoordFrame {
		t.Fatalf("a 1 MiB update with a 1024-byte name is %d bytes, over MaxCoordFrame %d", n, MaxCoordFrame)
	}
	var got Frame
	if err := NewReader(bytes.NewReader(raw)).Next(&got); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("default Reader, 1 MiB K frame: %v, want too large", err)
	}
	allowing := func(b []byte) *Reader {
		r := NewReader(bytes.NewReader(b))
		r.AllowCoordFrames()
		return r
	}
	if err := allowing(raw).Next(&got); err != nil {
		t.Fatal(err)
	}
	var c Coord
	if err := DecodeCoord(&got, &c); err != nil || !bytes.Equal(c.Data, data) {
		t.Fatalf("1 MiB data: %v", err)
	}
	exact := Append(nil, &Frame{Type: TypeCoordReply, Op: CoordCreateNode, Code: 1, Text: make([]byte, MaxCoordFrame-8)})
	if n := be.Uint32(exact); n != MaxCoordFrame {
		t.Fatalf("length %d", n)
	}
	if err := allowing(exact).Next(&got); err != nil {
		t.Fatalf("T of exactly MaxCoordFrame: %v", err)
	}
	over := Append(nil, &Frame{Type: TypeCoordReply, Text: make([]byte, MaxCoordFrame-7)})
	if err := allowing(over).Next(&got); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("T of MaxCoordFrame+1: %v", err)
	}
	admin := Append(nil, &Frame{Type: TypeAdmin, Text: make([]byte, MaxFrame-4)})
	if err := allowing(admin).Next(&got); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("J of MaxFrame+1: %v", err)
	}
	// Only the type byte is read to tell K and T from the rest (and to
	// tell a K request that can be skipped, up to MaxCoordSkip).
	for _, n := range []uint32{MaxFrame + 1, MaxCoordFrame, MaxCoordFrame + 1, MaxCoordSkip, MaxCoordSkip + 1, math.MaxUint32} {
		hdr := be.AppendUint32(nil, n)
		if n <= MaxCoordSkip {
			hdr = append(hdr, byte(TypeAcquire))
		}
		src := &headerOnlyReader{t: t, hdr: hdr}
		r := NewReader(src)
		r.AllowCoordFrames()
		if err := r.Next(new(Frame)); !isCode(err, CodeFrameTooLarge) || src.over != 0 || len(src.hdr) != 0 {
			t.Errorf("length %d: %v, %d reads past the header, %d header bytes unread", n, err, src.over, len(src.hdr))
		}
	}
}

// TestOversizedRequestSkipped: a K request longer than MaxCoordFrame (up
// to MaxCoordSkip) is read past whole and reported with its id and sub-op,
// and the next frame reads normally; an oversized T, or a K beyond
// MaxCoordSkip, still ends the stream.
func TestOversizedRequestSkipped(t *testing.T) {
	big := Append(nil, CoordFrame(false, 42, CoordAcquire, 0, &Coord{Name: []byte("s"), Count: 1, Data: make([]byte, 2<<20)}))
	next := Append(nil, &Frame{Type: TypePing, Nonce: 7})
	r := NewReader(bytes.NewReader(append(big, next...)))
	r.AllowCoordFrames()
	var f Frame
	var e *OversizedRequestError
	if err := r.Next(&f); !errors.As(err, &e) || e.ID != 42 || e.Op != CoordAcquire || e.Len != be.Uint32(big) {
		t.Fatalf("oversized K: %v", err)
	}
	if err := r.Next(&f); err != nil || f.Type != TypePing || f.Nonce != 7 {
		t.Fatalf("the frame after the skipped one: %v %+v", err, f)
	}
	reply := Append(nil, CoordFrame(true, 42, CoordDescribeSemaphore, 0, &Coord{Limit: 1, Data: make([]byte, 2<<20)}))
	r = NewReader(bytes.NewReader(reply))
	r.AllowCoordFrames()
	if err := r.Next(&f); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("oversized T: %v", err)
	}
	r = NewReader(bytes.NewReader(big))
	if err := r.Next(&f); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("oversized K without AllowCoordFrames: %v", err)
	}
}

// FuzzDecodeCoord: DecodeCoord never panics, fails only with a decoding
// code, and a body that decodes re-encodes to exactly its bytes.
func FuzzDecodeCoord(f *testing.F) {
	for _, fr := range coordSamples() {
		f.Add(fr.Type == TypeCoordReply, fr.Op, fr.Code, fr.Text)
	}
	f.Fuzz(func(t *testing.T, reply bool, op uint8, status uint16, body []byte) {
		fr := &Frame{Type: TypeCoord, Op: op, Text: body}
		if reply {
			fr.Type, fr.Code = TypeCoordReply, status
		}
		var c Coord
		if err := DecodeCoord(fr, &c); err != nil {
			if !isCode(err, CodeMalformedFrame) && !isCode(err, CodeUnknownFrame) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if enc := AppendCoordBody(nil, reply, op, fr.Code, &c); !bytes.Equal(enc, body) {
			t.Fatalf("not canonical:\nread    %x\nencoded %x", body, enc)
		}
	})
}

// A listed session may set only the attached bit.
func TestCoordListSessionsUndefinedFlag(t *testing.T) {
	f := CoordFrame(true, 1, CoordListSessions, 0, &Coord{SessionList: []CoordSession{{Session: 1, Flags: CoordFlagAttached}, {Session: 2, Flags: 2}}})
	var c Coord
	if err := DecodeCoord(f, &c); !isCode(err, CodeMalformedFrame) {
		t.Fatalf("session flag bit 1: %v, want malformed", err)
	}
}

// FuzzReaderCoordFrames: a Reader that serves coordination never panics on
// any byte stream, and fails only with a protocol error, an oversized
// request it skipped (then goes on), or the end of the stream.
func FuzzReaderCoordFrames(f *testing.F) {
	big := Append(nil, CoordFrame(false, 9, CoordUpdateSemaphore, 0, &Coord{Name: []byte("s"), Data: make([]byte, MaxCoordFrame)}))
	f.Add(big[:64])
	f.Add(append(big, Append(nil, &Frame{Type: TypePing, Nonce: 1})...))
	for _, fr := range coordSamples() {
		f.Add(Append(nil, fr))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		r.AllowCoordFrames()
		var fr Frame
		for i := 0; i < 64; i++ {
			err := r.Next(&fr)
			var we *Error
			var big *OversizedRequestError
			switch {
			case err == nil, errors.As(err, &big):
				continue
			case errors.As(err, &we), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				return
			default:
				t.Fatalf("error %T %v", err, err)
			}
		}
	})
}

// TestCoordForSession: a session request sent with CoordForSession starts
// with its session (Attach: its body unchanged); other sub-ops and answers
// do not take the bit.
func TestCoordForSession(t *testing.T) {
	plain := CoordFrame(false, 1, CoordRelease, 0, &Coord{Name: []byte("s")})
	named := CoordFrame(false, 1, CoordRelease|CoordForSession, 0, &Coord{Session: 0x0102030405060708, Name: []byte("s")})
	if want := append([]byte{1, 2, 3, 4, 5, 6, 7, 8}, plain.Text...); !bytes.Equal(named.Text, want) {
		t.Fatalf("release for session 0x0102030405060708: body %x, want %x", named.Text, want)
	}
	var c Coord
	if err := DecodeCoord(named, &c); err != nil || c.Session != 0x0102030405060708 || string(c.Name) != "s" {
		t.Fatalf("decoded %+v, %v", c, err)
	}
	attach := &Coord{Path: []byte("/n"), Session: 9, SeqNo: 2, TimeoutMs: 1000}
	if a, b := CoordFrame(false, 1, CoordAttach, 0, attach), CoordFrame(false, 1, CoordAttach|CoordForSession, 0, attach); !bytes.Equal(a.Text, b.Text) {
		t.Fatalf("attach for session: body %x, want the plain attach's %x", b.Text, a.Text)
	}
	for _, f := range []*Frame{
		{Type: TypeCoord, Op: CoordCreateNode | CoordForSession, Text: CoordFrame(false, 1, CoordCreateNode, 0, &Coord{Path: []byte("/n")}).Text},
		{Type: TypeCoord, Op: CoordListSessions | CoordForSession},
		{Type: TypeCoordReply, Op: CoordRelease | CoordForSession, Text: []byte{1}},
	} {
		if err := DecodeCoord(f, &c); !isCode(err, CodeUnknownFrame) {
			t.Errorf("%s sub-op %#x: %v, want unknown", f.Type, f.Op, err)
		}
	}
}

// TestAllowCoordReplies: a client's Reader refuses a frame over MaxFrame
// on its length prefix alone (without waiting for its type byte) until
// AllowCoordReplies; then a T up to MaxCoordFrame is read, and any other
// oversized frame is still refused.
func TestAllowCoordReplies(t *testing.T) {
	big := Append(nil, CoordFrame(true, 1, CoordDescribeSemaphore, 0, &Coord{Data: bytes.Repeat([]byte("d"), MaxFrame)}))
	prefixOnly := big[:HeaderLen]
	var f Frame
	if err := NewReader(bytes.NewReader(prefixOnly)).Next(&f); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("oversized prefix before AllowCoordReplies: %v, want frame too large at once", err)
	}
	r := NewReader(bytes.NewReader(big))
	r.AllowCoordReplies()
	if err := r.Next(&f); err != nil || f.Type != TypeCoordReply || len(f.Text) <= MaxFrame {
		t.Fatalf("large T after AllowCoordReplies: %s %d bytes, %v", f.Type, len(f.Text), err)
	}
	other := append([]byte(nil), big...)
	other[HeaderLen] = byte(TypeInfo)
	r = NewReader(bytes.NewReader(other))
	r.AllowCoordReplies()
	if err := r.Next(&f); !isCode(err, CodeFrameTooLarge) {
		t.Fatalf("oversized I after AllowCoordReplies: %v, want frame too large", err)
	}
}

// TestCoordRequests: the list servers and SDKs check themselves against
// holds every request sub-op, in number order, and no notification.
func TestCoordRequests(t *testing.T) {
	want := []uint8{CoordCreateNode, CoordAlterNode, CoordDropNode, CoordDescribeNode, CoordAttach, CoordStop,
		CoordCreateSemaphore, CoordUpdateSemaphore, CoordDeleteSemaphore, CoordAcquire, CoordRelease,
		CoordDescribeSemaphore, CoordListSessions}
	got := CoordRequests()
	if len(got) != len(want) {
		t.Fatalf("requests %v, want the sub-ops %v", got, want)
	}
	for i, r := range got {
		if r.Op != want[i] || r.Name == "" {
			t.Errorf("request %d: %+v, want sub-op %d with its name", i, r, want[i])
		}
	}
}

// TestCoordRequestHas: the requests that carry a node path and those that
// carry a semaphore name, as receivers check them.
func TestCoordRequestHas(t *testing.T) {
	withPath := []uint8{CoordCreateNode, CoordAlterNode, CoordDropNode, CoordDescribeNode, CoordAttach, CoordListSessions}
	withName := []uint8{CoordCreateSemaphore, CoordUpdateSemaphore, CoordDeleteSemaphore, CoordAcquire, CoordRelease, CoordDescribeSemaphore}
	for _, r := range CoordRequests() {
		if got, want := CoordRequestHas(r.Op, "path"), slices.Contains(withPath, r.Op); got != want {
			t.Errorf("%s has a path: %v, want %v", r.Name, got, want)
		}
		if got, want := CoordRequestHas(r.Op, "name"), slices.Contains(withName, r.Op); got != want {
			t.Errorf("%s has a name: %v, want %v", r.Name, got, want)
		}
	}
	if CoordRequestHas(CoordQueued, "order_id") || CoordRequestHas(99, "path") {
		t.Error("a notification or an unknown sub-op has request fields")
	}
}
