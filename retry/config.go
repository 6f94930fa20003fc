package retry

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every error about a bad setting: a negative
// value in Config or in a per-call Option, or an unparsable environment
// variable.
var ErrInvalidConfig = errors.New("retry: invalid configuration")

// Defaults of the global configuration.
const (
	DefaultMaxAttempts = 10
	DefaultFastBase    = 5 * time.Millisecond
	DefaultFastCap     = 500 * time.Millisecond
	DefaultSlowBase    = 50 * time.Millisecond
	DefaultSlowCap     = 5 * time.Second
)

// Environment variables read by ConfigFromEnv, and only by it: the
// package-level Do never reads them. Durations take Go syntax ("5ms", "1.5s") or a bare integer meaning
// milliseconds; an empty variable counts as unset.
const (
	EnvEnabled     = "TICKETING_RETRY_ENABLED"      // bool, default true
	EnvMaxAttempts = "TICKETING_RETRY_MAX_ATTEMPTS" // attempts including the first, default 10
	EnvFastBase    = "TICKETING_RETRY_FAST_BASE"    // default 5ms
	EnvFastCap     = "TICKETING_RETRY_FAST_CAP"     // default 500ms
	EnvSlowBase    = "TICKETING_RETRY_SLOW_BASE"    // default 50ms
	EnvSlowCap     = "TICKETING_RETRY_SLOW_CAP"     // default 5s
)

// Config is the global retry configuration. Its values are taken
// literally, as the retry document specifies the global settings: a
// MaxAttempts of 0 (or 1) means the body runs once, a zero base or cap
// means no delay. Start from DefaultConfig to change only some settings.
// Negative values are rejected. (Per-call Options differ: there zero means
// "the global value".)
type Config struct {
	// Disabled turns retrying off: every call runs its body once.
	Disabled bool
	// MaxAttempts is the most times a body runs, including the first
	// attempt; 0 and 1 mean no retries.
	MaxAttempts int
	// The fast tier (conflicts, unavailability, transport errors) and the
	// slow tier (overload) each wait base·2^(n-1) before retry n, capped;
	// a zero base or cap makes the tier's retries immediate.
	FastBase, FastCap time.Duration
	SlowBase, SlowCap time.Duration
}

// DefaultConfig returns the defaults spelled out.
func DefaultConfig() Config {
	return Config{
		MaxAttempts: DefaultMaxAttempts,
		FastBase:    DefaultFastBase,
		FastCap:     DefaultFastCap,
		SlowBase:    DefaultSlowBase,
		SlowCap:     DefaultSlowCap,
	}
}

// Validate reports a negative setting.
func (c Config) Validate() error {
	if c.MaxAttempts < 0 {
		return fmt.Errorf("%w: MaxAttempts %d is negative", ErrInvalidConfig, c.MaxAttempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"FastBase", c.FastBase}, {"FastCap", c.FastCap}, {"SlowBase", c.SlowBase}, {"SlowCap", c.SlowCap}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, d.name, d.v)
		}
	}
	return nil
}

// ConfigFromEnv returns DefaultConfig overridden by the TICKETING_RETRY_*
// environment variables; a variable set to 0 means 0 (one run, or no delay),
// an unset or empty one keeps the default. A malformed or negative value is
// an error naming the variable.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	if v, ok := env(EnvEnabled); ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s=%q is not a boolean", ErrInvalidConfig, EnvEnabled, v)
		}
		c.Disabled = !on
	}
	if v, ok := env(EnvMaxAttempts); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Config{}, fmt.Errorf("%w: %s=%q is not a non-negative integer", ErrInvalidConfig, EnvMaxAttempts, v)
		}
		c.MaxAttempts = n
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{EnvFastBase, &c.FastBase}, {EnvFastCap, &c.FastCap}, {EnvSlowBase, &c.SlowBase}, {EnvSlowCap, &c.SlowCap}} {
		v, ok := env(d.name)
		if !ok {
			continue
		}
		dur, err := parseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, d.name, v, err)
		}
		*d.dst = dur
	}
	return c, nil
}

func env(name string) (string, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	return v, v != ""
}

// parseDuration accepts Go duration syntax or a bare integer of milliseconds,
// the unit the original policy's properties use.
func parseDuration(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, errors.New("negative duration")
		}
		if ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
			return 0, errors.New("duration out of range")
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration such as 5ms or an integer of milliseconds")
	}
	if d < 0 {
		return 0, errors.New("negative duration")
	}
	return d, nil
}
