package coordsm

import (
	"encoding/binary"

	"github.com/ticketing-io/ticketing/server/internal/fsm/internal/enc"
)

// fieldSet names the fields of an Op a kind encodes, in this order. The
// others are not written and decode as zero, so every op has one encoding.
type fieldSet uint16

const (
	fPath fieldSet = 1 << iota
	fConfig
	fSession
	fSeqNo
	fKey
	fTimeout
	fDesc
	fName
	fLimit
	fCount
	fData
	fEphemeral
	fForce
	fOrder
)

func appendNodeConfig(dst []byte, c NodeConfig) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.SelfCheckMs))
	dst = binary.AppendUvarint(dst, uint64(c.GraceMs))
	dst = append(dst, c.ReadMode, c.AttachMode)
	dst = binary.AppendUvarint(dst, uint64(c.MaxSessions))
	dst = binary.AppendUvarint(dst, uint64(c.MaxSemaphores))
	return binary.AppendUvarint(dst, uint64(c.MaxWaiters))
}

// AppendOp encodes the fields of kind from o (nil: all zero); an unknown
// kind encodes nothing.
func AppendOp(dst []byte, kind Kind, o *Op) []byte {
	cmd := byKind[kind]
	if cmd == nil {
		return dst
	}
	if o == nil {
		o = &Op{}
	}
	f := cmd.fields
	if f&fPath != 0 {
		dst = enc.AppendStr(dst, o.Path)
	}
	if f&fConfig != 0 {
		dst = appendNodeConfig(dst, o.Config)
	}
	if f&fSession != 0 {
		dst = binary.AppendUvarint(dst, o.Session)
	}
	if f&fSeqNo != 0 {
		dst = binary.AppendUvarint(dst, o.SeqNo)
	}
	if f&fKey != 0 {
		dst = enc.AppendStr(dst, o.Key)
	}
	if f&fTimeout != 0 {
		dst = binary.AppendUvarint(dst, o.TimeoutMs)
	}
	if f&fDesc != 0 {
		dst = enc.AppendStr(dst, o.Desc)
	}
	if f&fName != 0 {
		dst = enc.AppendStr(dst, o.Name)
	}
	if f&fLimit != 0 {
		dst = binary.AppendUvarint(dst, o.Limit)
	}
	if f&fCount != 0 {
		dst = binary.AppendUvarint(dst, o.Count)
	}
	if f&fData != 0 {
		dst = enc.AppendStr(dst, o.Data)
	}
	if f&fEphemeral != 0 {
		dst = enc.AppendBool(dst, o.Ephemeral)
	}
	if f&fForce != 0 {
		dst = enc.AppendBool(dst, o.Force)
	}
	if f&fOrder != 0 {
		dst = binary.AppendUvarint(dst, o.OrderID)
	}
	return dst
}

func readNodeConfig(d *enc.Decoder) NodeConfig {
	var c NodeConfig
	c.SelfCheckMs = d.Uvarint32("self-check period")
	c.GraceMs = d.Uvarint32("grace period")
	c.ReadMode = d.U8("read mode")
	c.AttachMode = d.U8("attach mode")
	c.MaxSessions = d.Uvarint32("max sessions")
	c.MaxSemaphores = d.Uvarint32("max semaphores")
	c.MaxWaiters = d.Uvarint32("max waiters")
	return c
}

// DecodeOp reads the fields of kind, written by AppendOp. An unknown kind
// is corrupt.
func DecodeOp(d *enc.Decoder, kind Kind) *Op {
	cmd := byKind[kind]
	if cmd == nil {
		d.Failf("unknown coordination op kind %d", kind)
		return nil
	}
	o := &Op{}
	f := cmd.fields
	if f&fPath != 0 {
		o.Path = d.Str("path")
	}
	if f&fConfig != 0 {
		o.Config = readNodeConfig(d)
	}
	if f&fSession != 0 {
		o.Session = d.Uvarint("session")
	}
	if f&fSeqNo != 0 {
		o.SeqNo = d.Uvarint("seq_no")
	}
	if f&fKey != 0 {
		o.Key = d.Str("protection key")
	}
	if f&fTimeout != 0 {
		o.TimeoutMs = d.Uvarint("timeout")
	}
	if f&fDesc != 0 {
		o.Desc = d.Str("description")
	}
	if f&fName != 0 {
		o.Name = d.Str("semaphore name")
	}
	if f&fLimit != 0 {
		o.Limit = d.Uvarint("limit")
	}
	if f&fCount != 0 {
		o.Count = d.Uvarint("count")
	}
	if f&fData != 0 {
		o.Data = d.Str("data")
	}
	if f&fEphemeral != 0 {
		o.Ephemeral = d.Boolean("ephemeral")
	}
	if f&fForce != 0 {
		o.Force = d.Boolean("force")
	}
	if f&fOrder != 0 {
		o.OrderID = d.Uvarint("order id")
	}
	return o
}
