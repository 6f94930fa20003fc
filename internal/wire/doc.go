// Package wire is the Ticketing binary protocol: frame types, their exact
// byte layouts, error codes, and an allocation-free reader and encoder shared
// by the server and the Go client.
//
// Every frame is a 4-byte big-endian length followed by that many bytes: a
// one-byte type and the type's payload. The length counts the type byte, so
// the smallest valid length is 1 and the largest is MaxFrame. docs/protocol.md
// describes each frame byte by byte; testdata/vectors.json holds hex test
// vectors that clients in other languages check themselves against.
//
// Decoding is strict: a payload must have exactly the length its type
// defines, so trailing or missing bytes are a malformed frame. Semantic
// ranges (lease 1..250 s, key length) are checked by Validate, which the
// server applies to every request before acting on it.
//
//	var buf []byte
//	buf = wire.Append(buf, &wire.Frame{Type: wire.TypeAcquire, ID: 7, Owner: owner,
//		Wait: 5, Lease: 30, Key: []byte("orders/42")})
//	r := wire.NewReader(conn)
//	var f wire.Frame
//	if err := r.Next(&f); err != nil { ... } // *wire.Error with a stable Code
package wire

// Regenerate testdata/vectors.json, the frame tables of docs/protocol.md and
// the FuzzDecode seed corpus from the layout tables after a protocol change.
//go:generate go test -run TestVectors -update .
