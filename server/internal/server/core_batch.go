package server

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// This file holds the batch: the ops one Raft entry proposes, each with the
// cause the core answers when its result is applied.

type causeKind uint8

const (
	causeAttempt causeKind = iota + 1
	causeRelease
	causeExpire
	causeOrphan
	causeTakeover
	causeCoord // coord.go
)

type cause struct {
	kind causeKind
	w    *waiter
	c    *conn
	id   uint32
}

type readReq struct {
	c   *conn
	id  uint32
	key string

	fn func(st *fsm.State) // a coordination read (coord.go) instead of a key's
}

type batch struct {
	epoch  uint64
	ops    []fsm.Op
	causes []cause
	reads  []readReq
	data   []byte
	time   int64
	sealed time.Time
}

type applied struct {
	b   *batch
	res *node.Applied
	err error
}

type proposal struct {
	b *batch
	f raft.ApplyFuture
}
