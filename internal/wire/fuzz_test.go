package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzDecode feeds arbitrary bytes through Reader.Next until the stream ends
// or a frame is refused. It must never panic, every error is io.EOF (only at
// a frame boundary), io.ErrUnexpectedEOF or a *Error with a decoding code,
// and every frame that decodes re-encodes to exactly its bytes: the encoding
// is canonical (a decoded frame has one encoding, and Append produces it).
//
// The seed corpus in testdata/fuzz/FuzzDecode holds every vector of
// testdata/vectors.json and streams of them (go test -run TestVectors -update
// rewrites it).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(Append(Append(nil, &Frame{Type: TypePing, Nonce: 1}), &Frame{Type: TypeAcquire, Lease: 1, Key: []byte("k")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var fr Frame
		off := 0
		for {
			err := r.Next(&fr)
			if err != nil {
				checkStreamError(t, data[off:], err)
				return
			}
			// Next consumed exactly one frame: the prefix and its length.
			n := int(be.Uint32(data[off:]))
			raw := data[off : off+HeaderLen+n]
			if n > MaxFrame {
				t.Fatalf("accepted a frame of %d bytes", n)
			}
			if enc := Append(nil, &fr); !bytes.Equal(enc, raw) {
				t.Fatalf("frame %s at offset %d is not canonical:\nread    %x\nencoded %x", fr.Type, off, raw, enc)
			}
			if enc := layoutEncode(&fr); !bytes.Equal(enc, raw) {
				t.Fatalf("frame %s at offset %d disagrees with the layout table:\nread   %x\nlayout %x", fr.Type, off, raw, enc)
			}
			var d Frame
			if err := Decode(raw[HeaderLen:], &d); err != nil || !frameEqual(&d, &fr) {
				t.Fatalf("Decode disagrees with Reader.Next: %v", err)
			}
			_ = Validate(&fr)
			_ = fr.Type.String()
			off += len(raw)
		}
	})
}

// checkStreamError checks the error that ended a stream whose unread part is
// rest (starting at a frame boundary).
func checkStreamError(t *testing.T, rest []byte, err error) {
	t.Helper()
	var we *Error
	switch {
	case err == io.EOF:
		if len(rest) != 0 {
			t.Fatalf("io.EOF with %d bytes left", len(rest))
		}
	case err == io.ErrUnexpectedEOF:
		if len(rest) >= HeaderLen && int(be.Uint32(rest)) <= MaxFrame && HeaderLen+int(be.Uint32(rest)) <= len(rest) {
			t.Fatalf("io.ErrUnexpectedEOF but the whole frame is there")
		}
		if len(rest) == 0 {
			t.Fatal("io.ErrUnexpectedEOF at a frame boundary")
		}
	case errors.As(err, &we):
		_ = we.Error()
		n := be.Uint32(rest)
		switch we.Code {
		case CodeFrameTooLarge:
			if n <= MaxFrame {
				t.Fatalf("frame of %d bytes refused as too large", n)
			}
		case CodeMalformedFrame, CodeUnknownFrame:
			if n > MaxFrame {
				t.Fatalf("oversized frame (%d) got code %d instead of %d", n, we.Code, CodeFrameTooLarge)
			}
			if n == 0 {
				if we.Code != CodeMalformedFrame {
					t.Fatalf("length 0: code %d", we.Code)
				}
				return
			}
			if known := layoutOf(Type(rest[HeaderLen])) != nil; known != (we.Code == CodeMalformedFrame) {
				t.Fatalf("type %s: code %d", Type(rest[HeaderLen]), we.Code)
			}
		default:
			t.Fatalf("decoding error with code %d: %v", we.Code, we)
		}
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
}

// FuzzDecodeReplies is FuzzDecode for a client's Reader after
// AllowCoordReplies: a frame longer than MaxFrame is accepted only as a T
// up to MaxCoordFrame, and every accepted frame re-encodes to its bytes.
func FuzzDecodeReplies(f *testing.F) {
	f.Add([]byte{})
	f.Add(Append(nil, CoordFrame(true, 1, CoordDescribeSemaphore, 0, &Coord{Data: bytes.Repeat([]byte("d"), MaxFrame)})))
	f.Add(Append(nil, &Frame{Type: TypeGranted, ID: 1, Token: 7, Lease: 1}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		r.AllowCoordReplies()
		var fr Frame
		off := 0
		for {
			err := r.Next(&fr)
			if err != nil {
				var we *Error
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &we) {
					t.Fatalf("unexpected error %T: %v", err, err)
				}
				return
			}
			n := int(be.Uint32(data[off:]))
			raw := data[off : off+HeaderLen+n]
			if n > MaxFrame && (fr.Type != TypeCoordReply || n > MaxCoordFrame) {
				t.Fatalf("accepted a %s frame of %d bytes", fr.Type, n)
			}
			if enc := Append(nil, &fr); !bytes.Equal(enc, raw) {
				t.Fatalf("frame %s at offset %d is not canonical:\nread    %x\nencoded %x", fr.Type, off, raw, enc)
			}
			off += len(raw)
		}
	})
}
