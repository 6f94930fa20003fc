package coordination

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Recipes own their semaphores. Each kind lives in its own name space,
// "recipe/<kind>/<name>", so that recipes of different kinds with the same
// name never meet, and a semaphore created by hand (or by another program)
// under a plain name is never taken for a recipe's. A recipe creates its
// semaphore with a marker in its data ("ticketing-recipe:<kind>", and for a
// Publication the value after it) and refuses, with ErrWrongKind, one whose
// limit or data says it was made otherwise.
const recipeSpace = "recipe/"

// recipeName is the semaphore that recipe kind calls name.
func recipeName(kind, name string) string { return recipeSpace + kind + "/" + name }

// recipeMarker is the data (or the start of the data) of kind's semaphores.
func recipeMarker(kind string) []byte { return []byte("ticketing-recipe:" + kind) }

// checkKind returns ErrWrongKind unless d is a semaphore of kind with limit.
func checkKind(kind string, d SemaphoreDescription, limit uint64, marked func([]byte) bool) error {
	if d.Limit == limit && marked(d.Data) {
		return nil
	}
	return fmt.Errorf("%w: semaphore %q (limit %d, %d bytes of data) was not created by a %s of this package: refusing to use it as one",
		ErrWrongKind, d.Name, d.Limit, len(d.Data), kind)
}

// ensureRecipe creates kind's persistent semaphore sem with limit and data
// unless it exists, and checks that an existing one is kind's.
func (s *Session) ensureRecipe(ctx context.Context, kind, sem string, limit uint64, data []byte, marked func([]byte) bool) error {
	for {
		err := s.CreateSemaphore(ctx, sem, limit, data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrAlreadyExists) && !errors.Is(err, ErrIndeterminate) {
			return err
		}
		d, _, err := s.DescribeSemaphore(ctx, sem, DescribeOptions{})
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile (or the create was lost): again
		}
		if err != nil {
			return err
		}
		return checkKind(kind, d, limit, marked)
	}
}

func isMarker(kind string) func([]byte) bool {
	m := recipeMarker(kind)
	return func(b []byte) bool { return bytes.Equal(b, m) }
}

// acquireOne takes kind's semaphore sem (created with limit 1 if missing,
// checked once per handle).
func (s *Session) acquireOne(ctx context.Context, kind, sem string, checked *bool, opts ...AcquireOption) (*Lease, error) {
	for {
		if !*checked {
			if err := s.ensureRecipe(ctx, kind, sem, 1, recipeMarker(kind), isMarker(kind)); err != nil {
				return nil, err
			}
			*checked = true
		}
		l, err := s.AcquireSemaphore(ctx, sem, opts...)
		if errors.Is(err, ErrNotFound) {
			*checked = false
			continue // deleted meanwhile: create it again
		}
		return l, err
	}
}

// Mutex is a lock held by a session: the persistent semaphore
// "recipe/mutex/<name>" with limit 1 (created on first use, refused with
// ErrWrongKind if it exists with another limit or data), taken with count
// 1. Its Token fences the work.
type Mutex struct {
	s    *Session
	name string

	mu      sync.Mutex
	lease   *Lease
	checked bool
}

// Mutex returns the lock called name on the session's node.
func (s *Session) Mutex(name string) *Mutex { return &Mutex{s: s, name: name} }

func (m *Mutex) acquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	m.mu.Lock()
	checked := m.checked
	m.mu.Unlock()
	l, err := m.s.acquireOne(ctx, "mutex", recipeName("mutex", m.name), &checked, opts...)
	m.mu.Lock()
	m.checked = checked
	m.mu.Unlock()
	return l, err
}

// Lock waits for the lock until ctx ends.
func (m *Mutex) Lock(ctx context.Context) error {
	l, err := m.acquire(ctx)
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
	l, err := m.acquire(ctx, Timeout(0))
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

// Election elects one leader among sessions: the persistent semaphore
// "recipe/election/<name>" with limit 1 (created on first use, refused with
// ErrWrongKind if it exists with another limit or data) whose owner is the
// leader, with its data.
type Election struct {
	s    *Session
	name string

	mu      sync.Mutex
	lease   *Lease
	checked bool
}

// Election returns the election called name on the session's node.
func (s *Session) Election(name string) *Election { return &Election{s: s, name: name} }

func (e *Election) sem() string { return recipeName("election", e.name) }

// Leadership is a won campaign: Context ends when leadership is lost
// (resigned, force-deleted, the session ended, or the session's deadline
// passed: see Lease.Context); Token is the leader's fencing token (the
// hold's order id), to pass with every write the leader makes.
type Leadership struct {
	Context context.Context
	Token   uint64
}

// Campaign waits until this session leads, publishing data (its address,
// say) as the leader's data, and returns the leadership.
func (e *Election) Campaign(ctx context.Context, data []byte) (Leadership, error) {
	e.mu.Lock()
	checked := e.checked
	e.mu.Unlock()
	l, err := e.s.acquireOne(ctx, "election", e.sem(), &checked, Data(data))
	e.mu.Lock()
	e.checked = checked
	if err == nil {
		e.lease = l
	}
	e.mu.Unlock()
	if err != nil {
		return Leadership{}, err
	}
	return Leadership{Context: l.Context(), Token: l.Token()}, nil
}

// Resign gives up this session's leadership of the election, or withdraws
// its campaign, whichever handle of the session campaigned (a Campaign
// still waiting then returns ErrAborted). ErrNotLeading: the session
// neither leads nor campaigns in this election.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.lease = nil
	e.mu.Unlock()
	released, err := release(ctx, e.s.a, e.sem())
	if l != nil {
		e.s.leases.forget(l)
		l.cancel(fmt.Errorf("%w: resigned %s", ErrReleased, e.name))
	}
	if released {
		if le := e.s.leases.take(e.sem()); le != nil {
			le.cancel(fmt.Errorf("%w: resigned %s", ErrReleased, e.name))
		}
	}
	if err != nil {
		return err
	}
	if !released {
		return fmt.Errorf("%w: resign %s: session %d neither leads nor campaigns in it", ErrNotLeading, e.name, e.s.ID())
	}
	return nil
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
		d, ch, err := e.s.DescribeSemaphore(ctx, e.sem(), DescribeOptions{Owners: true, WatchOwners: watch, WatchData: watch})
		if errors.Is(err, ErrNotFound) {
			if err := e.s.ensureRecipe(ctx, "election", e.sem(), 1, recipeMarker("election"), isMarker("election")); err != nil {
				return LeaderInfo{}, nil, err
			}
			continue
		}
		if err != nil {
			return LeaderInfo{}, nil, err
		}
		if err := checkKind("election", d, 1, isMarker("election")); err != nil {
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
			if errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrClosed) || errors.Is(err, ErrWrongKind) {
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
