package node

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft's own records (and the log store's) go to the server's slog logger
// as structured records: the message as Raft wrote it, and every argument
// (peer, error, term, ...) as an attribute, so that a JSON log carries them
// as fields. Only warnings and errors: Raft is chatty at info level.
//
// A peer that is down makes Raft log a failure for every retry (several a
// second). The records are rate-limited per message and peer: a few per
// window, then one "similar Raft records suppressed" record per window with
// the count. The server logs when a peer is reachable again and every
// change of leader (server package), which Raft does not.

const (
	// raftLogWindow is how long a message and peer's budget lasts.
	raftLogWindow = 30 * time.Second
	// raftLogBurst is how many records of one message and peer are
	// written per window.
	raftLogBurst = 2
	// raftLogMaxKeys bounds the keys tracked (messages and peers are
	// closed sets in practice; this is a guard).
	raftLogMaxKeys = 1024
)

// newHCLog returns the hclog.Logger Raft and the log store write to.
func newHCLog(l *slog.Logger) hclog.Logger {
	return &raftLog{l: l, lim: &raftLimiter{l: l, window: raftLogWindow, burst: raftLogBurst, keys: map[raftLogKey]*raftBudget{}}}
}

// raftLog is an hclog.Logger over slog.
type raftLog struct {
	l    *slog.Logger
	name string // hclog's name, beyond "raft"
	args []any  // implied arguments (With)
	lim  *raftLimiter
}

var _ hclog.Logger = (*raftLog)(nil)

func (r *raftLog) Log(level hclog.Level, msg string, args ...any) {
	if level < hclog.Warn || level == hclog.Off {
		return
	}
	sl := slog.LevelWarn
	if level >= hclog.Error {
		sl = slog.LevelError
	}
	msg = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(msg), ":"))
	attrs := []slog.Attr{slog.String("component", "raft")}
	if r.name != "" {
		attrs = append(attrs, slog.String("subsystem", r.name))
	}
	all := args
	if len(r.args) > 0 {
		all = append(append([]any{}, r.args...), args...)
	}
	peer := ""
	for i := 0; i < len(all); i += 2 {
		k := fmt.Sprint(all[i])
		var v any = "(missing)"
		if i+1 < len(all) {
			v = attrValue(all[i+1])
		}
		if k == "peer" || k == "target" || k == "from" {
			peer = fmt.Sprint(v)
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	if !r.lim.allow(raftLogKey{level: sl, msg: msg, peer: peer}) {
		return
	}
	r.l.LogAttrs(context.Background(), sl, msg, attrs...)
}

// attrValue makes an hclog argument a value every slog handler writes
// readably: errors and Stringers (Raft's server records) as text.
func attrValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string, bool, int, int64, uint64, uint32, int32, float64, time.Duration, time.Time:
		return x // durations and times: slog writes them in its own forms
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

func (r *raftLog) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }
func (r *raftLog) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }
func (r *raftLog) Info(msg string, args ...any)  { r.Log(hclog.Info, msg, args...) }
func (r *raftLog) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLog) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }
func (r *raftLog) IsTrace() bool                 { return false }
func (r *raftLog) IsDebug() bool                 { return false }
func (r *raftLog) IsInfo() bool                  { return false }
func (r *raftLog) IsWarn() bool                  { return true }
func (r *raftLog) IsError() bool                 { return true }
func (r *raftLog) ImpliedArgs() []any            { return r.args }
func (r *raftLog) Name() string                  { return r.name }
func (r *raftLog) SetLevel(hclog.Level)          {} // fixed: warnings and errors
func (r *raftLog) GetLevel() hclog.Level         { return hclog.Warn }

func (r *raftLog) With(args ...any) hclog.Logger {
	c := *r
	c.args = append(append([]any{}, r.args...), args...)
	return &c
}

func (r *raftLog) Named(name string) hclog.Logger {
	c := *r
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (r *raftLog) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

func (r *raftLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

// StandardWriter takes lines of the standard library's logger, "[ERROR]"
// or "[WARN]" first (what Raft's transport writes).
func (r *raftLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return stdWriter{r} }

type stdWriter struct{ r *raftLog }

func (w stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Warn
	if rest, ok := strings.CutPrefix(msg, "[ERROR]"); ok {
		level, msg = hclog.Error, rest
	} else if rest, ok := strings.CutPrefix(msg, "[WARN]"); ok {
		msg = rest
	} else if strings.HasPrefix(msg, "[INFO]") || strings.HasPrefix(msg, "[DEBUG]") || strings.HasPrefix(msg, "[TRACE]") {
		return len(p), nil
	}
	w.r.Log(level, strings.TrimPrefix(strings.TrimSpace(msg), "raft: "))
	return len(p), nil
}

// raftLogKey is what makes Raft records similar: level, message and peer.
type raftLogKey struct {
	level     slog.Level
	msg, peer string
}

type raftBudget struct {
	start      time.Time
	written    int
	suppressed int
}

// raftLimiter lets burst records of a key through per window, and writes
// one summary of the rest when the window ends.
type raftLimiter struct {
	l      *slog.Logger
	window time.Duration
	burst  int

	mu   sync.Mutex
	keys map[raftLogKey]*raftBudget
}

func (rl *raftLimiter) allow(k raftLogKey) bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	now := time.Now()
	b := rl.keys[k]
	if b == nil || now.Sub(b.start) >= rl.window {
		if b == nil && len(rl.keys) >= raftLogMaxKeys {
			return true // unexpected variety: do not track, do not hide
		}
		if b != nil && b.suppressed > 0 {
			rl.summary(k, b) // its timer has not fired yet
		}
		b = &raftBudget{start: now}
		rl.keys[k] = b
	}
	if b.written < rl.burst {
		b.written++
		return true
	}
	if b.suppressed == 0 {
		// The summary is written when the window ends, whether or not
		// another record of the key comes.
		time.AfterFunc(b.start.Add(rl.window).Sub(now), func() {
			rl.mu.Lock()
			defer rl.mu.Unlock()
			if rl.keys[k] == b && b.suppressed > 0 {
				rl.summary(k, b)
				delete(rl.keys, k)
			}
		})
	}
	b.suppressed++
	return false
}

// summary writes how many records of k were suppressed, and forgets them.
func (rl *raftLimiter) summary(k raftLogKey, b *raftBudget) {
	attrs := []slog.Attr{slog.String("component", "raft"), slog.String("message", k.msg), slog.Int("suppressed", b.suppressed),
		slog.Duration("window", rl.window)}
	if k.peer != "" {
		attrs = append(attrs, slog.String("peer", k.peer))
	}
	rl.l.LogAttrs(context.Background(), k.level, "similar Raft records suppressed", attrs...)
	b.suppressed = 0
}
