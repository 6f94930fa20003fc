package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// randomFrame fills every field of t's layout with random values.
func randomFrame(rng *rand.Rand, t Type) *Frame {
	f := &Frame{Type: t}
	for _, fs := range layoutOf(t).fields {
		if !fs.present(f) { // an optional field whose flag bit the random flags left out
			continue
		}
		switch p := fieldPtr(f, fs.name).(type) {
		case *uint8:
			*p = uint8(rng.Uint32())
		case *uint16:
			*p = uint16(rng.Uint32())
		case *uint32:
			*p = rng.Uint32()
		case *uint64:
			*p = rng.Uint64()
		case *Owner:
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
		case *[]byte:
			n := rng.IntN(40)
			if rng.IntN(10) == 0 {
				n = rng.IntN(3000)
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			*p = b
		}
	}
	return f
}

// sampleFrames returns, for every type, the vectors' frames and a few random
// ones, including frames with every variable field empty.
func sampleFrames() []*Frame {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []*Frame
	for _, g := range genVectors() {
		if g.frame != nil {
			out = append(out, g.frame)
		}
	}
	for i := range layouts {
		out = append(out, &Frame{Type: layouts[i].typ})
		for range 5 {
			out = append(out, randomFrame(rng, layouts[i].typ))
		}
	}
	return out
}

func wantCode(t *testing.T, err error, code Code) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T), want *wire.Error with code %d", err, err, code)
	}
	if we.Code != code {
		t.Fatalf("code %d (%v), want %d (%v)", we.Code, we, code, code)
	}
}

func TestLayoutsCoverEveryType(t *testing.T) {
	known := 0
	for b := 0; b < 256; b++ {
		err := Decode([]byte{byte(b)}, new(Frame))
		var we *Error
		if errors.As(err, &we) && we.Code == CodeUnknownFrame {
			continue
		}
		known++
		if layoutOf(Type(b)) == nil {
			t.Errorf("Decode knows type %s, the layout table does not", Type(b))
		}
	}
	if known != len(layouts) {
		t.Errorf("Decode knows %d types, the layout table has %d", known, len(layouts))
	}
}

func TestRoundTrip(t *testing.T) {
	frames := sampleFrames()
	var stream []byte
	for _, f := range frames {
		start := len(stream)
		stream = Append(stream, f)
		enc := stream[start:]
		if got := layoutEncode(f); !bytes.Equal(enc, got) {
			t.Fatalf("%s: Append =\n%x\nthe layout table gives\n%x", f.Type, enc, got)
		}
		if n := be.Uint32(enc); int(n) != len(enc)-HeaderLen {
			t.Fatalf("%s: length prefix %d, frame has %d bytes after it", f.Type, n, len(enc)-HeaderLen)
		}
		var got Frame
		if err := Decode(enc[HeaderLen:], &got); err != nil {
			t.Fatalf("%s: Decode: %v", f.Type, err)
		}
		if !frameEqual(&got, f) {
			t.Fatalf("Decode(Append(f)) = %+v\nwant %+v", got, *f)
		}
	}
	// The same frames again, as one stream through one Reader.
	r := NewReader(bytes.NewReader(stream))
	for i, f := range frames {
		var got Frame
		if err := r.Next(&got); err != nil {
			t.Fatalf("frame %d (%s): Next: %v", i, f.Type, err)
		}
		if !frameEqual(&got, f) {
			t.Fatalf("frame %d: Next = %+v\nwant %+v", i, got, *f)
		}
	}
	if err := r.Next(new(Frame)); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// TestRoundTripOneByteReads reads the stream one byte per Read call, so every
// header and payload is split across reads.
func TestRoundTripOneByteReads(t *testing.T) {
	frames := sampleFrames()
	var stream []byte
	for _, f := range frames {
		stream = Append(stream, f)
	}
	r := NewReader(iotest.OneByteReader(bytes.NewReader(stream)))
	for i, f := range frames {
		var got Frame
		if err := r.Next(&got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !frameEqual(&got, f) {
			t.Fatalf("frame %d: %+v, want %+v", i, got, *f)
		}
	}
	if err := r.Next(new(Frame)); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// TestDecodeStrict cuts one byte off and adds one byte to a frame of every
// type. Both are malformed, except for J and V: their JSON runs to the end of
// the frame, so one byte more or less is a different, valid JSON field, and
// only a cut into the fixed part is malformed.
func TestDecodeStrict(t *testing.T) {
	for i := range layouts {
		l := &layouts[i]
		t.Run(l.name, func(t *testing.T) {
			rest := l.fields[len(l.fields)-1].kind == kRest
			for _, f := range []*Frame{{Type: l.typ}, randomFrame(rand.New(rand.NewPCG(uint64(i), 9)), l.typ)} {
				frame := Append(nil, f)
				body := frame[HeaderLen:]
				for _, c := range []struct {
					name string
					body []byte
				}{
					{"truncated", body[:len(body)-1]},
					{"trailing", append(append([]byte(nil), body...), 0)},
				} {
					err := Decode(c.body, new(Frame))
					if rest && len(c.body) >= l.fixedLen() {
						if err != nil {
							t.Errorf("%s %s with %d bytes of JSON: %v", c.name, l.typ, len(c.body)-l.fixedLen(), err)
						}
						continue
					}
					wantCode(t, err, CodeMalformedFrame)
					// The same through a Reader, with a consistent length prefix.
					err = NewReader(bytes.NewReader(resize(frame, len(c.body)-len(body)))).Next(new(Frame))
					wantCode(t, err, CodeMalformedFrame)
				}
				// Every shorter body is malformed too, down to the type byte alone.
				for n := 1; n < l.fixedLen(); n++ {
					wantCode(t, Decode(body[:n], new(Frame)), CodeMalformedFrame)
				}
			}
		})
	}
}

func TestDecodeStrLengthOverrun(t *testing.T) {
	for i := range layouts {
		l := &layouts[i]
		if l.fields[len(l.fields)-1].kind != kStr {
			continue
		}
		body := Append(nil, &Frame{Type: l.typ, Key: []byte("abc"), Text: []byte("abc")})[HeaderLen:]
		// The str length is the 2 bytes before its 3 bytes; claim 4, then 0xffff.
		for _, n := range []uint16{4, math.MaxUint16} {
			b := append([]byte(nil), body...)
			be.PutUint16(b[len(b)-5:], n)
			wantCode(t, Decode(b, new(Frame)), CodeMalformedFrame)
		}
		// Claiming 2 leaves a trailing byte.
		b := append([]byte(nil), body...)
		be.PutUint16(b[len(b)-5:], 2)
		wantCode(t, Decode(b, new(Frame)), CodeMalformedFrame)
	}
}

func TestDecodeUnknownType(t *testing.T) {
	for b := 0; b < 256; b++ {
		if layoutOf(Type(b)) != nil {
			continue
		}
		for _, body := range [][]byte{{byte(b)}, {byte(b), 0, 0, 0, 7}} {
			wantCode(t, Decode(body, new(Frame)), CodeUnknownFrame)
			frame := append(be.AppendUint32(nil, uint32(len(body))), body...)
			wantCode(t, NewReader(bytes.NewReader(frame)).Next(new(Frame)), CodeUnknownFrame)
		}
	}
}

func TestDecodeEmpty(t *testing.T) {
	wantCode(t, Decode(nil, new(Frame)), CodeMalformedFrame)
	wantCode(t, Decode([]byte{}, new(Frame)), CodeMalformedFrame)
	wantCode(t, NewReader(bytes.NewReader([]byte{0, 0, 0, 0, 'P'})).Next(new(Frame)), CodeMalformedFrame)
}

// headerOnlyReader hands out hdr, one byte per Read when slow is set, and
// fails the test on any Read after that: a Reader that refuses an oversized
// frame must not ask for its payload. (A connection would block there.)
type headerOnlyReader struct {
	t    *testing.T
	hdr  []byte
	slow bool
	over int // Reads after the header
}

func (r *headerOnlyReader) Read(p []byte) (int, error) {
	if len(r.hdr) == 0 {
		r.over++
		r.t.Errorf("Read(%d bytes) after the length prefix of an oversized frame", len(p))
		return 0, errors.New("read past the length prefix")
	}
	n := len(r.hdr)
	if r.slow {
		n = 1
	}
	n = copy(p, r.hdr[:n])
	r.hdr = r.hdr[n:]
	return n, nil
}

func TestFrameTooLargeNotRead(t *testing.T) {
	for _, n := range []uint32{MaxFrame + 1, MaxFrame + 2, 1 << 20, math.MaxUint32} {
		for _, slow := range []bool{false, true} {
			src := &headerOnlyReader{t: t, hdr: be.AppendUint32(nil, n), slow: slow}
			err := NewReader(src).Next(new(Frame))
			wantCode(t, err, CodeFrameTooLarge)
			if src.over != 0 || len(src.hdr) != 0 {
				t.Errorf("length %d: %d reads past the prefix, %d prefix bytes unread", n, src.over, len(src.hdr))
			}
		}
	}
}

// TestMaxFrameAccepted: a frame of exactly MaxFrame bytes is read and decoded.
func TestMaxFrameAccepted(t *testing.T) {
	text := bytes.Repeat([]byte{'x'}, MaxFrame-5) // type + id + text
	frame := Append(nil, &Frame{Type: TypeAdmin, ID: 3, Text: text})
	if n := be.Uint32(frame); n != MaxFrame {
		t.Fatalf("length %d, want %d", n, MaxFrame)
	}
	var f Frame
	if err := NewReader(bytes.NewReader(frame)).Next(&f); err != nil {
		t.Fatal(err)
	}
	if f.ID != 3 || !bytes.Equal(f.Text, text) {
		t.Fatal("MaxFrame frame decoded wrong")
	}
	// One byte more is refused.
	frame = Append(nil, &Frame{Type: TypeAdmin, ID: 3, Text: append(text, 'x')})
	wantCode(t, NewReader(bytes.NewReader(frame)).Next(&f), CodeFrameTooLarge)
}

func TestReaderIOErrors(t *testing.T) {
	frame := Append(nil, &Frame{Type: TypeGranted, ID: 1, Token: 2, LeaseMs: 3})
	for cut := 0; cut < len(frame); cut++ {
		err := NewReader(bytes.NewReader(frame[:cut])).Next(new(Frame))
		want := io.ErrUnexpectedEOF
		if cut == 0 {
			want = io.EOF
		}
		if err != want {
			t.Errorf("stream cut after %d of %d bytes: %v, want %v", cut, len(frame), err, want)
		}
	}
	boom := errors.New("boom")
	err := NewReader(io.MultiReader(bytes.NewReader(frame[:7]), iotest.ErrReader(boom))).Next(new(Frame))
	if err != boom {
		t.Errorf("I/O error inside a frame: %v, want it returned as is", err)
	}
}

func TestValidate(t *testing.T) {
	key := func(n int) []byte { return bytes.Repeat([]byte{'k'}, n) }
	acq := func(lease uint8, k []byte) *Frame {
		return &Frame{Type: TypeAcquire, ID: 1, Owner: owner1, Wait: 255, Lease: lease, Key: k}
	}
	for _, c := range []struct {
		name string
		f    *Frame
		ok   bool
	}{
		{"acquire lease 0", acq(0, key(1)), false},
		{"acquire lease 1", acq(1, key(1)), true},
		{"acquire lease 250", acq(250, key(1)), true},
		{"acquire lease 251", acq(251, key(1)), false},
		{"acquire lease 255", acq(255, key(1)), false},
		{"acquire key empty", acq(30, nil), false},
		{"acquire key 1024", acq(30, key(MaxKey)), true},
		{"acquire key 1025", acq(30, key(MaxKey+1)), false},
		{"acquire wait 0", &Frame{Type: TypeAcquire, Lease: 1, Key: key(1)}, true},
		{"release key empty", &Frame{Type: TypeRelease, Token: 1}, false},
		{"release key 1", &Frame{Type: TypeRelease, Token: 1, Key: key(1)}, true},
		{"release key 1024", &Frame{Type: TypeRelease, Key: key(MaxKey)}, true},
		{"release key 1025", &Frame{Type: TypeRelease, Key: key(MaxKey + 1)}, false},
		{"describe key empty", &Frame{Type: TypeDescribe}, false},
		{"describe key 1024", &Frame{Type: TypeDescribe, Key: key(MaxKey)}, true},
		{"describe key 1025", &Frame{Type: TypeDescribe, Key: key(MaxKey + 1)}, false},
		{"release-owner key empty", &Frame{Type: TypeReleaseOwner, Owner: owner1}, false},
		{"release-owner key 1", &Frame{Type: TypeReleaseOwner, Owner: owner1, Key: key(1)}, true},
		{"release-owner key 1024", &Frame{Type: TypeReleaseOwner, Key: key(MaxKey)}, true},
		{"release-owner key 1025", &Frame{Type: TypeReleaseOwner, Key: key(MaxKey + 1)}, false},
		{"hello no token", &Frame{Type: TypeHello, Version: Version}, true},
		{"hello token 1024", &Frame{Type: TypeHello, Version: Version, Text: key(MaxToken)}, true},
		{"hello token 1025", &Frame{Type: TypeHello, Version: Version, Text: key(MaxToken + 1)}, false},
		{"cancel", &Frame{Type: TypeCancel}, true},
		{"admin", &Frame{Type: TypeAdmin, Text: []byte("{}")}, true},
		{"ping", &Frame{Type: TypePing}, true},
	} {
		err := Validate(c.f)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var we *Error
		if !errors.As(err, &we) || we.Code != CodeInvalidArgument {
			t.Errorf("%s: %v, want code %d", c.name, err, CodeInvalidArgument)
		}
	}
}

// TestReaderReuse reads frames of very different sizes through one Reader:
// each decodes right, whether the buffer grew for it or is reused from a
// larger frame, and nothing of an earlier frame shows through.
func TestReaderReuse(t *testing.T) {
	sizes := []int{0, 3, 60000, 1, 600, 65000, 0, 2, 20000, 513, 511}
	var stream []byte
	var want []*Frame
	for i, n := range sizes {
		var f *Frame
		switch i % 3 {
		case 0:
			f = &Frame{Type: TypeAdmin, ID: uint32(i), Text: bytes.Repeat([]byte{byte('a' + i)}, n)}
		case 1:
			f = &Frame{Type: TypeNotLeader, Text: bytes.Repeat([]byte{byte('a' + i)}, n)}
		default:
			f = &Frame{Type: TypePing, Nonce: uint64(n)}
		}
		want = append(want, f)
		stream = Append(stream, f)
	}
	r := NewReader(bytes.NewReader(stream))
	largest := 0
	for i, w := range want {
		var f Frame
		if err := r.Next(&f); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !frameEqual(&f, w) {
			t.Fatalf("frame %d (%s, %d bytes of text): decoded wrong", i, w.Type, len(w.Text))
		}
		n := len(Append(nil, w)) - HeaderLen
		largest = max(largest, n)
		if cap(r.buf) < largest || (largest > 512 && cap(r.buf) != largest) {
			t.Fatalf("frame %d: buffer cap %d after frames of at most %d bytes: it should grow once to the largest frame and then be reused", i, cap(r.buf), largest)
		}
	}
	if err := r.Next(new(Frame)); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
}

// loopReader serves data over and over without allocating.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("AllocsPerRun")
	}
	frames := sampleFrames()
	buf := make([]byte, 0, 8<<10)
	for _, f := range frames {
		if a := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], f) }); a != 0 {
			t.Errorf("Append(%s) into a preallocated buffer: %v allocs, want 0", f.Type, a)
		}
	}
	var stream []byte
	for _, f := range frames {
		stream = Append(stream, f)
	}
	var f Frame
	if a := testing.AllocsPerRun(100, func() {
		for off := 0; off < len(stream); {
			n := int(be.Uint32(stream[off:]))
			if err := Decode(stream[off+HeaderLen:off+HeaderLen+n], &f); err != nil {
				panic(err)
			}
			off += HeaderLen + n
		}
	}); a != 0 {
		t.Errorf("Decode: %v allocs per pass over %d frames, want 0", a, len(frames))
	}

	r := NewReader(&loopReader{data: stream})
	for range frames { // warm up: the buffer grows to the largest frame
		if err := r.Next(&f); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(1000, func() {
		if err := r.Next(&f); err != nil {
			panic(err)
		}
	}); a != 0 {
		t.Errorf("Reader.Next of a steady stream: %v allocs per frame, want 0", a)
	}
}

var benchAcquire = &Frame{Type: TypeAcquire, ID: 7, Owner: owner1, Wait: 5, Lease: 30, Key: []byte("orders/42")}

func BenchmarkAppendAcquire(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(Append(nil, benchAcquire))))
	for b.Loop() {
		buf = Append(buf[:0], benchAcquire)
	}
}

func BenchmarkDecodeAcquire(b *testing.B) {
	body := Append(nil, benchAcquire)[HeaderLen:]
	var f Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := Decode(body, &f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderNext(b *testing.B) {
	var stream []byte
	for i := range 64 {
		f := *benchAcquire
		f.ID = uint32(i)
		f.Key = []byte(strings.Repeat("k", 1+i%32))
		stream = Append(stream, &f)
	}
	r := NewReader(&loopReader{data: stream})
	var f Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(stream) / 64))
	for b.Loop() {
		if err := r.Next(&f); err != nil {
			b.Fatal(err)
		}
	}
}
