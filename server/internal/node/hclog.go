package node

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newHCLog routes Raft's logs into slog: warnings and errors only, since
// Raft is chatty at info level.
func newHCLog(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Warn,
		Output:      &slogWriter{l: l},
		DisableTime: true, // slog stamps the line
	})
}

type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if rest, ok := strings.CutPrefix(msg, "[ERROR]"); ok {
		level, msg = slog.LevelError, rest
	} else {
		msg = strings.TrimPrefix(msg, "[WARN]")
	}
	msg = strings.TrimPrefix(strings.TrimSpace(msg), "raft: ")
	w.l.Log(context.Background(), level, msg, "component", "raft")
	return len(p), nil
}
