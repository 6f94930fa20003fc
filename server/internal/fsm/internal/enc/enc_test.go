package enc

import (
	"errors"
	"strings"
	"testing"
)

// TestDecoderRefusesNonCanonical: each value has one encoding, and the
// first failure is kept while later reads return zero.
func TestDecoderRefusesNonCanonical(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		read func(d *Decoder)
		want string
	}{
		{"overlong varint", []byte{0x80, 0x00}, func(d *Decoder) { d.Uvarint("n") }, "overlong varint at n"},
		{"boolean 2", []byte{2}, func(d *Decoder) { d.Boolean("flag") }, "flag is 2, not 0 or 1"},
		{"above 32 bits", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, func(d *Decoder) { d.Uvarint32("limit") }, "limit 4294967296 does not fit 32 bits"},
		{"short string", []byte{3, 'a'}, func(d *Decoder) { d.Str("key") }, "truncated at key"},
		{"short fixed", []byte{1, 2}, func(d *Decoder) { d.Fixed(make([]byte, 4), "owner") }, "truncated at owner"},
		{"first failure kept", nil, func(d *Decoder) { d.U64("time"); d.U8("kind") }, "truncated at time"},
	} {
		d := &Decoder{B: c.data}
		c.read(d)
		if !errors.Is(d.Err, ErrCorrupt) || !strings.HasSuffix(d.Err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt ending %q", c.name, d.Err, c.want)
		}
	}
	d := &Decoder{B: AppendBool(AppendStr(nil, "clé"), true)}
	if s, b := d.Str("s"), d.Boolean("b"); s != "clé" || !b || d.Err != nil || len(d.B) != 0 {
		t.Fatalf("round trip: %q %v %v, %d left", s, b, d.Err, len(d.B))
	}
}
