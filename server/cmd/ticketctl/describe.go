package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"time"
)

var describeCmd = &command{
	name:    "describe",
	args:    "KEY",
	summary: "show KEY's holder (token, owner, remaining lease, lease) and its number of waiters",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usageErrorf("describe takes one KEY, got %d arguments", len(args))
			}
			return runDescribe(e, args[0])
		}
	},
}

type describeResult struct {
	Key         string `json:"key"`
	Held        bool   `json:"held"`
	Token       uint64 `json:"token"`
	Owner       string `json:"owner"`
	RemainingMs int64  `json:"remaining_ms"`
	LeaseMs     int64  `json:"lease_ms"`
	Waiters     int    `json:"waiters"`
	ClusterID   string `json:"cluster_id"`
}

func runDescribe(e *env, key string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	b, err := e.broker(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	d, err := b.Describe(ctx, key)
	if err != nil {
		return err
	}
	res := describeResult{Key: key, Held: d.Held, Waiters: d.Waiters, ClusterID: b.ClusterID()}
	if d.Held {
		res.Token = d.Token
		res.Owner = hex.EncodeToString(d.Owner[:])
		res.RemainingMs = d.Remaining.Milliseconds()
		res.LeaseMs = d.Lease.Milliseconds()
	}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "key: %s\n", key)
		if !d.Held {
			fmt.Fprintf(w, "held: no\nwaiters: %d\n", d.Waiters)
		} else {
			fmt.Fprintf(w, "held: yes\ntoken: %d\nowner: %s\nremaining: %s\nlease: %s\nwaiters: %d\n",
				d.Token, res.Owner, d.Remaining.Round(time.Millisecond), d.Lease, d.Waiters)
		}
		printClusterID(w, res.ClusterID)
	})
}
