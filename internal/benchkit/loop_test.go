package benchkit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// tokenLock is an in-process lock whose tokens come from a function, so the
// loop's accounting and checks can be exercised without a server.
type tokenLock struct {
	next     func() uint64
	failEach int // every failEach-th acquire fails (0: never)
	calls    int
}

func (l *tokenLock) Acquire(context.Context, string) (uint64, func(context.Context) error, error) {
	l.calls++
	if l.failEach > 0 && l.calls%l.failEach == 0 {
		return 0, nil, errors.New("refused")
	}
	return l.next(), func(context.Context) error { return nil }, nil
}

func TestLockLoopCountsAndChecks(t *testing.T) {
	win := Window{Start: time.Now().Add(-time.Hour), End: time.Now().Add(time.Hour)}
	var tok uint64
	up := &tokenLock{next: func() uint64 { tok++; return tok }}
	rec := &Recorder{}
	LockLoop(context.Background(), up, "k", win, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 50}, &PerKeyCheck{}, rec)
	if rec.Ops != 50 || len(rec.Pair) != 50 || len(rec.Acquire) != 50 || rec.Violations != 0 || rec.Errs != 0 {
		t.Fatalf("increasing tokens: ops=%d pairs=%d acquires=%d violations=%d errs=%d", rec.Ops, len(rec.Pair), len(rec.Acquire), rec.Violations, rec.Errs)
	}

	same := &tokenLock{next: func() uint64 { return 7 }}
	rec = &Recorder{}
	LockLoop(context.Background(), same, "k", win, LoopConfig{Mode: CountAcquires, OpTimeout: time.Second, MaxOps: 10}, &SharedKeyCheck{}, rec)
	if rec.Ops != 10 || len(rec.Pair) != 0 || rec.Violations != 9 {
		t.Fatalf("repeated token: ops=%d pairs=%d violations=%d, want 10, 0, 9", rec.Ops, len(rec.Pair), rec.Violations)
	}

	failing := &tokenLock{next: func() uint64 { tok++; return tok }, failEach: 2}
	rec = &Recorder{}
	LockLoop(context.Background(), failing, "k", win, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 4}, &PerKeyCheck{}, rec)
	if rec.Ops != 2 || rec.Errs != 2 || len(rec.ErrSamples) != 2 {
		t.Fatalf("failing acquires: ops=%d errs=%d samples=%v", rec.Ops, rec.Errs, rec.ErrSamples)
	}

	// Before the window nothing is recorded.
	later := Window{Start: time.Now().Add(time.Hour), End: time.Now().Add(2 * time.Hour)}
	rec = &Recorder{}
	LockLoop(context.Background(), up, "k", later, LoopConfig{Mode: CountPairs, OpTimeout: time.Second, MaxOps: 5}, &PerKeyCheck{}, rec)
	if rec.Ops != 0 || len(rec.Pair) != 0 {
		t.Fatalf("before the window: ops=%d", rec.Ops)
	}
}
