package ticketing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// conformanceParallel is how many scenarios run at once: most of a
// scenario's time is waiting, so more than the test binary's parallelism
// (the number of CPUs) run side by side, as in the Java and C# runners.
const conformanceParallel = 8

func TestConformance(t *testing.T) {
	t.Parallel()
	scenarios, err := faketicketd.LoadScenarios(conformanceDir())
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make([]chan error, len(scenarios))
	slots := make(chan struct{}, conformanceParallel)
	for i, sc := range scenarios {
		outcomes[i] = make(chan error, 1)
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			outcomes[i] <- runScenario(sc)
		}()
	}
	for i, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if err := <-outcomes[i]; err != nil {
				t.Fatal(err)
			}
		})
	}
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

// serverSaw is what the fake server found wrong so far, for a failed step's
// message (a request sent too early explains a step that then hung).
func serverSaw(srv *faketicketd.ScenarioServer) string {
	if v := srv.Violations(); len(v) > 0 {
		return "\nthe server saw: " + strings.Join(v, "; ")
	}
	return ""
}

// scenarioOutcome is what one client step returned.
type scenarioOutcome struct {
	result string
	token  uint64
	err    error
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
	background := map[string]chan scenarioOutcome{}
	stop := make(chan struct{})
	defer close(stop)
	for i, step := range sc.Client {
		within := time.Duration(step.WithinMs) * time.Millisecond
		if within == 0 {
			within = patience
		}
		if step.Op == "await_frame" {
			if !srv.WaitFrames(step.Type, max(step.Count, 1), within, nil) {
				return fmt.Errorf("step %d: the servers did not receive %d %s frames within %v%s", i, max(step.Count, 1), step.Type, within, serverSaw(srv))
			}
			continue
		}
		if step.Op == "pause" {
			// The scenario's idle time: no call is made, the connection
			// stays as it is (the pause is the stimulus, not a wait for a
			// condition).
			time.Sleep(time.Duration(step.PauseMs) * time.Millisecond)
			continue
		}
		var done chan scenarioOutcome
		if step.Op == "await" {
			done = background[step.Call]
		} else {
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
			done = make(chan scenarioOutcome, 1)
			go func() {
				defer cancel()
				var o scenarioOutcome
				switch step.Op {
				case "acquire":
					var tk *Ticket
					tk, o.err = b.Acquire(ctx, step.Key, time.Duration(step.WaitMs)*time.Millisecond,
						time.Duration(step.LeaseMs)*time.Millisecond, time.Duration(step.BudgetMs)*time.Millisecond)
					if o.err == nil {
						mu.Lock()
						ticket = tk
						mu.Unlock()
						o.result, o.token = "granted", tk.Token()
					}
				case "release":
					mu.Lock()
					tk := ticket
					mu.Unlock()
					if tk == nil {
						o.err = errors.New("no ticket to release: no earlier acquire was granted")
						break
					}
					if o.err = tk.Release(ctx); o.err == nil {
						o.result = "released"
					}
				case "release_token":
					token, _ := strconv.ParseUint(step.Token, 10, 64)
					if o.err = b.ReleaseToken(ctx, step.Key, token); o.err == nil {
						o.result = "released"
					}
				case "wait_ready":
					wctx, wcancel := context.WithTimeout(ctx, time.Duration(step.TimeoutMs)*time.Millisecond)
					if o.err = b.WaitReady(wctx); o.err == nil {
						o.result = "ready"
					}
					wcancel()
				case "close":
					if o.err = b.Close(); o.err == nil {
						o.result = "closed"
					}
				case "describe":
					var d Description
					if d, o.err = b.Describe(ctx, step.Key); o.err == nil {
						o.result = map[bool]string{true: "held", false: "free"}[d.Held]
					}
				}
				done <- o
			}()
			if step.Background != "" {
				background[step.Background] = done
				continue
			}
		}
		var o scenarioOutcome
		select {
		case o = <-done:
		case <-time.After(within):
			return fmt.Errorf("step %d (%s): no outcome within %v (the bound catches a hang)%s", i, step.Op, within, serverSaw(srv))
		}
		got := o.result
		if o.err != nil {
			got = "error " + errorClass(o.err)
		}
		want := step.Expect.Result
		if step.Expect.Error != "" {
			want = "error " + step.Expect.Error
		}
		if got != want {
			return fmt.Errorf("step %d (%s): got %s (%v), want %s%s\nrule: %s", i, step.Op, got, o.err, want, serverSaw(srv), sc.Rule)
		}
		if step.Expect.Token != "" && strconv.FormatUint(o.token, 10) != step.Expect.Token {
			return fmt.Errorf("step %d (%s): token %d, want %s", i, step.Op, o.token, step.Expect.Token)
		}
		for _, name := range step.Expect.Names {
			if o.err == nil || !strings.Contains(o.err.Error(), name) {
				return fmt.Errorf("step %d (%s): the error %v does not name %s\nrule: %s", i, step.Op, o.err, name, sc.Rule)
			}
		}
	}
	if err := srv.Check(5 * time.Second); err != nil {
		return fmt.Errorf("frames sent: %v\nrule: %s", err, sc.Rule)
	}
	return nil
}
