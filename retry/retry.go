package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy runs transaction bodies with retries. The zero Policy uses the
// default configuration (DefaultConfig), real timers and math/rand/v2.
type Policy struct {
	// Config is the global configuration, taken literally (see Config).
	// Nil means DefaultConfig().
	Config *Config
	// Sleep waits for d or until ctx is done, returning ctx.Err() in the
	// latter case. Nil means a real timer. Tests inject one so that they
	// never sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a uniform random integer in [0, n) for n > 0. Nil means
	// math/rand/v2.
	Rand func(n int64) int64
}

// Option adjusts one call of Do. For the numeric options zero means "use the
// global value" and a negative value makes Do fail with ErrInvalidConfig
// without running the body.
type Option func(*callOptions)

type callOptions struct {
	idempotent bool
	disabled   bool
	cfg        Config // per-call overrides, zero = global
}

// Idempotent marks the body as safe to run more than once, which lets Do
// retry errors whose failed attempt may already have taken effect
// (Undetermined, TransportUnavailable, ClientTransportError,
// SessionExpired).
func Idempotent(on bool) Option { return func(o *callOptions) { o.idempotent = on } }

// Enabled(false) disables retrying for this call. Enabled(true) cannot
// enable retrying that the global configuration disabled.
func Enabled(on bool) Option { return func(o *callOptions) { o.disabled = !on } }

// MaxAttempts overrides the number of attempts, including the first.
func MaxAttempts(n int) Option { return func(o *callOptions) { o.cfg.MaxAttempts = n } }

// FastBackoff overrides the fast tier's base delay and cap.
func FastBackoff(base, limit time.Duration) Option {
	return func(o *callOptions) { o.cfg.FastBase, o.cfg.FastCap = base, limit }
}

// SlowBackoff overrides the slow tier's base delay and cap.
func SlowBackoff(base, limit time.Duration) Option {
	return func(o *callOptions) { o.cfg.SlowBase, o.cfg.SlowCap = base, limit }
}

// Error is returned by the outermost Do when the body did not succeed. It
// wraps the body's last error (and the context error, if the context stopped
// the retries), so errors.Is and errors.As see through it.
type Error struct {
	Attempts int   // how many times the body ran
	Class    Class // Classify(Err)
	Err      error // the body's last error
	Stopped  error // the context error that cut retrying short, or nil
}

func (e *Error) Error() string {
	noun := "attempts"
	if e.Attempts == 1 {
		noun = "attempt"
	}
	if e.Stopped != nil {
		return fmt.Sprintf("retry: stopped by %v after %d %s, last error (%v): %v", e.Stopped, e.Attempts, noun, e.Class, e.Err)
	}
	return fmt.Sprintf("retry: failed after %d %s (%v): %v", e.Attempts, noun, e.Class, e.Err)
}

func (e *Error) Unwrap() []error {
	if e.Stopped != nil {
		return []error{e.Err, e.Stopped}
	}
	return []error{e.Err}
}

// RetryClass makes a finished retry loop non-retryable, so that a Do that is
// not nested through the context does not multiply another Do's attempts.
func (e *Error) RetryClass() Class { return NonRetryable }

type activeKey struct{}

// Independent returns ctx without the mark Do puts on the context it hands
// its body, so that a Do called with it retries by itself instead of
// running its body once for the outer Do to retry. Use it for an inner
// transaction of its own (Spring's REQUIRES_NEW), never for work that joins
// the outer transaction.
func Independent(ctx context.Context) context.Context {
	if ctx.Value(activeKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, activeKey{}, nil) // shadows the mark
}

// Do runs fn until it succeeds, fails with an error that is not retried
// (see Classify and Class.Retryable), runs out of attempts, or ctx is done.
// It returns nil on success and an *Error otherwise.
//
// fn must run a whole transaction: begin, work, commit. Do passes fn a
// context marked as retrying; a Do given that context (one nested inside fn)
// runs its body once and returns the body's error unchanged, so only the
// outermost call retries, and it retries the whole transaction.
func (p Policy) Do(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	o := callOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := p.settings(o)
	if err != nil {
		return err
	}
	if ctx.Value(activeKey{}) != nil {
		return fn(ctx)
	}
	ctx = context.WithValue(ctx, activeKey{}, struct{}{})
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		class := Classify(err)
		fail := &Error{Attempts: attempt, Class: class, Err: err}
		if s.Disabled || attempt >= s.MaxAttempts || !class.Retryable(o.idempotent) {
			return fail
		}
		if cerr := ctx.Err(); cerr != nil {
			fail.Stopped = cerr
			return fail
		}
		if d := p.delay(s, class.tier(), attempt); d > 0 {
			if serr := p.sleep(ctx, d); serr != nil {
				fail.Stopped = serr
				return fail
			}
		}
	}
}

// settings merges the global configuration with the call's overrides.
func (p Policy) settings(o callOptions) (Config, error) {
	g := DefaultConfig()
	if p.Config != nil {
		g = *p.Config
	}
	if err := g.Validate(); err != nil {
		return Config{}, err
	}
	if err := o.cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("per-call option: %w", err)
	}
	c := o.cfg
	c.Disabled = g.Disabled || o.disabled
	if c.MaxAttempts == 0 {
		c.MaxAttempts = g.MaxAttempts
	}
	for _, f := range []struct{ dst, global *time.Duration }{
		{&c.FastBase, &g.FastBase}, {&c.FastCap, &g.FastCap},
		{&c.SlowBase, &g.SlowBase}, {&c.SlowCap, &g.SlowCap},
	} {
		if *f.dst == 0 {
			*f.dst = *f.global
		}
	}
	return c, nil
}

// delay is the wait before retry number n (n = 1 after the first attempt).
// The ceiling grows as base·2^(n-1) up to the cap.
//
// The fast tier uses "full jitter", a uniform delay in [0, ceiling): it
// answers contention between clients, and spreading the retries as widely as
// possible is what breaks the contention up. The slow tier uses "equal
// jitter", uniform in [ceiling/2, ceiling): it answers an overloaded server,
// so every client is made to back off at least half the ceiling, while the
// random half still keeps clients from retrying in step.
func (p Policy) delay(c Config, t tier, n int) time.Duration {
	var base, limit time.Duration
	switch t {
	case tierFast:
		base, limit = c.FastBase, c.FastCap
	case tierSlow:
		base, limit = c.SlowBase, c.SlowCap
	default:
		return 0
	}
	ceiling := limit
	if shift := n - 1; shift < 63 && base <= limit>>shift {
		ceiling = base << shift
	}
	if t == tierFast {
		return time.Duration(p.rand(int64(ceiling)))
	}
	half := ceiling / 2
	return half + time.Duration(p.rand(int64(ceiling-half)))
}

func (p Policy) rand(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if p.Rand != nil {
		return p.Rand(n)
	}
	return rand.Int64N(n)
}

func (p Policy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return sleep(ctx, d)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do runs fn with the default policy: DefaultConfig, real timers and
// math/rand/v2. It does not read the environment: a program that wants the
// TICKETING_RETRY_* variables asks for them with ConfigFromEnv and runs a
// Policy with the result.
func Do(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	return Policy{}.Do(ctx, fn, opts...)
}
