package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an injected sleeper: it records the delays and never waits.
type recorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delays = append(r.delays, d)
	return ctx.Err()
}

// failing returns a body that always fails with class c and counts its runs.
func failing(c Class, runs *int) func(context.Context) error {
	return func(context.Context) error {
		*runs++
		return WithClass(errors.New("transient"), c)
	}
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestBackoffBounds(t *testing.T) {
	fastCeil := []time.Duration{ms(5), ms(10), ms(20), ms(40), ms(80), ms(160), ms(320), ms(500), ms(500)}
	slowCeil := []time.Duration{ms(50), ms(100), ms(200), ms(400), ms(800), ms(1600), ms(3200), ms(5000), ms(5000)}
	for _, tc := range []struct {
		name  string
		class Class
		ceil  []time.Duration
		// lowest and highest delay for a ceiling
		lo, hi func(time.Duration) time.Duration
	}{
		{"fast full jitter", Aborted, fastCeil,
			func(time.Duration) time.Duration { return 0 },
			func(c time.Duration) time.Duration { return c - 1 }},
		{"slow equal jitter", Overloaded, slowCeil,
			func(c time.Duration) time.Duration { return c / 2 },
			func(c time.Duration) time.Duration { return c - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, extreme := range []string{"min", "max"} {
				rec := &recorder{}
				p := Policy{Sleep: rec.sleep, Rand: func(n int64) int64 {
					if extreme == "min" {
						return 0
					}
					return n - 1
				}}
				runs := 0
				err := p.Do(context.Background(), failing(tc.class, &runs))
				var re *Error
				if !errors.As(err, &re) || re.Attempts != 10 || runs != 10 {
					t.Fatalf("%s: runs=%d err=%v, want 10 attempts", extreme, runs, err)
				}
				var want []time.Duration
				for _, c := range tc.ceil {
					d := tc.hi(c)
					if extreme == "min" {
						d = tc.lo(c)
					}
					if d > 0 { // a zero delay is not slept
						want = append(want, d)
					}
				}
				if !equal(rec.delays, want) {
					t.Errorf("%s delays = %v, want %v", extreme, rec.delays, want)
				}
			}
		})
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBackoffRandom runs the real random source far past the point where
// the ceiling reaches the cap, and checks each draw and each delay.
func TestBackoffRandom(t *testing.T) {
	for _, tc := range []struct {
		class     Class
		base, cap time.Duration
		equal     bool
	}{
		{Unavailable, DefaultFastBase, DefaultFastCap, false},
		{ClientResourceExhausted, DefaultSlowBase, DefaultSlowCap, true},
	} {
		for round := 0; round < 10; round++ {
			rec := &recorder{}
			var draws [][2]int64 // n, result
			p := Policy{Sleep: rec.sleep, Rand: func(n int64) int64 {
				r := rand.Int64N(n)
				draws = append(draws, [2]int64{n, r})
				return r
			}}
			runs := 0
			_ = p.Do(context.Background(), failing(tc.class, &runs), MaxAttempts(100))
			if runs != 100 || len(draws) != 99 {
				t.Fatalf("%v: runs=%d draws=%d", tc.class, runs, len(draws))
			}
			var want []time.Duration
			for i, dr := range draws {
				ceil := tc.cap
				if i < 20 && tc.base<<i < tc.cap {
					ceil = tc.base << i
				}
				lo, n := time.Duration(0), ceil
				if tc.equal {
					lo, n = ceil/2, ceil-ceil/2
				}
				if dr[0] != int64(n) || dr[1] < 0 || dr[1] >= dr[0] {
					t.Fatalf("%v retry %d: drew %d from [0, %d), want range [0, %d)", tc.class, i+1, dr[1], dr[0], n)
				}
				if d := lo + time.Duration(dr[1]); d > 0 {
					if d >= ceil {
						t.Fatalf("%v retry %d: delay %v not below ceiling %v", tc.class, i+1, d, ceil)
					}
					want = append(want, d)
				}
			}
			if !equal(rec.delays, want) {
				t.Fatalf("%v: slept %v, want %v", tc.class, rec.delays, want)
			}
		}
	}
}

func TestZeroBackoffClasses(t *testing.T) {
	for _, c := range []Class{BadSession, SessionExpired} {
		rec := &recorder{}
		runs := 0
		err := Policy{Sleep: rec.sleep}.Do(context.Background(), failing(c, &runs), Idempotent(true))
		if runs != 10 || len(rec.delays) != 0 || err == nil {
			t.Errorf("%v: runs=%d delays=%v err=%v, want 10 runs and no waits", c, runs, rec.delays, err)
		}
	}
}

func TestMaxAttempts(t *testing.T) {
	at := func(n int) *Config { c := DefaultConfig(); c.MaxAttempts = n; return &c }
	for _, tc := range []struct {
		global     *Config
		call, want int
	}{
		{nil, 0, 10},  // defaults
		{at(3), 0, 3}, // 0 per call = global
		{at(3), 5, 5}, // per-call override
		{at(3), 1, 1}, // one attempt = no retries
		{at(1), 0, 1},
		{at(0), 0, 1},     // a global 0 means one run, not the default
		{at(0), 4, 4},     // ... which a call may still override
		{&Config{}, 0, 1}, // the zero Config is taken literally
	} {
		rec := &recorder{}
		runs := 0
		p := Policy{Config: tc.global, Sleep: rec.sleep, Rand: func(int64) int64 { return 0 }}
		err := p.Do(context.Background(), failing(Aborted, &runs), MaxAttempts(tc.call))
		var re *Error
		if runs != tc.want || !errors.As(err, &re) || re.Attempts != tc.want {
			t.Errorf("global %+v call %d: runs=%d err=%v, want %d", tc.global, tc.call, runs, err, tc.want)
		}
	}
}

func TestSucceedsAfterRetries(t *testing.T) {
	rec := &recorder{}
	runs := 0
	err := Policy{Sleep: rec.sleep}.Do(context.Background(), func(context.Context) error {
		runs++
		if runs < 3 {
			return WithClass(errors.New("conflict"), Aborted)
		}
		return nil
	})
	if err != nil || runs != 3 || len(rec.delays) > 2 {
		t.Fatalf("err=%v runs=%d delays=%v", err, runs, rec.delays)
	}
}

func TestNonRetryableRunsOnce(t *testing.T) {
	for _, c := range []Class{NonRetryable, Timeout, Canceled, PreconditionFailed, NotFound, InvalidArgument} {
		rec := &recorder{}
		runs := 0
		err := Policy{Sleep: rec.sleep}.Do(context.Background(), failing(c, &runs), Idempotent(true))
		var re *Error
		if runs != 1 || !errors.As(err, &re) || re.Attempts != 1 || re.Class != c {
			t.Errorf("%v: runs=%d err=%v", c, runs, err)
		}
	}
}

func TestIdempotentSwitch(t *testing.T) {
	for _, c := range []Class{Undetermined, TransportUnavailable, ClientTransportError, SessionExpired} {
		for _, idem := range []bool{false, true} {
			runs := 0
			_ = Policy{Sleep: (&recorder{}).sleep}.Do(context.Background(), failing(c, &runs), Idempotent(idem), MaxAttempts(4))
			want := 1
			if idem {
				want = 4
			}
			if runs != want {
				t.Errorf("%v idempotent=%v: runs=%d, want %d", c, idem, runs, want)
			}
		}
	}
}

func TestEnabledCanOnlyDisable(t *testing.T) {
	for _, tc := range []struct {
		globalOff bool
		opt       []Option
		want      int
	}{
		{false, nil, 10},
		{false, []Option{Enabled(true)}, 10},
		{false, []Option{Enabled(false)}, 1},
		{true, nil, 1},
		{true, []Option{Enabled(true)}, 1}, // cannot re-enable
		{true, []Option{Enabled(false)}, 1},
	} {
		runs := 0
		cfg := DefaultConfig()
		cfg.Disabled = tc.globalOff
		p := Policy{Config: &cfg, Sleep: (&recorder{}).sleep}
		err := p.Do(context.Background(), failing(BadSession, &runs), tc.opt...)
		if runs != tc.want || err == nil {
			t.Errorf("global disabled=%v opts=%d: runs=%d, want %d", tc.globalOff, len(tc.opt), runs, tc.want)
		}
	}
}

func TestBackoffOverrides(t *testing.T) {
	maxRand := func(n int64) int64 { return n - 1 }
	for _, tc := range []struct {
		name   string
		global Config
		opt    Option
		class  Class
		want   []time.Duration // ceilings of the first three retries
	}{
		{"global fast", Config{FastBase: ms(1), FastCap: ms(3)}, nil, Aborted, []time.Duration{ms(1), ms(2), ms(3)}},
		{"call fast", Config{}, FastBackoff(ms(2), ms(100)), Aborted, []time.Duration{ms(2), ms(4), ms(8)}},
		{"call fast base only", Config{FastCap: ms(6)}, FastBackoff(ms(2), 0), Aborted, []time.Duration{ms(2), ms(4), ms(6)}},
		{"call fast cap only", Config{FastBase: ms(3)}, FastBackoff(0, ms(7)), Aborted, []time.Duration{ms(3), ms(6), ms(7)}},
		{"global slow", Config{SlowBase: ms(10), SlowCap: ms(30)}, nil, Overloaded, []time.Duration{ms(10), ms(20), ms(30)}},
		{"call slow", Config{SlowBase: ms(10)}, SlowBackoff(ms(1), ms(2)), Overloaded, []time.Duration{ms(1), ms(2), ms(2)}},
		{"cap below base", Config{}, FastBackoff(ms(9), ms(4)), Aborted, []time.Duration{ms(4), ms(4), ms(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			opts := []Option{MaxAttempts(4)}
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			runs := 0
			_ = Policy{Config: &tc.global, Sleep: rec.sleep, Rand: maxRand}.Do(context.Background(), failing(tc.class, &runs), opts...)
			var want []time.Duration
			for _, c := range tc.want {
				want = append(want, c-1)
			}
			if !equal(rec.delays, want) {
				t.Errorf("delays %v, want %v", rec.delays, want)
			}
		})
	}
}

func TestNegativeSettingsRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		global Config
		opt    Option
	}{
		{"call max attempts", Config{}, MaxAttempts(-1)},
		{"call fast base", Config{}, FastBackoff(-ms(1), 0)},
		{"call fast cap", Config{}, FastBackoff(0, -ms(1))},
		{"call slow base", Config{}, SlowBackoff(-ms(1), 0)},
		{"call slow cap", Config{}, SlowBackoff(0, -ms(1))},
		{"global max attempts", Config{MaxAttempts: -2}, nil},
		{"global slow cap", Config{SlowCap: -1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			runs := 0
			err := Policy{Config: &tc.global}.Do(context.Background(), failing(Aborted, &runs), opts...)
			if !errors.Is(err, ErrInvalidConfig) || runs != 0 {
				t.Errorf("err=%v runs=%d, want ErrInvalidConfig and no run", err, runs)
			}
			if !strings.Contains(err.Error(), "negative") {
				t.Errorf("message %q does not say what is wrong", err)
			}
		})
	}
}

func TestOnlyOutermostRetries(t *testing.T) {
	p := Policy{Sleep: (&recorder{}).sleep}
	outer, inner := 0, 0
	cause := errors.New("deadlock")
	err := p.Do(context.Background(), func(ctx context.Context) error {
		outer++
		err := p.Do(ctx, func(context.Context) error {
			inner++
			return WithClass(cause, Aborted)
		})
		// The nested call hands back the body's error as it is.
		var re *Error
		if errors.As(err, &re) {
			t.Errorf("nested Do wrapped its error: %v", err)
		}
		return err
	}, MaxAttempts(3))
	if outer != 3 || inner != 3 {
		t.Fatalf("outer=%d inner=%d, want 3 and 3", outer, inner)
	}
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, cause) {
		t.Fatalf("err = %v", err)
	}

	// The package-level Do honours the same marker.
	inner = 0
	_ = p.Do(context.Background(), func(ctx context.Context) error {
		return Do(ctx, func(context.Context) error { inner++; return WithClass(cause, BadSession) })
	}, MaxAttempts(2))
	if inner != 2 {
		t.Fatalf("package Do nested: inner=%d, want 2", inner)
	}
}

// A Do that does not share the context retries on its own, but its
// exhausted *Error is not retried again by the outer call.
func TestUnnestedExhaustedNotMultiplied(t *testing.T) {
	p := Policy{Sleep: (&recorder{}).sleep}
	outer, inner := 0, 0
	err := p.Do(context.Background(), func(context.Context) error {
		outer++
		return p.Do(context.Background(), failing(Aborted, &inner), MaxAttempts(3))
	})
	if outer != 1 || inner != 3 {
		t.Fatalf("outer=%d inner=%d, want 1 and 3", outer, inner)
	}
	if err == nil || !strings.Contains(err.Error(), "after 1 attempt ") {
		t.Fatalf("err = %v", err)
	}
}

func TestErrorReportsAttemptsAndWraps(t *testing.T) {
	cause := &clientError{msg: "server overloaded", class: Overloaded}
	err := Policy{Sleep: (&recorder{}).sleep}.Do(context.Background(), func(context.Context) error { return cause }, MaxAttempts(3))
	want := "retry: failed after 3 attempts (OVERLOADED): server overloaded"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	var ce *clientError
	if !errors.As(err, &ce) || ce != cause || !errors.Is(err, cause) {
		t.Fatalf("errors.As/Is do not reach the cause through %v", err)
	}
	err = Policy{}.Do(context.Background(), func(context.Context) error { return errors.New("bad input") })
	if want := "retry: failed after 1 attempt (NON_RETRYABLE): bad input"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestCancelBeforeRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	cause := errors.New("conflict")
	runs := 0
	err := Policy{Sleep: rec.sleep}.Do(ctx, func(context.Context) error {
		runs++
		cancel()
		return WithClass(cause, Aborted)
	})
	var re *Error
	if runs != 1 || len(rec.delays) != 0 || !errors.As(err, &re) || re.Stopped != context.Canceled {
		t.Fatalf("runs=%d delays=%v err=%v", runs, rec.delays, err)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("err %v does not wrap both the cause and the context error", err)
	}
}

// TestCancelDuringBackoff uses the real timer with an hour-long backoff: the
// test can only finish if cancellation interrupts the wait.
func TestCancelDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan struct{})
	p := Policy{Sleep: func(ctx context.Context, d time.Duration) error {
		close(waiting)
		return sleep(ctx, d)
	}}
	go func() {
		<-waiting
		cancel()
	}()
	runs := 0
	err := p.Do(ctx, failing(Overloaded, &runs), SlowBackoff(time.Hour, time.Hour))
	want := "retry: stopped by context canceled after 1 attempt, last error (OVERLOADED): transient"
	if runs != 1 || err == nil || err.Error() != want {
		t.Fatalf("runs=%d err=%v, want %q", runs, err, want)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v does not wrap context.Canceled", err)
	}
}

func TestRealSleepWaits(t *testing.T) {
	if err := sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("sleep on canceled context = %v", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	all := []string{EnvEnabled, EnvMaxAttempts, EnvFastBase, EnvFastCap, EnvSlowBase, EnvSlowCap}
	set := func(t *testing.T, kv map[string]string) {
		for _, k := range all {
			t.Setenv(k, kv[k])
		}
	}
	t.Run("defaults", func(t *testing.T) {
		set(t, nil)
		c, err := ConfigFromEnv()
		if err != nil || c != DefaultConfig() {
			t.Fatalf("got %+v, %v", c, err)
		}
	})
	t.Run("all set", func(t *testing.T) {
		set(t, map[string]string{
			EnvEnabled: "false", EnvMaxAttempts: "4", EnvFastBase: "7",
			EnvFastCap: "1.5s", EnvSlowBase: " 100ms ", EnvSlowCap: "2m",
		})
		c, err := ConfigFromEnv()
		want := Config{Disabled: true, MaxAttempts: 4, FastBase: ms(7), FastCap: 1500 * time.Millisecond,
			SlowBase: ms(100), SlowCap: 2 * time.Minute}
		if err != nil || c != want {
			t.Fatalf("got %+v, %v; want %+v", c, err, want)
		}
	})
	for _, bad := range []struct{ key, val string }{
		{EnvEnabled, "perhaps"},
		{EnvMaxAttempts, "-1"},
		{EnvMaxAttempts, "ten"},
		{EnvFastBase, "-5"},
		{EnvFastCap, "-1s"},
		{EnvSlowBase, "fast"},
		{EnvSlowCap, "99999999999999999"},
	} {
		t.Run(bad.key+"="+bad.val, func(t *testing.T) {
			set(t, map[string]string{bad.key: bad.val})
			_, err := ConfigFromEnv()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), bad.key) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %s", err, bad.key)
			}
		})
	}
}

// TestPackageDoIgnoresEnv: the package-level Do runs with DefaultConfig
// whatever the environment says; only ConfigFromEnv reads it.
func TestPackageDoIgnoresEnv(t *testing.T) {
	t.Setenv(EnvEnabled, "false")
	t.Setenv(EnvMaxAttempts, "many") // malformed: ConfigFromEnv would refuse it
	runs := 0
	err := Do(context.Background(), failing(BadSession, &runs)) // no backoff: BadSession retries at once
	var re *Error
	if runs != DefaultMaxAttempts || !errors.As(err, &re) || errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("runs=%d err=%v, want %d runs (the defaults) and a *retry.Error", runs, err, DefaultMaxAttempts)
	}
	if _, err := ConfigFromEnv(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ConfigFromEnv with %s=many: %v, want ErrInvalidConfig", EnvMaxAttempts, err)
	}
}

// TestGlobalZeroMeansZero: global settings of 0 mean what the retry
// document says (0 attempts: one run; a zero base or cap: no delay), not
// "the default"; a per-call 0 still means the global value.
func TestGlobalZeroMeansZero(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		class Class
	}{
		{"fast base", func(c *Config) { c.FastBase = 0 }, Aborted},
		{"fast cap", func(c *Config) { c.FastCap = 0 }, Aborted},
		{"slow base", func(c *Config) { c.SlowBase = 0 }, Overloaded},
		{"slow cap", func(c *Config) { c.SlowCap = 0 }, Overloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			rec := &recorder{}
			runs := 0
			_ = Policy{Config: &cfg, Sleep: rec.sleep, Rand: func(n int64) int64 { return n - 1 }}.Do(
				context.Background(), failing(tc.class, &runs), MaxAttempts(4))
			if runs != 4 || len(rec.delays) != 0 {
				t.Errorf("runs=%d delays=%v, want 4 runs and no delay", runs, rec.delays)
			}
		})
	}

	// Through the environment, read by ConfigFromEnv.
	t.Setenv(EnvMaxAttempts, "0")
	t.Setenv(EnvFastBase, "0")
	c, err := ConfigFromEnv()
	if err != nil || c.MaxAttempts != 0 || c.FastBase != 0 || c.FastCap != DefaultFastCap {
		t.Fatalf("ConfigFromEnv = %+v, %v; want MaxAttempts 0, FastBase 0, the rest default", c, err)
	}
	p := Policy{Config: &c}
	runs := 0
	err = p.Do(context.Background(), failing(BadSession, &runs))
	if runs != 1 || err == nil {
		t.Fatalf("%s=0: runs=%d err=%v, want exactly one run", EnvMaxAttempts, runs, err)
	}
	rec := &recorder{}
	p.Sleep = rec.sleep
	runs = 0
	_ = p.Do(context.Background(), failing(Aborted, &runs), MaxAttempts(3))
	if runs != 3 || len(rec.delays) != 0 {
		t.Fatalf("%s=0: runs=%d delays=%v, want 3 runs without delay", EnvFastBase, runs, rec.delays)
	}
}

// TestNestingIsPerContext: nesting follows the context, whatever derives
// from the body's context (WithoutCancel included) is nested, and
// Independent lets an inner transaction of its own (REQUIRES_NEW) retry by
// itself, its exhausted error then not retried again by the outer Do.
func TestNestingIsPerContext(t *testing.T) {
	p := Policy{Sleep: (&recorder{}).sleep}
	cause := WithClass(errors.New("deadlock"), Aborted)
	for _, tc := range []struct {
		name        string
		derive      func(context.Context) context.Context
		outer, want int // outer runs; inner runs in total
	}{
		{"body context", func(c context.Context) context.Context { return c }, 3, 3},
		{"WithoutCancel", context.WithoutCancel, 3, 3},
		{"Independent", Independent, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outer, inner := 0, 0
			_ = p.Do(context.Background(), func(ctx context.Context) error {
				outer++
				return p.Do(tc.derive(ctx), func(context.Context) error { inner++; return cause }, MaxAttempts(4))
			}, MaxAttempts(3))
			if outer != tc.outer || inner != tc.want {
				t.Fatalf("outer=%d inner=%d, want %d and %d", outer, inner, tc.outer, tc.want)
			}
		})
	}
	if ctx := context.Background(); Independent(ctx) != ctx {
		t.Error("Independent of an unmarked context made a new one")
	}
}
