package ticketing

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// The Go runner of the language-neutral conformance suite
// (testdata/conformance/README.md): every scenario file is served by the
// scripted fake server and driven through this client; the Java and C#
// runners drive theirs through the same files.

// conformanceDir is where the scenarios are; TICKETING_CONFORMANCE overrides
// it (to run a scenario broken on purpose, say).
func conformanceDir() string {
	if d := os.Getenv("TICKETING_CONFORMANCE"); d != "" {
		return d
	}
	return "testdata/conformance"
}

// errorClass names err's class as the scenarios spell it.
func errorClass(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{ErrIndeterminate, "indeterminate"},
		{ErrCapacity, "capacity"},
		{ErrNotAcquired, "not_acquired"},
		{ErrNotHeldAfterRetry, "not_held_after_retry"},
		{ErrNotHeld, "not_held"},
		{ErrBudgetExceeded, "budget_exceeded"},
		{ErrUnauthenticated, "unauthenticated"},
		{ErrWrongCluster, "wrong_cluster"},
		{ErrPermissionDenied, "permission_denied"},
		{ErrInvalidArgument, "invalid_argument"},
		{ErrClosed, "closed"},
		{context.Canceled, "cancelled"},
		{ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "unclassified"
}

func TestConformance(t *testing.T) {
	t.Parallel()
	faketicketd.RunScenarios(t, conformanceDir(), runScenario)
}

// scenarioOptions turns a scenario's client settings into options.
func scenarioOptions(o faketicketd.ClientOptions) []Option {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	var opts []Option
	if o.ClusterID != "" {
		opts = append(opts, WithClusterID(o.ClusterID))
	}
	return append(opts, withCfg(func(c *config) {
		if o.ReleaseBoundMs > 0 {
			c.releaseBound = ms(o.ReleaseBoundMs)
		}
		if o.ClientPingMs > 0 {
			c.ClientPing = ms(o.ClientPingMs)
		}
		if o.AnswerGraceMs > 0 {
			c.AnswerGrace = ms(o.AnswerGraceMs)
		}
		if o.BackoffMs > 0 {
			c.BackoffBase, c.BackoffMax = ms(o.BackoffMs), ms(o.BackoffMs)
		}
	}))
}

// runScenario serves sc and drives a client through its steps; it returns
// the first difference from what the scenario expects.
func runScenario(sc *faketicketd.Scenario) error {
	srv, err := faketicketd.ServeScenario(sc, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := Connect(srv.ClientAddr(), append([]Option{quiet, fast}, scenarioOptions(sc.Options)...)...)
	if err != nil {
		return err
	}
	defer b.Close()
	var (
		mu     sync.Mutex // ticket is set by calls that may run in the background
		ticket *Ticket
	)
	stop := make(chan struct{})
	defer close(stop)
	call := func(_ int, step faketicketd.ClientStep, within time.Duration) <-chan faketicketd.Outcome {
		var ctx context.Context
		var cancel context.CancelFunc
		if sc.Options.ConnectWaitMs > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(sc.Options.ConnectWaitMs)*time.Millisecond)
		} else {
			ctx, cancel = context.WithCancel(context.Background())
		}
		if step.CancelWhen != "" {
			go func() {
				if srv.WaitFrame(step.CancelWhen, within, stop) {
					cancel()
				}
			}()
		}
		done := make(chan faketicketd.Outcome, 1)
		go func() {
			defer cancel()
			var o faketicketd.Outcome
			switch step.Op {
			case "acquire":
				var tk *Ticket
				tk, o.Err = b.Acquire(ctx, step.Key, time.Duration(step.WaitMs)*time.Millisecond,
					time.Duration(step.LeaseMs)*time.Millisecond, time.Duration(step.BudgetMs)*time.Millisecond)
				if o.Err == nil {
					mu.Lock()
					ticket = tk
					mu.Unlock()
					o.Result, o.Token = "granted", tk.Token()
				}
			case "release":
				mu.Lock()
				tk := ticket
				mu.Unlock()
				if tk == nil {
					o.Err = errors.New("no ticket to release: no earlier acquire was granted")
					break
				}
				if o.Err = tk.Release(ctx); o.Err == nil {
					o.Result = "released"
				}
			case "release_token":
				token, _ := strconv.ParseUint(step.Token, 10, 64)
				if o.Err = b.ReleaseToken(ctx, step.Key, token); o.Err == nil {
					o.Result = "released"
				}
			case "wait_ready":
				wctx, wcancel := context.WithTimeout(ctx, time.Duration(step.TimeoutMs)*time.Millisecond)
				if o.Err = b.WaitReady(wctx); o.Err == nil {
					o.Result = "ready"
				}
				wcancel()
			case "close":
				if o.Err = b.Close(); o.Err == nil {
					o.Result = "closed"
				}
			case "describe":
				var d Description
				if d, o.Err = b.Describe(ctx, step.Key); o.Err == nil {
					o.Result = map[bool]string{true: "held", false: "free"}[d.Held]
				}
			}
			done <- o
		}()
		return done
	}
	return faketicketd.Driver{Call: call, Class: errorClass, Patience: patience}.Drive(sc, srv)
}
