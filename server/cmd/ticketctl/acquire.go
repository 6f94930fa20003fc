package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

var acquireCmd = &command{
	name:    "acquire",
	args:    "KEY --wait DUR --lease DUR",
	summary: "acquire the ticket of KEY and print it; it stays held until released or expired",
	setup: func(fs *flag.FlagSet) runFunc {
		wait := fs.Duration("wait", 0, "how long the server may queue the request (0: one immediate attempt; at most 255s)")
		lease := fs.Duration("lease", 0, "lease of the ticket, 1s..250s (required)")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usageErrorf("acquire takes one KEY, got %d arguments", len(args))
			}
			if *lease == 0 {
				return usageErrorf("acquire needs --lease, for example --lease 30s")
			}
			return runAcquire(e, args[0], *wait, *lease)
		}
	},
}

func init() {
	commandDetails["acquire"] = `The ticket is printed and deliberately left held when ticketctl exits:
release it with "ticketctl release KEY TOKEN" or let its lease expire.
The command's time limit is --timeout plus --wait. The deadline printed is
conservative (this machine's clock, never later than the server's).

Exit codes: 0 acquired; 2 not acquired within --wait; 3 capacity reject;
4 indeterminate (the ticket may or may not have been granted); 1 other.
`
}

type acquireResult struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token"`
	LeaseMs  int64  `json:"lease_ms"`
	Deadline string `json:"deadline"`
	// ClusterID is the cluster that granted it ("" from a server that
	// does not report one): its token is meaningful only there.
	ClusterID string `json:"cluster_id"`
}

func runAcquire(e *env, key string, wait, lease time.Duration) error {
	ctx, cancel := e.context(wait)
	defer cancel()
	b, err := e.broker(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	// The work budget is 0: the caller decides what to do with the time left.
	t, err := b.Acquire(ctx, key, wait, lease, 0)
	if err != nil {
		return err
	}
	// The ticket is abandoned on purpose, neither Released nor Closed: it
	// must outlive this process. Closing the broker does not release it.
	res := acquireResult{
		Key:      t.Key(),
		Token:    t.Token(),
		LeaseMs:  t.Lease().Milliseconds(),
		Deadline: t.Deadline().Format(time.RFC3339Nano),

		ClusterID: b.ClusterID(),
	}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "key: %s\ntoken: %d\nlease: %s\ndeadline: %s\n", res.Key, res.Token, t.Lease(), res.Deadline)
		printClusterID(w, res.ClusterID)
	})
}
