package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/ticketing-io/ticketing"
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

A release whose answer is lost is sent again, with the same TOKEN and
across reconnects, for at most 5 s.

Exit codes: 0 released; 2 not held (the ticket expired or was released
before); 3 capacity reject; 4 indeterminate (no answer within 5 s: the
ticket may still be held until its lease expires); 1 other.
`
}

type releaseResult struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	Released bool   `json:"released"`
	// ClusterID is the cluster that released it.
	ClusterID string `json:"cluster_id"`
}

func runRelease(e *env, key string, token uint64) error {
	if len(key) == 0 || len(key) > ticketing.MaxKey {
		return usageErrorf("release: KEY must be 1..%d bytes, got %d", ticketing.MaxKey, len(key))
	}
	ctx, cancel := e.context(0)
	defer cancel()
	b, err := e.broker(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	// The exact token, retried across reconnects for at most
	// ticketing.ReleaseBound; a lost answer is indeterminate, never success.
	if err := b.ReleaseToken(ctx, key, token); err != nil {
		return err
	}
	res := releaseResult{Key: key, Token: token, Released: true, ClusterID: b.ClusterID()}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "released key %s token %d\n", key, token)
	})
}
