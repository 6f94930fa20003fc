package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// The Go runner of the coordination scenarios of the language-neutral
// conformance suite (testdata/conformance/coordination, described in
// testdata/conformance/README.md): each scenario is served by the scripted
// fake server and driven through a coordination client over a broker.

// coordinationConformanceDir is where the scenarios are;
// TICKETING_CONFORMANCE_COORDINATION overrides it (to run a scenario broken
// on purpose, or the pending ones).
func coordinationConformanceDir() string {
	if d := os.Getenv("TICKETING_CONFORMANCE_COORDINATION"); d != "" {
		return d
	}
	return "../testdata/conformance/coordination"
}

// coordErrorClass names err's class as the scenarios spell it; a class is
// checked before the classes below it.
func coordErrorClass(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{coordination.ErrDeadlinePassed, "deadline_passed"},
		{coordination.ErrLost, "lost"},
		{coordination.ErrReleased, "released"},
		{coordination.ErrWrongKind, "wrong_kind"},
		{coordination.ErrNotFound, "not_found"},
		{coordination.ErrAlreadyExists, "already_exists"},
		{coordination.ErrBadRequest, "bad_request"},
		{coordination.ErrPreconditionFailed, "precondition_failed"},
		{coordination.ErrAborted, "aborted"},
		{coordination.ErrSessionExpired, "session_expired"},
		{coordination.ErrBadSession, "bad_session"},
		{coordination.ErrUnauthorized, "unauthorized"},
		{coordination.ErrLimitExceeded, "limit_exceeded"},
		{ticketing.ErrIndeterminate, "indeterminate"},
		{ticketing.ErrCapacity, "capacity"},
		{ticketing.ErrNotAcquired, "not_acquired"},
		{ticketing.ErrUnauthenticated, "unauthenticated"},
		{ticketing.ErrWrongCluster, "wrong_cluster"},
		{ticketing.ErrClosed, "closed"},
		{context.Canceled, "cancelled"},
		{ticketing.ErrUnavailable, "unavailable"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "unclassified"
}

func TestCoordinationConformance(t *testing.T) {
	t.Parallel()
	faketicketd.RunScenarios(t, coordinationConformanceDir(), runCoordScenario)
}

// sized is s, or n bytes when n > 0 (a path or name for a size rule: a
// path keeps its leading slash).
func sized(s string, n int, prefix string) string {
	if n <= 0 {
		return s
	}
	return prefix + strings.Repeat("x", n-len(prefix))
}

// coordCalls makes a scenario's calls on one coordination client; calls
// may run in the background, so the last session and lease are guarded.
type coordCalls struct {
	c *coordination.Client

	mu      sync.Mutex
	session *coordination.Session
	lease   *coordination.Lease
}

func (cc *coordCalls) current() (*coordination.Session, *coordination.Lease) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.session, cc.lease
}

func (cc *coordCalls) setSession(s *coordination.Session) {
	cc.mu.Lock()
	cc.session = s
	cc.mu.Unlock()
}

func (cc *coordCalls) setLease(l *coordination.Lease) {
	cc.mu.Lock()
	cc.lease = l
	cc.mu.Unlock()
}

// call makes one client step's call, bounded by within.
func (cc *coordCalls) call(step faketicketd.ClientStep, within time.Duration) faketicketd.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var o faketicketd.Outcome
	data := make([]byte, step.DataBytes)
	path := sized(step.Path, step.PathBytes, "/")
	name := sized(step.Name, step.NameBytes, "")
	session, lease := cc.current()
	ok := func(err error, result string) {
		if o.Err = err; err == nil {
			o.Result = result
		}
	}
	switch step.Op {
	case "session":
		s, err := cc.c.Session(ctx, path, coordination.WithTimeout(time.Duration(step.SessionTimeoutMs)*time.Millisecond))
		if o.Err = err; err == nil {
			cc.setSession(s)
			o.Result = "attached"
		}
	case "close_session":
		ok(session.Close(ctx), "closed")
	case "create_node":
		ok(cc.c.CreateNode(ctx, path, coordination.NodeConfig{}), "ok")
	case "describe_node":
		_, err := cc.c.DescribeNode(ctx, path)
		ok(err, "ok")
	case "create_semaphore":
		ok(session.CreateSemaphore(ctx, name, step.Limit, data), "ok")
	case "update_semaphore":
		ok(session.UpdateSemaphore(ctx, name, data), "ok")
	case "delete_semaphore":
		ok(session.DeleteSemaphore(ctx, name, false), "ok")
	case "acquire_semaphore":
		opts := []coordination.AcquireOption{coordination.Timeout(time.Duration(step.WaitMs) * time.Millisecond), coordination.Data(data)}
		if step.Count > 0 {
			opts = append(opts, coordination.Count(uint64(step.Count)))
		}
		if step.Exclusive {
			opts = append(opts, coordination.Exclusive())
		}
		if step.Ephemeral {
			opts = append(opts, coordination.Ephemeral())
		}
		le, err := session.AcquireSemaphore(ctx, name, opts...)
		if o.Err = err; err == nil {
			cc.setLease(le)
			o.Result, o.Token = "acquired", le.Token()
		}
	case "mutex_lock":
		m := session.Mutex(name)
		if o.Err = m.Lock(ctx); o.Err == nil {
			o.Result, o.Token = "acquired", m.Token()
		}
	case "mutex_try_lock":
		m := session.Mutex(name)
		var held bool
		if held, o.Err = m.TryLock(ctx); o.Err == nil {
			o.Result, o.Token = map[bool]string{true: "acquired", false: "not_acquired"}[held], m.Token()
		}
	case "election_campaign":
		var l coordination.Leadership
		if l, o.Err = session.Election(name).Campaign(ctx, data); o.Err == nil {
			o.Result, o.Token = "leading", l.Token
		}
	case "release_semaphore":
		ok(lease.Release(ctx), "released")
	case "lease_valid":
		// The lease's validity, checked on the spot against the deadline.
		o.Result = map[bool]string{true: "valid", false: "invalid"}[lease.Context().Err() == nil]
	case "lease_ended":
		select {
		case <-lease.Context().Done():
			o.Err = context.Cause(lease.Context())
		case <-ctx.Done():
			o.Result = "still valid"
		}
	default:
		o.Result = fmt.Sprintf("op %q is not a coordination op", step.Op)
	}
	return o
}

// runCoordScenario serves sc and drives a coordination client through its
// steps; it returns the first difference from what the scenario expects.
func runCoordScenario(sc *faketicketd.Scenario) error {
	srv, err := faketicketd.ServeScenario(sc, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := ticketing.Connect(srv.ClientAddr(), ticketing.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		return err
	}
	defer c.Close()
	cc := &coordCalls{c: c}
	defer func() {
		if s, _ := cc.current(); s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s.Close(ctx)
			cancel()
		}
	}()
	call := func(_ int, step faketicketd.ClientStep, within time.Duration) <-chan faketicketd.Outcome {
		done := make(chan faketicketd.Outcome, 1)
		go func() { done <- cc.call(step, within) }()
		return done
	}
	// A call bounds itself by within: its outcome is waited for a second more.
	return faketicketd.Driver{Call: call, Class: coordErrorClass, Patience: 20 * time.Second, Slack: time.Second}.Drive(sc, srv)
}
