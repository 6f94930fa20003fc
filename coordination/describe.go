package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Holder is an owner or waiter of a semaphore.
type Holder struct {
	OrderID, Session, Count uint64
	// Timeout is the acquire's queue timeout; Forever reports one that
	// waits without a timeout (Timeout is then the longest duration).
	Timeout time.Duration
	Forever bool
	Data    []byte
}

// TimeoutString is Timeout as text, "forever" for a wait without a timeout.
func (h Holder) TimeoutString() string {
	if h.Forever {
		return "forever"
	}
	return h.Timeout.String()
}

// SemaphoreDescription is a semaphore as DescribeSemaphore saw it.
type SemaphoreDescription struct {
	Name            string
	Limit, Count    uint64
	Data            []byte
	Ephemeral       bool
	Owners, Waiters []Holder
}

// DescribeOptions says what DescribeSemaphore includes and watches.
type DescribeOptions struct {
	Owners, Waiters        bool
	WatchData, WatchOwners bool
}

// DescribeSemaphore describes the semaphore. With a watch option it also
// returns a channel that receives one Change and is closed.
//
// The server answers at most 1 MiB of data, owners and waiters at a time
// (docs/coordination.md, "Describe and watches"); DescribeSemaphore asks for
// every page and returns the complete lists. The pages are separate reads,
// not one snapshot, so every page carries the semaphore's version (which
// changes with every change of its data, owners or waiters); when a page's
// version differs from the first page's, DescribeSemaphore starts again
// from the first page, until the pages agree or ctx ends. The description
// returned is therefore the semaphore as it was at one moment, and the
// watch, set with the first page, fires on any change after that moment.
func (s *Session) DescribeSemaphore(ctx context.Context, name string, opt DescribeOptions) (SemaphoreDescription, <-chan Change, error) {
	var lists, watches uint8
	if opt.Owners {
		lists |= wire.CoordFlagOwners
	}
	if opt.Waiters {
		lists |= wire.CoordFlagWaiters
	}
	if opt.WatchData {
		watches |= wire.CoordFlagWatchData
	}
	if opt.WatchOwners {
		watches |= wire.CoordFlagWatchOwners
	}
	for {
		d, ch, err := s.describePages(ctx, name, lists, watches)
		if !errors.Is(err, errVersionChanged) {
			return d, ch, err
		}
	}
}

// errVersionChanged: a page came from a later state than the first page.
var errVersionChanged = errors.New("the semaphore changed between pages")

// describePages reads every page once.
func (s *Session) describePages(ctx context.Context, name string, lists, watches uint8) (SemaphoreDescription, <-chan Change, error) {
	var w *watch
	var note func(wire.Frame)
	if watches != 0 {
		w = &watch{ch: make(chan Change, 1)}
		note = func(f wire.Frame) {
			var b wire.Coord
			if wire.DecodeCoord(&f, &b) == nil && f.Op == wire.CoordChanged {
				s.watches.remove(w)
				w.fire(Change{DataChanged: b.Flags&wire.CoordFlagChangedData != 0, OwnersChanged: b.Flags&wire.CoordFlagChangedOwners != 0})
			}
		}
		s.watches.add(w)
	}
	fail := func(err error) (SemaphoreDescription, <-chan Change, error) {
		if w != nil {
			// A later describe replaces the server's watch (this one
			// then fires empty, to a channel nobody has).
			s.watches.remove(w)
		}
		return SemaphoreDescription{}, nil, err
	}
	what := "describe semaphore " + name
	b, err := s.a.do(ctx, what, wire.CoordDescribeSemaphore, &wire.Coord{Name: []byte(name), Flags: lists | watches}, true, note)
	if err != nil {
		return fail(err)
	}
	d := SemaphoreDescription{Name: name, Limit: b.Limit, Count: b.Count, Data: b.Data, Ephemeral: b.Flags&wire.CoordFlagEphemeral != 0,
		Owners: toHolders(b.Owners), Waiters: toHolders(b.Queue)}
	var after uint64
	for page := b; page.Flags&wire.CoordFlagMoreHolders != 0; {
		// Owners' order ids are all below the waiters': the last listed
		// is the last waiter's, or the last owner's.
		if n := len(d.Waiters); n > 0 {
			after = d.Waiters[n-1].OrderID
		} else if n := len(d.Owners); n > 0 {
			after = d.Owners[n-1].OrderID
		}
		page, err = s.a.do(ctx, what, wire.CoordDescribeSemaphore, &wire.Coord{Name: []byte(name), Flags: lists | wire.CoordFlagNoData, After: after}, true, nil)
		if err != nil {
			return fail(err)
		}
		if page.Version != b.Version {
			return fail(errVersionChanged)
		}
		if len(page.Owners)+len(page.Queue) == 0 {
			// A page without data always lists someone: this server does not
			// page as docs/protocol.md says, and asking again would loop.
			return fail(fmt.Errorf("%w: %s: the leader answered a page that lists nobody yet says more follow: upgrade it", ErrUnavailable, what))
		}
		d.Owners = append(d.Owners, toHolders(page.Owners)...)
		d.Waiters = append(d.Waiters, toHolders(page.Queue)...)
	}
	if w == nil {
		return d, nil, nil
	}
	return d, w.ch, nil
}

func toHolders(hs []wire.CoordHolder) []Holder {
	var out []Holder
	for _, h := range hs {
		out = append(out, Holder{OrderID: h.OrderID, Session: h.Session, Count: h.Count,
			Timeout: time.Duration(min(h.TimeoutMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond,
			Forever: h.TimeoutMs == wire.CoordWaitForever, Data: h.Data})
	}
	return out
}
