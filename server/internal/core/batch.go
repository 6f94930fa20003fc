package core

import (
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
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

// cause is why an op is in a batch: what the core does with its result.
type cause struct {
	kind causeKind
	w    *waiter
	c    Replier
	id   uint32
	// principal: a coordination request's connection principal (an
	// attach's session counts against its quota).
	principal string
	// forSession: a coordination attach that adds its session to the
	// connection's (wire.CoordForSession) rather than replacing it.
	forSession bool
}

type readReq struct {
	c   Replier
	id  uint32
	key string

	fn func(st *fsm.State) // a coordination read (coord.go) instead of a key's
}

// batch is one Raft entry: its ops, each with its cause at the same index
// (the state machine returns one result per op, in order, and applied reads
// result i with cause i), and the reads answered once it is applied. Only
// add and merge write ops and causes, so the two stay in step.
type batch struct {
	epoch  uint64
	ops    []fsm.Op
	causes []cause
	reads  []readReq
	data   []byte
	time   int64
	sealed time.Time
	trace  stamps // stagetrace.go, when tracing
}

// add appends op with the cause its result is answered for.
func (b *batch) add(op fsm.Op, cs cause) {
	b.ops = append(b.ops, op)
	b.causes = append(b.causes, cs)
}

// addRead appends a read answered from the state once b is applied.
func (b *batch) addRead(rd readReq) { b.reads = append(b.reads, rd) }

// merge appends o's ops, causes and reads after b's.
func (b *batch) merge(o *batch) {
	b.ops = append(b.ops, o.ops...)
	b.causes = append(b.causes, o.causes...)
	b.reads = append(b.reads, o.reads...)
}

// len is the number of ops in b.
func (b *batch) len() int { return len(b.ops) }

// empty reports whether b has nothing to propose: no op and no read.
func (b *batch) empty() bool { return len(b.ops) == 0 && len(b.reads) == 0 }

// each calls fn with every op, its cause and its result, in order.
func (b *batch) each(results []fsm.Result, fn func(op *fsm.Op, cs cause, res fsm.Result)) {
	for i, res := range results {
		fn(&b.ops[i], b.causes[i], res)
	}
}

// applied is the outcome of one proposed batch, as the awaiter hands it to
// the core.
type applied struct {
	b   *batch
	res []fsm.Result // one per op when o is Applied
	o   Outcome
	err error
}

// proposal is a batch handed to the log, with the wait for its outcome.
type proposal struct {
	b    *batch
	wait func() ([]fsm.Result, Outcome, error)
}
