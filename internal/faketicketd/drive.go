package faketicketd

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file holds what every Go runner of the conformance scenarios does
// alike (the ticket runner and the coordination runner): run the
// scenarios side by side, drive a scenario's client steps, and check each
// step's outcome against the scenario; the runner makes the calls.

// scenariosAtOnce is how many scenarios run at once: most of a scenario's
// time is waiting, so more than the test binary's parallelism (the number
// of CPUs) run side by side, as in the Java and C# runners.
const scenariosAtOnce = 8

// RunScenarios runs every scenario of dir with run, several at once, and
// reports each as a subtest of t, failed with the error run returned.
func RunScenarios(t *testing.T, dir string, run func(*Scenario) error) {
	t.Helper()
	scenarios, err := LoadScenarios(dir)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make([]chan error, len(scenarios))
	slots := make(chan struct{}, scenariosAtOnce)
	for i, sc := range scenarios {
		outcomes[i] = make(chan error, 1)
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			outcomes[i] <- run(sc)
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

// Outcome is what one client step returned: its result word and token, or
// its error.
type Outcome struct {
	Result string
	Token  uint64
	Err    error
}

// Driver drives a scenario's client steps for a runner.
type Driver struct {
	// Call starts step i's call, bounded by within, and returns where its
	// outcome will arrive.
	Call func(i int, step ClientStep, within time.Duration) <-chan Outcome
	// Class names an error's class as the scenarios spell it.
	Class func(error) string
	// Patience bounds a step that gives no within_ms.
	Patience time.Duration
	// Slack is how long past within a step's outcome is waited for (a
	// call that bounds itself by within answers just after it).
	Slack time.Duration
}

// Drive runs sc's client steps against srv: an await_frame step waits for
// the servers to receive frames, a pause step lets its time pass; every
// other step's call is started (in
// the background when the step names one, its outcome awaited by a later
// await step) and its outcome checked against the step's expectation. It
// returns the first difference, else whether the frames the servers were
// sent are the scenario's.
func (d Driver) Drive(sc *Scenario, srv *ScenarioServer) error {
	saw := func() string {
		if v := srv.Violations(); len(v) > 0 {
			return "\nthe server saw: " + strings.Join(v, "; ")
		}
		return ""
	}
	background := map[string]<-chan Outcome{}
	for i, step := range sc.Client {
		within := time.Duration(step.WithinMs) * time.Millisecond
		if within == 0 {
			within = d.Patience
		}
		if step.Op == "await_frame" {
			if !srv.WaitFrames(step.Type, max(step.Count, 1), within, nil) {
				return fmt.Errorf("step %d: the servers did not receive %d %s frames within %v%s", i, max(step.Count, 1), step.Type, within, saw())
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
		done := background[step.Call]
		if step.Op != "await" {
			done = d.Call(i, step, within)
			if step.Background != "" {
				background[step.Background] = done
				continue
			}
		}
		var o Outcome
		select {
		case o = <-done:
		case <-time.After(within + d.Slack):
			return fmt.Errorf("step %d (%s): no outcome within %v (the bound catches a hang)%s", i, step.Op, within, saw())
		}
		got := o.Result
		if o.Err != nil {
			got = "error " + d.Class(o.Err)
		}
		want := step.Expect.Result
		if step.Expect.Error != "" {
			want = "error " + step.Expect.Error
		}
		if got != want {
			return fmt.Errorf("step %d (%s): got %s (%v), want %s%s\nrule: %s", i, step.Op, got, o.Err, want, saw(), sc.Rule)
		}
		if step.Expect.Token != "" && strconv.FormatUint(o.Token, 10) != step.Expect.Token {
			return fmt.Errorf("step %d (%s): token %d, want %s", i, step.Op, o.Token, step.Expect.Token)
		}
		for _, name := range step.Expect.Names {
			if o.Err == nil || !strings.Contains(o.Err.Error(), name) {
				return fmt.Errorf("step %d (%s): the error %v does not name %s\nrule: %s", i, step.Op, o.Err, name, sc.Rule)
			}
		}
	}
	if err := srv.Check(5 * time.Second); err != nil {
		return fmt.Errorf("frames sent: %v\nrule: %s", err, sc.Rule)
	}
	return nil
}
