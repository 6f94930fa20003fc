package ticketing

import (
	"context"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Description is the state of one key as the leader saw it when it answered.
type Description struct {
	Key       string
	Held      bool
	Token     uint64        // the holder's token (0 when free)
	Owner     [16]byte      // the holder's acquire owner
	Remaining time.Duration // the holder's remaining lease as the leader sees it
	Lease     time.Duration // the holder's lease
	Waiters   int           // acquires waiting in the key's queue
}

// Describe reads the state of key (D/I). It is read-only: a connection lost
// before the answer is ErrUnavailable, and nothing is retried automatically.
func (b *Broker) Describe(ctx context.Context, key string) (Description, error) {
	if len(key) == 0 || len(key) > MaxKey {
		return Description{}, invalidArg("describe", key, true, "the key is %d bytes, it must be 1..%d bytes", len(key), MaxKey)
	}
	for {
		c, err := b.getConn(ctx, false)
		if err != nil {
			return Description{}, connectError("describe", key, true, err)
		}
		cl := newCall(wire.TypeDescribe, key)
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)}
		if err := c.start(ctx, cl, &f); err != nil {
			if err == errConnGone {
				continue
			}
			return Description{}, newOpError("describe", key, true, nil, "not sent: no free request slot before "+err.Error(), err)
		}
		a, err := waitAnswer(ctx, c, cl, "describe", key)
		if err != nil {
			return Description{}, err
		}
		return Description{
			Key:       key,
			Held:      a.f.Flags&1 != 0,
			Token:     a.f.Token,
			Owner:     a.f.Owner,
			Remaining: time.Duration(a.f.Remaining) * time.Millisecond,
			Lease:     time.Duration(a.f.LeaseMs) * time.Millisecond,
			Waiters:   int(a.f.Count),
		}, nil
	}
}

// waitAnswer waits for the answer of a request without effect (describe,
// admin). A lost connection is ErrUnavailable (ErrClosed when closing).
func waitAnswer(ctx context.Context, c *conn, cl *call, op, key string) (*answer, error) {
	hasKey := key != ""
	var a *answer
	select {
	case got := <-cl.res:
		a = &got
	case <-ctx.Done():
		if a = c.abandon(cl); a == nil {
			return nil, newOpError(op, key, hasKey, nil, "no answer before "+ctx.Err().Error(), ctx.Err())
		}
	}
	if err := answerError(c, a, op, key); err != nil {
		return nil, err
	}
	return a, nil
}

// answerError is the error for an answer to a request without effect that
// is not a reply: the connection failed (ErrUnavailable, or ErrClosed when
// closing) or the server rejected it for capacity (ErrCapacity).
func answerError(c *conn, a *answer, op, key string) error {
	hasKey := key != ""
	if a.fail != nil {
		kind := ErrUnavailable
		if a.fail.closed() {
			kind = ErrClosed
		}
		return newOpError(op, key, hasKey, a.fail.cause, "no answer: "+a.fail.what(), kind)
	}
	if a.f.Type == wire.TypeForbidden {
		return permissionError(c, &a.f, op, key, "")
	}
	if a.f.Type == wire.TypeCapacity {
		ce := &CapacityError{Addr: c.addr, Reason: CapacityReason(a.f.Reason)}
		return newOpError(op, key, hasKey, ce, "rejected by a server capacity limit: "+ce.Reason.String(), ErrCapacity)
	}
	return nil
}
