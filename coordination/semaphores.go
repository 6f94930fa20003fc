package coordination

import (
	"context"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// CreateSemaphore creates a persistent semaphore with limit > 0.
func (s *Session) CreateSemaphore(ctx context.Context, name string, limit uint64, data []byte) error {
	_, err := s.a.do(ctx, "create semaphore "+name, wire.CoordCreateSemaphore, &wire.Coord{Name: []byte(name), Limit: limit, Data: data}, false, nil)
	return err
}

// UpdateSemaphore replaces the semaphore's data (no ownership needed).
func (s *Session) UpdateSemaphore(ctx context.Context, name string, data []byte) error {
	_, err := s.a.do(ctx, "update semaphore "+name, wire.CoordUpdateSemaphore, &wire.Coord{Name: []byte(name), Data: data}, false, nil)
	return err
}

// DeleteSemaphore deletes the semaphore. Without force a semaphore in use
// is ErrPreconditionFailed; with force its waiters are aborted and its
// owners lose their leases (their Context ends).
func (s *Session) DeleteSemaphore(ctx context.Context, name string, force bool) error {
	b := &wire.Coord{Name: []byte(name)}
	if force {
		b.Flags = wire.CoordFlagForce
	}
	_, err := s.a.do(ctx, "delete semaphore "+name, wire.CoordDeleteSemaphore, b, false, nil)
	return err
}
