package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
)

var releaseCmd = &command{
	name:    "release",
	args:    "KEY TOKEN",
	summary: "release KEY if TOKEN still holds it",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) != 2 {
				return usageErrorf("release takes KEY TOKEN, got %d arguments", len(args))
			}
			token, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || token == 0 {
				return usageErrorf("release: TOKEN %q is not a ticket token (a positive integer)", args[1])
			}
			return runRelease(e, args[0], token)
		}
	},
}

func init() {
	commandDetails["release"] = `A release never ends a different grant: it succeeds only while TOKEN is
KEY's current holder.

Exit codes: 0 released; 2 not held (the ticket expired or was released
before); 3 capacity reject; 4 indeterminate (the answer was lost: the
ticket may still be held until its lease expires); 1 other.
`
}

type releaseResult struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Released bool   `json:"released"`
}

func runRelease(e *env, key string, token uint64) error {
	ctx, cancel := e.context(0)
	defer cancel()
	if err := releaseToken(ctx, e, key, token); err != nil {
		return err
	}
	res := releaseResult{Key: key, Token: token, Released: true}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "released key %s token %d\n", key, token)
	})
}

// The client library releases only the Tickets it acquired itself, while
// ticketctl releases a ticket that another process acquired, by key and
// token. releaseToken therefore speaks the protocol (docs/protocol.md)
// directly: one connection to the leader (following M), one L frame, one
// final answer. Its errors match the client library's sentinel errors so
// that they map to the same exit codes.
func releaseToken(ctx context.Context, e *env, key string, token uint64) error {
	if len(key) == 0 || len(key) > ticketing.MaxKey {
		return releaseError(ticketing.ErrInvalidArgument, "release: the key must be 1..%d bytes", ticketing.MaxKey)
	}
	tc, err := e.clientTLS()
	if err != nil {
		return err
	}
	queue := e.addrList()
	if len(queue) == 0 {
		return usageErrorf("--addr is empty")
	}
	hops := len(queue) + 3
	var lastErr error
	for len(queue) > 0 && hops > 0 {
		addr := queue[0]
		queue = queue[1:]
		hops--
		nc, r, leader, err := helloSession(ctx, addr, tc, e.g.token, 0)
		if err != nil {
			lastErr = err
			if leader != "" {
				queue = append([]string{leader}, queue...)
			}
			if errors.Is(err, ticketing.ErrUnauthenticated) || ctx.Err() != nil {
				return err
			}
			continue
		}
		return releaseOn(ctx, nc, r, addr, key, token)
	}
	return fmt.Errorf("release of token %d for key %q: no leader reachable through %s: %w", token, key, e.g.addrs, lastErr)
}

// releaseOn sends one release on an established session and waits for its
// final answer. Once L may have been sent, a lost answer is indeterminate.
func releaseOn(ctx context.Context, nc net.Conn, r *wire.Reader, addr, key string, token uint64) error {
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	const id = 1
	lost := func(why string, args ...any) error {
		return releaseError(ticketing.ErrIndeterminate,
			"release of token %d for key %q: outcome unknown: %s; the ticket may still be held until its lease expires",
			token, key, fmt.Sprintf(why, args...))
	}
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeRelease, ID: id, Token: token, Key: []byte(key)})); err != nil {
		return lost("sending to %s failed: %v", addr, err)
	}
	for {
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			return lost("no answer from %s: %v", addr, err)
		}
		switch f.Type {
		case wire.TypePing:
			if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})); err != nil {
				return lost("connection to %s failed: %v", addr, err)
			}
			continue
		case wire.TypeNotLeader:
			return lost("%s stopped leading before answering", addr)
		case wire.TypeError:
			return lost("%s ended the session: %s (code %d): %s", addr, wire.Code(f.Code), f.Code, f.Text)
		}
		if f.ID != id {
			continue
		}
		switch f.Type {
		case wire.TypeReleased:
			return nil
		case wire.TypeNotHeld:
			return releaseError(ticketing.ErrNotHeld, "release of token %d for key %q: the token does not hold the key (it expired or was released before)", token, key)
		case wire.TypeCapacity:
			return releaseError(ticketing.ErrCapacity, "release of token %d for key %q: rejected by a server capacity limit: %s", token, key, ticketing.CapacityReason(f.Reason))
		}
		return lost("%s answered with an unexpected %s frame", addr, f.Type)
	}
}
