package ticketing

import (
	"context"
	"fmt"
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

// Describe reads the state of key. It is read-only: a connection lost
// before the answer, or no answer within DefaultAnswerGrace (or 3 ping
// intervals) on a live connection, is ErrUnavailable; a capacity reject
// is ErrCapacity. Nothing is retried automatically.
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
		a, err := waitAnswer(ctx, c, cl, "describe", key, false)
		if err != nil {
			return Description{}, err
		}
		return Description{
			Key:       key,
			Held:      a.f.Flags&wire.InfoHeld != 0,
			Token:     a.f.Token,
			Owner:     a.f.Owner,
			Remaining: time.Duration(a.f.Remaining) * time.Millisecond,
			Lease:     time.Duration(a.f.LeaseMs) * time.Millisecond,
			Waiters:   int(a.f.Count),
		}, nil
	}
}

// waitAnswer waits for the answer of a describe or admin request, for at
// most answerGrace on a live connection (a server that stops answering but
// keeps the connection alive cannot hold the caller beyond that, whatever
// ctx says). effect marks requests that change the cluster: a lost answer
// is then ErrIndeterminate, otherwise ErrUnavailable (ErrClosed when
// closing).
func waitAnswer(ctx context.Context, c *conn, cl *call, op, key string, effect bool) (*answer, error) {
	hasKey := key != ""
	timer := time.NewTimer(answerGrace(c))
	defer timer.Stop()
	var a *answer
	select {
	case got := <-cl.res:
		a = &got
	case <-ctx.Done():
		if a = c.abandon(cl); a == nil {
			if effect {
				return nil, newOpError(op, key, hasKey, nil, "outcome unknown: no answer before "+ctx.Err().Error()+
					" after the request was sent; it may or may not have been applied: check the cluster's state before repeating it", ctx.Err(), ErrIndeterminate)
			}
			return nil, newOpError(op, key, hasKey, nil, "no answer before "+ctx.Err().Error(), ctx.Err())
		}
	case <-timer.C:
		if a = c.abandon(cl); a == nil {
			msg := fmt.Sprintf("no answer from %s within %v although the connection is alive", c.addr, answerGrace(c))
			if effect {
				return nil, newOpError(op, key, hasKey, nil, "outcome unknown: "+msg+
					"; it may or may not have been applied: check the cluster's state before repeating it", ErrIndeterminate)
			}
			return nil, newOpError(op, key, hasKey, nil, msg+"; try again", ErrUnavailable)
		}
	}
	if err := answerError(c, a, op, key, effect); err != nil {
		return nil, err
	}
	return a, nil
}

// answerError is the error for an answer to a describe or admin request
// that is not a reply: the connection failed (ErrUnavailable, or
// ErrIndeterminate for a request with an effect, plus ErrClosed when
// closing) or the server rejected it for capacity (ErrCapacity).
func answerError(c *conn, a *answer, op, key string, effect bool) error {
	hasKey := key != ""
	if a.fail != nil {
		if effect {
			kinds := []error{ErrIndeterminate}
			if a.fail.closed() {
				kinds = append(kinds, ErrClosed)
			}
			return newOpError(op, key, hasKey, a.fail.cause, "outcome unknown: "+a.fail.what()+
				" after the request was sent; it may or may not have been applied: check the cluster's state before repeating it", kinds...)
		}
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
