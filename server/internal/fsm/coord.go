package fsm

import "github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"

// Coordination's replicated state lives in package coordsm; these names keep
// the state machine's one vocabulary for the server and the node, which
// build and read coordination ops through Op and Result.

// Coordination op kinds (coordsm.Kind numbers; see kinds.go).
const (
	OpCoordCreateNode = OpKind(coordsm.CreateNode)
	OpCoordAlterNode  = OpKind(coordsm.AlterNode)
	OpCoordDropNode   = OpKind(coordsm.DropNode)
	OpCoordAttach     = OpKind(coordsm.Attach)
	OpCoordDetach     = OpKind(coordsm.Detach)
	OpCoordExpire     = OpKind(coordsm.Expire)
	OpCoordStop       = OpKind(coordsm.Stop)
	OpCoordCreateSem  = OpKind(coordsm.CreateSem)
	OpCoordUpdateSem  = OpKind(coordsm.UpdateSem)
	OpCoordDeleteSem  = OpKind(coordsm.DeleteSem)
	OpCoordAcquire    = OpKind(coordsm.Acquire)
	OpCoordRelease    = OpKind(coordsm.Release)
	OpCoordTimeout    = OpKind(coordsm.Timeout)
)

type (
	CoordOp        = coordsm.Op
	CoordResult    = coordsm.Result
	CoordStatus    = coordsm.Status
	CoordEvent     = coordsm.Event
	CoordEventKind = coordsm.EventKind
	NodeConfig     = coordsm.NodeConfig
	Holder         = coordsm.Holder
	NodeInfo       = coordsm.NodeInfo
	SessionInfo    = coordsm.SessionInfo
	SemaphoreInfo  = coordsm.SemaphoreInfo
)

const (
	MaxCoordPath      = coordsm.MaxPath
	MaxCoordName      = coordsm.MaxName
	MaxCoordData      = coordsm.MaxData
	MaxCoordDesc      = coordsm.MaxDesc
	MaxCoordKey       = coordsm.MaxKey
	MaxSessionTimeout = coordsm.MaxSessionTimeout
	Exclusive         = coordsm.Exclusive
	WaitForever       = coordsm.WaitForever

	CoordSuccess            = coordsm.Success
	CoordNotFound           = coordsm.NotFound
	CoordAlreadyExists      = coordsm.AlreadyExists
	CoordBadRequest         = coordsm.BadRequest
	CoordPreconditionFailed = coordsm.PreconditionFailed
	CoordAborted            = coordsm.Aborted
	CoordSessionExpired     = coordsm.SessionExpired
	CoordBadSession         = coordsm.BadSession
	CoordUnauthorized       = coordsm.Unauthorized
	CoordLimitExceeded      = coordsm.LimitExceeded

	ReadRelaxed   = coordsm.ReadRelaxed
	ReadStrict    = coordsm.ReadStrict
	AttachStrict  = coordsm.AttachStrict
	AttachRelaxed = coordsm.AttachRelaxed

	EventGranted      = coordsm.EventGranted
	EventAborted      = coordsm.EventAborted
	EventTimedOut     = coordsm.EventTimedOut
	EventLost         = coordsm.EventLost
	EventSessionEnded = coordsm.EventSessionEnded
	EventChanged      = coordsm.EventChanged

	EndExpired = coordsm.EndExpired
	EndStopped = coordsm.EndStopped
	EndDropped = coordsm.EndDropped
)

// DefaultNodeConfig is what a create with an all-zero config gets.
var DefaultNodeConfig = coordsm.DefaultNodeConfig

// ValidCoordPath reports whether p is a node path: '/' and non-empty
// components separated by single '/', at most MaxCoordPath bytes.
func ValidCoordPath(p string) bool { return coordsm.ValidPath(p) }

// applyCoord routes a coordination op to coordsm with the token counter.
// The Result is Done with the per-operation status in Coord, or Invalid
// when the op has no payload.
func (s *State) applyCoord(now int64, op *Op) Result {
	if op.Coord == nil {
		return Result{Status: Invalid}
	}
	return Result{Status: Done, Coord: s.coord.Apply(now, coordsm.Kind(op.Kind), op.Coord, &s.lastToken)}
}

// DescribeNode returns the coordination node at path, if any.
func (s *State) DescribeNode(path string) (NodeInfo, bool) { return s.coord.DescribeNode(path) }

// Session returns session id, if it exists.
func (s *State) Session(id uint64) (SessionInfo, bool) { return s.coord.Session(id) }

// Sessions returns every session, of the node at path or of all nodes when
// path is empty, by id.
func (s *State) Sessions(path string) []SessionInfo { return s.coord.Sessions(path) }

// DescribeSemaphore returns the semaphore name of the node at path:
// NOT_FOUND if either is missing.
func (s *State) DescribeSemaphore(path, name string, owners, waiters bool) (SemaphoreInfo, CoordStatus) {
	return s.coord.DescribeSemaphore(path, name, owners, waiters)
}

// CoordWaiters calls fn for every queued acquire, by node path, semaphore
// name and queue order, so a new leader can arm their timeouts.
func (s *State) CoordWaiters(fn func(path, name string, w Holder)) { s.coord.Waiters(fn) }

// CoordNodes returns every coordination node, by path.
func (s *State) CoordNodes() []NodeInfo { return s.coord.Nodes() }

// SemaphoreNames returns the names of the semaphores of the node at path,
// sorted; none when there is no such node.
func (s *State) SemaphoreNames(path string) []string { return s.coord.SemaphoreNames(path) }

// CoordCounts are coordination's sizes (nodes, sessions, owners, waiters).
type CoordCounts = coordsm.Counts

// CoordCounts returns coordination's sizes, for metrics.
func (s *State) CoordCounts() CoordCounts { return s.coord.Counts() }
