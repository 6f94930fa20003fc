package coordsm

import (
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Limits that are not part of a node's configuration. The sizes are the
// protocol's, defined once in package wire rather than here: the reader
// refuses a larger field naming it, the SDKs check them before sending, and
// the state machine applies the same bounds, so that a request the wire
// carries is never refused later for its size alone and no second
// definition can drift. They are rules of the replicated state too (an op
// over them applies as BadRequest, a snapshot over them is corrupt), so
// changing one changes how logged ops apply: TestLimitsOfTheLog pins them.
// The session timeout's bound is the state machine's own.
const (
	MaxPath           = wire.MaxCoordPath
	MaxName           = wire.MaxCoordName
	MaxData           = wire.MaxCoordData
	MaxDesc           = wire.MaxCoordDesc
	MaxKey            = wire.MaxCoordKey
	MaxSessionTimeout = 30 * 60 * 1000 // ms
)

// Exclusive is the acquire count that takes a semaphore's whole limit; it is
// granted only when nothing is held. Shared holds use count 1.
const Exclusive = wire.CoordExclusive

// WaitForever as an acquire's TimeoutMs queues without a deadline.
const WaitForever = wire.CoordWaitForever

// Status is the per-operation status of a coordination operation: the
// wire's status, which the leader sends as it is, so there is one
// numbering.
type Status uint16

const (
	Success            = Status(wire.CoordSuccess)
	NotFound           = Status(wire.CoordNotFound)
	AlreadyExists      = Status(wire.CoordAlreadyExists)
	BadRequest         = Status(wire.CoordBadRequest)
	PreconditionFailed = Status(wire.CoordPreconditionFailed)
	Aborted            = Status(wire.CoordAborted)
	SessionExpired     = Status(wire.CoordSessionExpired)
	BadSession         = Status(wire.CoordBadSession)
	Unauthorized       = Status(wire.CoordUnauthorized)
	LimitExceeded      = Status(wire.CoordLimitExceeded)
)

func (c Status) String() string { return wire.CoordStatusName(uint16(c)) }

// Consistency modes of a node's configuration (0 = default in a create,
// unchanged in an alter).
const (
	ReadRelaxed   uint8 = 1
	ReadStrict    uint8 = 2
	AttachStrict  uint8 = 1
	AttachRelaxed uint8 = 2
)

// NodeConfig is a coordination node's configuration. In a create, a zero
// field takes its default; in an alter, a zero field is left unchanged.
type NodeConfig struct {
	SelfCheckMs   uint32 // default 1000
	GraceMs       uint32 // session grace period, default 10000, > SelfCheckMs
	ReadMode      uint8  // ReadRelaxed (default) or ReadStrict
	AttachMode    uint8  // AttachStrict (default) or AttachRelaxed
	MaxSessions   uint32 // default 10000
	MaxSemaphores uint32 // default 10000, persistent and ephemeral
	MaxWaiters    uint32 // default 10000, over all semaphores of the node
}

// DefaultNodeConfig is what a create with an all-zero config gets.
var DefaultNodeConfig = NodeConfig{SelfCheckMs: 1000, GraceMs: 10000, ReadMode: ReadRelaxed,
	AttachMode: AttachStrict, MaxSessions: 10000, MaxSemaphores: 10000, MaxWaiters: 10000}

// merge returns c with every non-zero field of o.
func (c NodeConfig) merge(o NodeConfig) NodeConfig {
	set32 := func(dst *uint32, v uint32) {
		if v != 0 {
			*dst = v
		}
	}
	set32(&c.SelfCheckMs, o.SelfCheckMs)
	set32(&c.GraceMs, o.GraceMs)
	set32(&c.MaxSessions, o.MaxSessions)
	set32(&c.MaxSemaphores, o.MaxSemaphores)
	set32(&c.MaxWaiters, o.MaxWaiters)
	if o.ReadMode != 0 {
		c.ReadMode = o.ReadMode
	}
	if o.AttachMode != 0 {
		c.AttachMode = o.AttachMode
	}
	return c
}

func (c NodeConfig) valid() bool {
	return c.SelfCheckMs > 0 && c.GraceMs > c.SelfCheckMs &&
		(c.ReadMode == ReadRelaxed || c.ReadMode == ReadStrict) &&
		(c.AttachMode == AttachStrict || c.AttachMode == AttachRelaxed) &&
		c.MaxSessions > 0 && c.MaxSemaphores > 0 && c.MaxWaiters > 0
}

// Op is the payload of a coordination op. Only the fields of its kind
// (listed at the kind constants) are encoded; the others must be zero.
type Op struct {
	Path      string
	Config    NodeConfig
	Session   uint64
	SeqNo     uint64
	Key       string // protection key, up to MaxKey bytes
	TimeoutMs uint64 // attach: session timeout; acquire: queue timeout (0 = try once)
	Desc      string
	Name      string
	Limit     uint64
	Count     uint64
	Data      string
	Ephemeral bool
	Force     bool
	OrderID   uint64
}

// EventKind says what happened to a party other than the op's requester.
type EventKind uint8

const (
	EventGranted      EventKind = 1 // a queued acquire was granted (OrderID, Count)
	EventAborted      EventKind = 2 // a queued acquire ended ABORTED (replaced, released, force delete)
	EventTimedOut     EventKind = 3 // a queued acquire's timeout passed (acquired = false)
	EventLost         EventKind = 4 // an owner lost its hold (force delete)
	EventSessionEnded EventKind = 5 // Reason: why
	EventChanged      EventKind = 6 // a semaphore's Data and/or Owners changed (both when deleted)
)

// Why a session ended (EventSessionEnded.Reason): the wire's reasons, which
// the leader sends as they are.
const (
	EndExpired = wire.CoordEndExpired // timed out while detached
	EndStopped = wire.CoordEndStopped // its client stopped it
	EndDropped = wire.CoordEndDropped // its node was dropped (reported to clients as EXPIRED)
)

// Event is one consequence of an op for someone other than its requester.
// The leader turns them into answers and notifications.
type Event struct {
	Kind    EventKind
	Path    string
	Session uint64
	Name    string
	OrderID uint64
	Count   uint64
	Reason  uint8 // EventSessionEnded
	Data    bool  // EventChanged
	Owners  bool  // EventChanged
}

// Result is the outcome of a coordination op.
type Result struct {
	Status   Status
	Session  uint64 // attach: the session id
	SeqNo    uint64 // attach: the session's seq_no now
	Acquired bool   // acquire: held now
	Queued   bool   // acquire: waiting in the queue
	OrderID  uint64 // acquire: the hold's or waiter's order id
	Count    uint64 // acquire: the count held (Exclusive taken as the limit)
	Changed  bool   // release: a hold or wait ended
	Events   []Event
}

func (r *Result) event(e Event) { r.Events = append(r.Events, e) }

// changed records a semaphore change once per op, merging the flags.
func (r *Result) changed(path, name string, data, owners bool) {
	for i := range r.Events {
		e := &r.Events[i]
		if e.Kind == EventChanged && e.Path == path && e.Name == name {
			e.Data = e.Data || data
			e.Owners = e.Owners || owners
			return
		}
	}
	r.event(Event{Kind: EventChanged, Path: path, Name: name, Data: data, Owners: owners})
}

// Holder is an owner or a waiter of a semaphore.
type Holder struct {
	OrderID   uint64
	Session   uint64
	Count     uint64 // owners: the count held; waiters: as asked (Exclusive possible)
	TimeoutMs uint64 // the acquire's timeout
	Data      string
	Deadline  int64 // waiters: batch time at which the leader may time it out
}
