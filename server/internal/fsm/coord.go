package fsm

import "github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"

// Coordination's replicated state lives in package coordsm: its kinds are
// op kinds of the log (kinds.go registers them), an Op carries its payload
// in Coord and a Result its outcome. The server and the core use coordsm's
// names for them; these methods read the coordination part of the applied
// state.

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
func (s *State) DescribeNode(path string) (coordsm.NodeInfo, bool) { return s.coord.DescribeNode(path) }

// Session returns session id, if it exists.
func (s *State) Session(id uint64) (coordsm.SessionInfo, bool) { return s.coord.Session(id) }

// Sessions returns every session, of the node at path or of all nodes when
// path is empty, by id.
func (s *State) Sessions(path string) []coordsm.SessionInfo { return s.coord.Sessions(path) }

// DescribeSemaphore returns the semaphore name of the node at path:
// NOT_FOUND if either is missing.
func (s *State) DescribeSemaphore(path, name string, owners, waiters bool) (coordsm.SemaphoreInfo, coordsm.Status) {
	return s.coord.DescribeSemaphore(path, name, owners, waiters)
}

// CoordWaiters calls fn for every queued acquire, by node path, semaphore
// name and queue order, so a new leader can arm their timeouts.
func (s *State) CoordWaiters(fn func(path, name string, w coordsm.Holder)) { s.coord.Waiters(fn) }

// CoordNodes returns every coordination node, by path.
func (s *State) CoordNodes() []coordsm.NodeInfo { return s.coord.Nodes() }

// SemaphoreNames returns the names of the semaphores of the node at path,
// sorted; none when there is no such node.
func (s *State) SemaphoreNames(path string) []string { return s.coord.SemaphoreNames(path) }

// CoordCounts are coordination's sizes (nodes, sessions, owners, waiters).
type CoordCounts = coordsm.Counts

// CoordCounts returns coordination's sizes, for metrics.
func (s *State) CoordCounts() CoordCounts { return s.coord.Counts() }
