package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// Audit and handshake records are written per event, and every event can be
// caused by a client: a client sending refused requests in a loop, or a
// scanner sending bad hellos, could fill the disk with them. The log
// limiter lets a few records of each kind through per window and counts the
// rest; at the end of the window it writes one "similar records suppressed"
// record with the count. The metrics count every event, suppressed or not.

const (
	// logWindow is how long a key's budget lasts.
	logWindow = 10 * time.Second
	// logBurst is how many records of one key are written per window.
	logBurst = 10
	// logMaxKeys bounds the keys tracked at once (memory). Events of new
	// keys past it share one key per kind and reason.
	logMaxKeys = 4096
	// manyPeers stands for the peer of events past logMaxKeys.
	manyPeers = "(many)"
)

// logKey is what makes records similar: their kind (audit op or hello), who
// caused them (a principal's name, or a remote host for hellos), and the
// reason.
type logKey struct{ what, who, reason string }

type logBudget struct {
	start      time.Time
	written    int
	suppressed int
}

// logLimiter rate-limits records by logKey.
type logLimiter struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	window time.Duration
	burst  int
	keys   map[logKey]*logBudget
}

func newLogLimiter(log *slog.Logger) *logLimiter {
	return &logLimiter{log: log, now: time.Now, window: logWindow, burst: logBurst, keys: make(map[logKey]*logBudget)}
}

// allow reports whether a record of k may be written now; when not, it is
// counted for the next summary.
func (l *logLimiter) allow(k logKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.keys[k]
	if b == nil {
		if len(l.keys) >= logMaxKeys {
			k.who = manyPeers
			if b = l.keys[k]; b == nil && len(l.keys) >= logMaxKeys+64 {
				// Even the shared keys are many (unbounded kinds cannot
				// happen: kinds and reasons come from closed sets); drop.
				return false
			}
		}
		if b == nil {
			b = &logBudget{start: now}
			l.keys[k] = b
		}
	}
	if b.written < l.burst {
		b.written++
		return true
	}
	b.suppressed++
	return false
}

// flush writes a summary for every key whose window has ended with records
// suppressed, and forgets those keys. It returns how long until the next
// window may end.
func (l *logLimiter) flush() time.Duration {
	l.mu.Lock()
	now := l.now()
	type summary struct {
		k logKey
		n int
	}
	var out []summary
	for k, b := range l.keys {
		if now.Sub(b.start) < l.window {
			continue
		}
		if b.suppressed > 0 {
			out = append(out, summary{k, b.suppressed})
		}
		delete(l.keys, k)
	}
	window := l.window
	l.mu.Unlock()
	for _, s := range out {
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "similar log records suppressed",
			slog.String("what", s.k.what), slog.String("who", s.k.who), slog.String("reason", s.k.reason),
			slog.Int("suppressed", s.n), slog.Duration("window", window))
	}
	return window / 2
}

// run flushes until stop is closed.
func (l *logLimiter) run(stop <-chan struct{}) {
	for {
		t := time.NewTimer(l.flush())
		select {
		case <-stop:
			t.Stop()
			l.flush()
			return
		case <-t.C:
		}
	}
}

// remoteHost is the host of a remote address, without the port: a flood of
// bad hellos comes from many ports of one host.
func remoteHost(a net.Addr) string {
	if a == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// auditText bounds a client-chosen string written into a log record.
func auditText(s string) string {
	const most = 128
	if len(s) <= most {
		return s
	}
	return strings.ToValidUTF8(s[:most], "") + "...(truncated)"
}
