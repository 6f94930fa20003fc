package coordination

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ensureSemaphore creates the persistent semaphore name with limit 1 unless
// it exists. A create whose answer was lost is fine here: the acquire that
// follows finds out (NOT_FOUND sends it back here).
func (s *Session) ensureSemaphore(ctx context.Context, name string) error {
	err := s.CreateSemaphore(ctx, name, 1, nil)
	if err == nil || errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrIndeterminate) {
		return nil
	}
	return err
}

// acquireOne takes the semaphore name (created with limit 1 if missing).
func (s *Session) acquireOne(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	for {
		if err := s.ensureSemaphore(ctx, name); err != nil {
			return nil, err
		}
		l, err := s.AcquireSemaphore(ctx, name, opts...)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile: create it again
		}
		return l, err
	}
}

// Mutex is a lock held by a session: a persistent semaphore with limit 1
// (created on first use) taken with count 1. Its Token fences the work.
type Mutex struct {
	s    *Session
	name string

	mu    sync.Mutex
	lease *Lease
}

// Mutex returns the lock called name on the session's node.
func (s *Session) Mutex(name string) *Mutex { return &Mutex{s: s, name: name} }

// Lock waits for the lock until ctx ends.
func (m *Mutex) Lock(ctx context.Context) error {
	l, err := m.s.acquireOne(ctx, m.name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.lease = l
	m.mu.Unlock()
	return nil
}

// TryLock takes the lock if it is free now.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	l, err := m.s.acquireOne(ctx, m.name, Timeout(0))
	if errors.Is(err, ErrNotAcquired) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	m.lease = l
	m.mu.Unlock()
	return true, nil
}

// Unlock releases the lock.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	l := m.lease
	m.lease = nil
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: unlock of %s, which this Mutex does not hold", ErrBadRequest, m.name)
	}
	return l.Release(ctx)
}

// Token is the fencing token of the current hold (0 when not held).
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return 0
	}
	return m.lease.Token()
}

// Context ends when the current hold ends (nil when not held).
func (m *Mutex) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return nil
	}
	return m.lease.Context()
}

// Election elects one leader among sessions: a persistent semaphore with
// limit 1 whose owner is the leader, with its data.
type Election struct {
	s    *Session
	name string

	mu    sync.Mutex
	lease *Lease
}

// Election returns the election called name on the session's node.
func (s *Session) Election(name string) *Election { return &Election{s: s, name: name} }

// Campaign waits until this session leads, publishing data (its address,
// say) as the leader's data. The returned context ends when leadership is
// lost (resigned, force-deleted, or the session ended).
func (e *Election) Campaign(ctx context.Context, data []byte) (context.Context, error) {
	l, err := e.s.acquireOne(ctx, e.name, Data(data))
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.lease = l
	e.mu.Unlock()
	return l.Context(), nil
}

// Resign gives up leadership.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.lease = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Release(ctx)
}

// LeaderInfo is an election's leader: its session, token and data. Session
// 0: nobody leads.
type LeaderInfo struct {
	Session, Token uint64
	Data           []byte
}

// Leader returns the current leader (Session 0 when nobody leads).
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	li, _, err := e.leader(ctx, false)
	return li, err
}

func (e *Election) leader(ctx context.Context, watch bool) (LeaderInfo, <-chan Change, error) {
	for {
		d, ch, err := e.s.DescribeSemaphore(ctx, e.name, DescribeOptions{Owners: true, WatchOwners: watch, WatchData: watch})
		if errors.Is(err, ErrNotFound) {
			if err := e.s.ensureSemaphore(ctx, e.name); err != nil {
				return LeaderInfo{}, nil, err
			}
			continue
		}
		if err != nil {
			return LeaderInfo{}, nil, err
		}
		if len(d.Owners) == 0 {
			return LeaderInfo{}, ch, nil
		}
		o := d.Owners[0]
		return LeaderInfo{Session: o.Session, Token: o.OrderID, Data: o.Data}, ch, nil
	}
}

// Observe sends the leader every time it changes (and once at the start),
// until ctx or the session ends; then the channel is closed. It re-describes after every
// watch notification, including the empty one of a lost connection.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	go func() {
		defer close(out)
		var last *LeaderInfo
		for ctx.Err() == nil {
			li, ch, err := e.leader(ctx, true)
			if errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond): // the session is restoring, say
				}
				continue
			}
			if last == nil || li.Session != last.Session || li.Token != last.Token || !bytes.Equal(li.Data, last.Data) {
				select {
				case out <- li:
				case <-ctx.Done():
					return
				}
				last = &li
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
