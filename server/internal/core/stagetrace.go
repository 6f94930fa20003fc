package core

import "time"

// The commit path's stage trace: how long each batch spends between the
// hand-offs from a request's receipt to its answers, for the benchmark's
// breakdown (ticketbench serve -timings). Off in ticketd: every stamp is
// behind a nil check of the core's trace, so it costs nothing when unset.

// Stage names, in the order a batch passes them.
const (
	// StageGather: the oldest request of the batch was received (decoded by
	// its connection's reader) until the batch was sealed; it includes the
	// request channel and waiting for a free in-flight slot.
	StageGather = "core.gather"
	// StagePropose: sealed until Raft accepted it (the proposer's hand-off
	// and raft.Apply's enqueue).
	StagePropose = "core.propose"
	// StageCommit: accepted by Raft until its future returned: the log
	// write, the commit, and the state machine's apply.
	StageCommit = "core.commit_apply"
	// StageResult: the future returned until the core took the outcome
	// (the awaiter's hand-off, behind anything the core was doing).
	StageResult = "core.result"
	// StageAnswer: the core answering every op of the batch (queued to the
	// connections' writers).
	StageAnswer = "core.answer"
	// StageTotal: the oldest request's receipt until its batch was answered.
	StageTotal = "core.total"
)

// stageTrace is the trace of cores made from now on.
var stageTrace func(stage string, d time.Duration)

// SetStageTrace makes fn receive the stage durations of every batch of the
// cores made after it. Call it before any server starts (it is read
// without a lock); nil turns it off.
func SetStageTrace(fn func(stage string, d time.Duration)) { stageTrace = fn }

// stamps are a traced batch's times; zero when tracing is off.
type stamps struct {
	received time.Time // the oldest request's receipt
	proposed time.Time // Raft accepted the entry
	awaited  time.Time // its future returned
}

// noteReceived records a request's receipt in the batch it added to.
func (b *batch) noteReceived(at time.Time) {
	if b.trace.received.IsZero() || at.Before(b.trace.received) {
		b.trace.received = at
	}
}

// traceAnswered reports the stages of batch b, whose answers were just
// queued (now).
func (c *Core) traceAnswered(b *batch, took, now time.Time) {
	t, emit := b.trace, c.trace
	if t.received.IsZero() || t.proposed.IsZero() || t.awaited.IsZero() {
		return // the core's own ops (takeover, expiries) or an unfinished trace
	}
	emit(StageGather, b.sealed.Sub(t.received))
	emit(StagePropose, t.proposed.Sub(b.sealed))
	emit(StageCommit, t.awaited.Sub(t.proposed))
	emit(StageResult, took.Sub(t.awaited))
	emit(StageAnswer, now.Sub(took))
	emit(StageTotal, now.Sub(t.received))
}

// traceReceived records receipt at in b when handling the request added an
// op to it (a request that only queues a waiter proposes nothing yet).
func (c *Core) traceReceived(b *batch, before int, at time.Time) {
	if b == c.pending && b.len() > before {
		b.noteReceived(at)
	}
}

// inFlightBatches is the in-flight bound of cores made from now on:
// maxInFlightBatches unless a benchmark set another (SetInFlightBatches).
var inFlightBatches = maxInFlightBatches

// SetInFlightBatches sets the in-flight bound of cores made after it, for
// the benchmark that measures the commit pipeline's depth; like
// SetStageTrace, call it before any server starts.
func SetInFlightBatches(n int) { inFlightBatches = max(n, 1) }
