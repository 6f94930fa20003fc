package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// coordFlags are the flags of the coordination verbs; each verb accepts
// only its own (coordVerbFlags).
type coordFlags struct {
	selfCheck, grace                       time.Duration
	readMode, attachMode                   string
	maxSessions, maxSemaphores, maxWaiters uint
	limit                                  uint64
	data                                   string
	force                                  bool
}

var coordNodeConfigFlags = []string{"self-check-period", "grace-period", "read-mode", "attach-mode", "max-sessions", "max-semaphores", "max-waiters"}

// coordVerbFlags lists, per verb, the coordination flags it takes.
var coordVerbFlags = map[string][]string{
	"nodes create":        coordNodeConfigFlags,
	"nodes alter":         coordNodeConfigFlags,
	"nodes drop":          nil,
	"nodes describe":      nil,
	"sessions list":       nil,
	"semaphores create":   {"limit", "data"},
	"semaphores describe": nil,
	"semaphores delete":   {"force"},
}

var coordinationCmd = &command{
	name:    "coordination",
	args:    "nodes|sessions|semaphores VERB ...",
	summary: "manage coordination nodes, list sessions, create/describe/delete semaphores",
	setup: func(fs *flag.FlagSet) runFunc {
		f := &coordFlags{}
		fs.DurationVar(&f.selfCheck, "self-check-period", 0, "nodes create/alter: self_check_period (default 1s)")
		fs.DurationVar(&f.grace, "grace-period", 0, "nodes create/alter: session_grace_period, above the self-check period (default 10s)")
		fs.StringVar(&f.readMode, "read-mode", "", "nodes create/alter: read_consistency_mode, relaxed or strict (default relaxed)")
		fs.StringVar(&f.attachMode, "attach-mode", "", "nodes create/alter: attach_consistency_mode, strict or relaxed (default strict)")
		fs.UintVar(&f.maxSessions, "max-sessions", 0, "nodes create/alter: session limit (default 10000)")
		fs.UintVar(&f.maxSemaphores, "max-semaphores", 0, "nodes create/alter: semaphore limit (default 10000)")
		fs.UintVar(&f.maxWaiters, "max-waiters", 0, "nodes create/alter: waiter limit (default 10000)")
		fs.Uint64Var(&f.limit, "limit", 0, "semaphores create: the semaphore's limit, > 0 (required)")
		fs.StringVar(&f.data, "data", "", "semaphores create: the semaphore's data")
		fs.BoolVar(&f.force, "force", false, "semaphores delete: delete even with owners (they are told) or waiters (aborted)")
		return func(e *env, args []string) error {
			if len(args) < 2 {
				return usageErrorf("coordination needs a group and a verb: nodes create|alter|drop|describe PATH, sessions list PATH, semaphores create|describe|delete PATH NAME")
			}
			verb := args[0] + " " + args[1]
			allowed, ok := coordVerbFlags[verb]
			if !ok {
				return usageErrorf("unknown coordination verb %q", verb)
			}
			var bad []string
			fs.Visit(func(fl *flag.Flag) {
				if _, global := globalFlagNames()[fl.Name]; global {
					return
				}
				for _, a := range allowed {
					if a == fl.Name {
						return
					}
				}
				bad = append(bad, "--"+fl.Name)
			})
			if len(bad) > 0 {
				return usageErrorf("coordination %s does not take %s", verb, strings.Join(bad, ", "))
			}
			rest := args[2:]
			switch args[0] {
			case "nodes":
				if len(rest) != 1 {
					return usageErrorf("coordination %s takes one PATH, got %d arguments", verb, len(rest))
				}
				return runCoordNodes(e, args[1], rest[0], f, fs)
			case "sessions":
				if len(rest) != 1 {
					return usageErrorf("coordination %s takes one PATH, got %d arguments", verb, len(rest))
				}
				return runCoordSessionsList(e, rest[0])
			default:
				if len(rest) != 2 {
					return usageErrorf("coordination %s takes PATH NAME, got %d arguments", verb, len(rest))
				}
				return runCoordSemaphores(e, args[1], rest[0], rest[1], f, fs)
			}
		}
	},
}

func init() {
	commandDetails["coordination"] = `Coordination nodes (docs/coordination.md):
  coordination nodes create PATH [--self-check-period D] [--grace-period D]
                                 [--read-mode relaxed|strict] [--attach-mode strict|relaxed]
                                 [--max-sessions N] [--max-semaphores N] [--max-waiters N]
  coordination nodes alter PATH  [the same flags; only those given change]
  coordination nodes drop PATH   (its sessions end, told EXPIRED)
  coordination nodes describe PATH
  coordination sessions list PATH
  coordination semaphores create PATH NAME --limit N [--data TEXT]
  coordination semaphores describe PATH NAME   (with owners and waiters)
  coordination semaphores delete PATH NAME [--force]
The semaphore verbs open a short session on the node and stop it before they
exit. Requests carry --token (a client principal may use the nodes under its
key_prefixes). A status other than SUCCESS exits 1 with its name as the JSON
code ("not_found", "already_exists", "bad_request", "precondition_failed",
...); UNAUTHORIZED exits 5 ("permission_denied"); a create, alter, drop or
delete whose answer was lost exits 4 ("indeterminate").
`
}

// globalFlagNames are the flags every command has.
func globalFlagNames() map[string]struct{} {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	defineGlobals(fs, new(globals))
	out := map[string]struct{}{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = struct{}{} })
	return out
}

// coordClient connects to the cluster for coordination requests with
// --token and the TLS flags: a Ticketing client (the same options as every
// other command) and the coordination client over it. close closes both.
func (e *env) coordClient() (c *coordination.Client, close func(), err error) {
	b, err := ticketing.Connect(e.g.addrs, e.options()...)
	if err != nil {
		return nil, nil, err
	}
	c, err = coordination.New(b)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); b.Close() }, nil
}

// coordRun runs fn with a coordination client, bounded by --timeout.
func (e *env) coordRun(fn func(ctx context.Context, c *coordination.Client) error) error {
	ctx, cancel := e.context(0)
	defer cancel()
	c, closeAll, err := e.coordClient()
	if err != nil {
		return err
	}
	defer closeAll()
	return fn(ctx, c)
}

// coordCode is the JSON code of a coordination status error ("not_found").
func coordCode(err error) (string, bool) {
	var se *coordination.StatusError
	if !errors.As(err, &se) {
		return "", false
	}
	return strings.ToLower(wire.CoordStatusName(se.Status)), true
}
