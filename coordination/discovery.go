package coordination

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Discovery is service discovery: every member of a service registers its
// endpoint as its owner data on the service's semaphore,
// "recipe/discovery/<name>" (one unit, taken with Ephemeral, so the
// semaphore exists while anyone is registered); List and Watch read the
// owners. A semaphore of that name that is neither ephemeral nor made by
// Watch (limit 2^64-1, marker data) is refused with ErrWrongKind. A registration ends with its lease: released,
// or its session ended (a crashed member is gone once its session timeout
// passes).
type Discovery struct {
	s    *Session
	name string
}

// Discovery returns the service called name on the session's node.
func (s *Session) Discovery(name string) *Discovery {
	return &Discovery{s: s, name: recipeName("discovery", name)}
}

// check refuses a service semaphore that Discovery did not make.
func (d *Discovery) check(desc SemaphoreDescription) error {
	return checkKind("discovery", desc, math.MaxUint64, func(b []byte) bool {
		return (desc.Ephemeral && len(b) == 0) || bytes.Equal(b, recipeMarker("discovery"))
	})
}

// Endpoint is one registered member of a service.
type Endpoint struct {
	Session uint64 // the member's session
	Token   uint64 // its registration's order id
	Data    []byte // the endpoint it registered
}

// Register publishes endpoint for this session until the returned lease is
// released or the session ends. Registering again replaces the endpoint
// (the same hold, new data). Safe to retry: a re-sent acquire replaces
// itself.
func (d *Discovery) Register(ctx context.Context, endpoint []byte) (*Lease, error) {
	desc, _, err := d.s.DescribeSemaphore(ctx, d.name, DescribeOptions{})
	switch {
	case errors.Is(err, ErrNotFound): // the acquire creates it
	case err != nil:
		return nil, err
	default:
		if err := d.check(desc); err != nil {
			return nil, err
		}
	}
	return d.s.AcquireSemaphore(ctx, d.name, Ephemeral(), Shared(), Data(endpoint))
}

// List returns the registered endpoints in registration (order id) order;
// none when nobody is registered.
func (d *Discovery) List(ctx context.Context) ([]Endpoint, error) {
	eps, _, err := d.list(ctx, false)
	return eps, err
}

func (d *Discovery) list(ctx context.Context, watch bool) ([]Endpoint, <-chan Change, error) {
	for {
		desc, ch, err := d.s.DescribeSemaphore(ctx, d.name, DescribeOptions{Owners: true, WatchOwners: watch})
		if errors.Is(err, ErrNotFound) {
			if !watch {
				return nil, nil, nil
			}
			// Nobody is registered, so there is nothing to watch: create the
			// semaphore as a persistent one that registrations can join
			// (their ephemeral flag only creates a missing one), and watch it.
			err := d.s.CreateSemaphore(ctx, d.name, math.MaxUint64, recipeMarker("discovery"))
			if err != nil && !errors.Is(err, ErrAlreadyExists) && !errors.Is(err, ErrIndeterminate) {
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if err := d.check(desc); err != nil {
			return nil, nil, err
		}
		eps := make([]Endpoint, 0, len(desc.Owners))
		for _, o := range desc.Owners {
			eps = append(eps, Endpoint{Session: o.Session, Token: o.OrderID, Data: o.Data})
		}
		return eps, ch, nil
	}
}

// Watch sends the endpoints at the start and every time they change, until
// ctx or the session ends; then the channel is closed. It describes again
// after every watch notification, including the empty one of a lost
// connection, and sends only lists that differ from the last one sent. To
// watch a service nobody has registered yet it creates the service's
// semaphore as a persistent one (limit 2^64-1), which stays after the
// members leave.
func (d *Discovery) Watch(ctx context.Context) <-chan []Endpoint {
	out := make(chan []Endpoint, 1)
	go func() {
		defer close(out)
		var last []Endpoint
		first := true
		for ctx.Err() == nil {
			eps, ch, err := d.list(ctx, true)
			if errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrClosed) || errors.Is(err, ErrWrongKind) {
				return
			}
			if err != nil {
				if !pause(ctx) {
					return
				}
				continue
			}
			if first || !sameEndpoints(eps, last) {
				select {
				case out <- eps:
				case <-ctx.Done():
					return
				}
				last, first = eps, false
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

func sameEndpoints(a, b []Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Session != b[i].Session || a[i].Token != b[i].Token || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// pause waits a little before a watcher describes again after an error (the
// session is restoring, say); false when ctx ended.
func pause(ctx context.Context) bool {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Publication is configuration publication: one value (any bytes) kept in
// the data of the persistent semaphore "recipe/publication/<name>" (limit
// 1) after a marker, published by Publish and followed by Get and Watch
// through data watches. The marker alone means unset (Watch creates it so),
// the marker and '=' then the value means set, so an empty value is told
// from none. A semaphore of that name with another limit or data is
// refused with ErrWrongKind.
type Publication struct {
	s    *Session
	name string
}

// Publication returns the configuration value called name on the session's
// node.
func (s *Session) Publication(name string) *Publication {
	return &Publication{s: s, name: recipeName("publication", name)}
}

// publicationData is the semaphore data of a published value.
func publicationData(value []byte) []byte {
	return append(append(recipeMarker("publication"), '='), value...)
}

// value decodes a publication's data: set reports whether a value was
// published; ErrWrongKind when the semaphore is not a publication's.
func (p *Publication) value(d SemaphoreDescription) (v []byte, set bool, err error) {
	m := recipeMarker("publication")
	if err := checkKind("publication", d, 1, func(b []byte) bool { return bytes.HasPrefix(b, m) }); err != nil {
		return nil, false, err
	}
	rest := d.Data[len(m):]
	switch {
	case len(rest) == 0:
		return nil, false, nil
	case rest[0] == '=':
		return append([]byte{}, rest[1:]...), true, nil
	}
	return nil, false, checkKind("publication", d, 1, func([]byte) bool { return false })
}

// Publish sets the value, creating its semaphore if missing. Publishing the
// same value twice is harmless, so an update whose answer was lost with the
// connection is sent again after the session is restored.
func (p *Publication) Publish(ctx context.Context, value []byte) error {
	data := publicationData(value)
	for {
		d, _, err := p.s.DescribeSemaphore(ctx, p.name, DescribeOptions{})
		if errors.Is(err, ErrNotFound) {
			err = p.s.CreateSemaphore(ctx, p.name, 1, data)
			if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrIndeterminate) {
				continue // created meanwhile, or maybe by us: check and set the value
			}
			return err
		}
		if err != nil {
			return err
		}
		if _, _, err := p.value(d); err != nil {
			return err
		}
		err = p.s.UpdateSemaphore(ctx, p.name, data)
		if errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotFound) {
			continue // idempotent: set it again (or create it again)
		}
		return err
	}
}

// Get returns the value; ErrNotFound when it was never published (or its
// semaphore exists unset, as Watch creates it). An empty published value
// is an empty, non-nil slice.
func (p *Publication) Get(ctx context.Context) ([]byte, error) {
	d, _, err := p.s.DescribeSemaphore(ctx, p.name, DescribeOptions{})
	if err != nil {
		return nil, err
	}
	v, set, err := p.value(d)
	if err != nil {
		return nil, err
	}
	if !set {
		return nil, fmt.Errorf("%w: publication %s is not set", ErrNotFound, p.name)
	}
	return v, nil
}

// Watch sends the value at the start and every time it changes, until ctx
// or the session ends (or the semaphore is found not to be a publication's);
// then the channel is closed. nil means unset, an empty non-nil slice an
// empty value. It describes again after every notification, including the
// empty one of a lost connection, and sends only values that differ from
// the last one sent. A value not yet published has its semaphore created
// unset, so that it can be watched.
func (p *Publication) Watch(ctx context.Context) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		defer close(out)
		var last []byte
		lastSet, first := false, true
		for ctx.Err() == nil {
			d, ch, err := p.s.DescribeSemaphore(ctx, p.name, DescribeOptions{WatchData: true})
			if errors.Is(err, ErrNotFound) {
				err = p.s.CreateSemaphore(ctx, p.name, 1, recipeMarker("publication"))
				if err == nil || errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrIndeterminate) {
					continue
				}
			}
			if errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				if !pause(ctx) {
					return
				}
				continue
			}
			v, set, err := p.value(d)
			if err != nil {
				return
			}
			if first || set != lastSet || !bytes.Equal(v, last) {
				select {
				case out <- v:
				case <-ctx.Done():
					return
				}
				last, lastSet, first = v, set, false
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
