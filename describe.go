package ticketing

import (
	"context"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing/internal/transport"
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
		cl := transport.NewRequest(wire.TypeDescribe, key)
		f := wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)}
		if err := c.Start(ctx, cl, &f); err != nil {
			if err == transport.ErrConnGone {
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
			Held:      a.F.Flags&wire.InfoHeld != 0,
			Token:     a.F.Token,
			Owner:     a.F.Owner,
			Remaining: time.Duration(a.F.Remaining) * time.Millisecond,
			Lease:     time.Duration(a.F.LeaseMs) * time.Millisecond,
			Waiters:   int(a.F.Count),
		}, nil
	}
}

// waitAnswer waits for the answer of a describe or admin request, for at
// most answerGrace on a live connection (a server that stops answering but
// keeps the connection alive cannot hold the caller beyond that, whatever
// ctx says). effect marks requests that change the cluster: a lost answer
// is then ErrIndeterminate, otherwise ErrUnavailable (ErrClosed when
// closing).
func waitAnswer(ctx context.Context, c *transport.Conn, cl *transport.Request, op, key string, effect bool) (*transport.Answer, error) {
	hasKey := key != ""
	timer := time.NewTimer(c.AnswerGrace())
	defer timer.Stop()
	var a *transport.Answer
	select {
	case got := <-cl.Res:
		a = &got
	case <-ctx.Done():
		if a = c.Abandon(cl); a == nil {
			if effect {
				return nil, newOpError(op, key, hasKey, nil, "outcome unknown: no answer before "+ctx.Err().Error()+
					" after the request was sent; it may or may not have been applied: check the cluster's state before repeating it", ctx.Err(), ErrIndeterminate)
			}
			return nil, newOpError(op, key, hasKey, nil, "no answer before "+ctx.Err().Error(), ctx.Err())
		}
	case <-timer.C:
		if a = c.Abandon(cl); a == nil {
			msg := fmt.Sprintf("no answer from %s within %v although the connection is alive", c.Addr(), c.AnswerGrace())
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
func answerError(c *transport.Conn, a *transport.Answer, op, key string, effect bool) error {
	hasKey := key != ""
	if a.Fail != nil {
		if effect {
			kinds := []error{ErrIndeterminate}
			if a.Fail.Closed() {
				kinds = append(kinds, ErrClosed)
			}
			return newOpError(op, key, hasKey, a.Fail.Cause, "outcome unknown: "+a.Fail.What()+
				" after the request was sent; it may or may not have been applied: check the cluster's state before repeating it", kinds...)
		}
		kind := ErrUnavailable
		if a.Fail.Closed() {
			kind = ErrClosed
		}
		return newOpError(op, key, hasKey, a.Fail.Cause, "no answer: "+a.Fail.What(), kind)
	}
	if a.F.Type == wire.TypeForbidden {
		return permissionError(c, &a.F, op, key, "")
	}
	if a.F.Type == wire.TypeCapacity {
		ce := &CapacityError{Addr: c.Addr(), Reason: CapacityReason(a.F.Reason)}
		return newOpError(op, key, hasKey, ce, "rejected by a server capacity limit: "+ce.Reason.String(), ErrCapacity)
	}
	return nil
}
