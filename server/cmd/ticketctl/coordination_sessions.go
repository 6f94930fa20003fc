package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ticketing-io/ticketing/coordination"
)

type sessionsResult struct {
	Path     string        `json:"path"`
	Sessions []sessionJSON `json:"sessions"`
}

type sessionJSON struct {
	ID          uint64 `json:"id"`
	SeqNo       uint64 `json:"seq_no"`
	TimeoutMs   int64  `json:"timeout_ms"`
	Attached    bool   `json:"attached"`
	Description string `json:"description"`
}

func runCoordSessionsList(e *env, path string) error {
	return e.coordRun(func(ctx context.Context, c *coordination.Client) error {
		ss, err := c.ListSessions(ctx, path)
		if err != nil {
			return err
		}
		out := sessionsResult{Path: path, Sessions: []sessionJSON{}}
		for _, s := range ss {
			out.Sessions = append(out.Sessions, sessionJSON{ID: s.ID, SeqNo: s.SeqNo, TimeoutMs: s.Timeout.Milliseconds(), Attached: s.Attached, Description: s.Description})
		}
		return e.emit(out, func(w io.Writer) {
			fmt.Fprintf(w, "%d sessions of %s\n", len(ss), path)
			for _, s := range ss {
				state := "detached"
				if s.Attached {
					state = "attached"
				}
				fmt.Fprintf(w, "  %d  %s  timeout %v  seq_no %d  %q\n", s.ID, state, s.Timeout, s.SeqNo, s.Description)
			}
		})
	})
}
