package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/ticketing-io/ticketing/coordination"
)

type semaphoreResult struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Name string `json:"name"`
	OK   bool   `json:"ok"`
}

type semaphoreDescription struct {
	Path      string       `json:"path"`
	Name      string       `json:"name"`
	Limit     uint64       `json:"limit"`
	Count     uint64       `json:"count"`
	Ephemeral bool         `json:"ephemeral"`
	Data      *string      `json:"data,omitempty"` // when it is UTF-8
	DataHex   string       `json:"data_hex"`
	Owners    []holderJSON `json:"owners"`
	Waiters   []holderJSON `json:"waiters"`
}

type holderJSON struct {
	OrderID   uint64  `json:"order_id"`
	Session   uint64  `json:"session"`
	Count     uint64  `json:"count"`
	TimeoutMs int64   `json:"timeout_ms"`
	Forever   bool    `json:"forever,omitempty"` // waits without a timeout (timeout_ms is then meaningless)
	Data      *string `json:"data,omitempty"`
	DataHex   string  `json:"data_hex"`
}

func text(b []byte) *string {
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

func holdersJSON(hs []coordination.Holder) []holderJSON {
	out := []holderJSON{}
	for _, h := range hs {
		out = append(out, holderJSON{OrderID: h.OrderID, Session: h.Session, Count: h.Count, TimeoutMs: h.Timeout.Milliseconds(),
			Forever: h.Forever, Data: text(h.Data), DataHex: hex.EncodeToString(h.Data)})
	}
	return out
}

// runCoordSemaphores runs a semaphore verb in a session of its own, stopped
// before ticketctl exits (its holds, if any, are none: these verbs hold
// nothing).
func runCoordSemaphores(e *env, verb, path, name string, f *coordFlags, fs *flag.FlagSet) error {
	limitSet := false
	fs.Visit(func(fl *flag.Flag) { limitSet = limitSet || fl.Name == "limit" })
	if verb == "create" && (!limitSet || f.limit == 0) {
		return usageErrorf("coordination semaphores create needs --limit N (N > 0)")
	}
	return e.coordRun(func(ctx context.Context, c *coordination.Client) error {
		s, err := c.Session(ctx, path, coordination.WithTimeout(max(e.g.timeout, time.Second)), coordination.WithDescription("ticketctl"))
		if err != nil {
			return err
		}
		defer func() { _ = s.Close(context.Background()) }() // a session not stopped expires after its timeout
		switch verb {
		case "create":
			err = s.CreateSemaphore(ctx, name, f.limit, []byte(f.data))
		case "delete":
			err = s.DeleteSemaphore(ctx, name, f.force)
		case "describe":
			d, _, err := s.DescribeSemaphore(ctx, name, coordination.DescribeOptions{Owners: true, Waiters: true})
			if err != nil {
				return err
			}
			out := semaphoreDescription{Path: path, Name: name, Limit: d.Limit, Count: d.Count, Ephemeral: d.Ephemeral,
				Data: text(d.Data), DataHex: hex.EncodeToString(d.Data), Owners: holdersJSON(d.Owners), Waiters: holdersJSON(d.Waiters)}
			return e.emit(out, func(w io.Writer) {
				kind := "persistent"
				if d.Ephemeral {
					kind = "ephemeral"
				}
				fmt.Fprintf(w, "semaphore %s on %s (%s)\n  limit %d, count %d\n  data %q\n", name, path, kind, d.Limit, d.Count, d.Data)
				for _, l := range []struct {
					what string
					hs   []coordination.Holder
				}{{"owners", d.Owners}, {"waiters", d.Waiters}} {
					fmt.Fprintf(w, "  %s: %d\n", l.what, len(l.hs))
					for _, h := range l.hs {
						fmt.Fprintf(w, "    order %d  session %d  count %d  timeout %s  data %q\n", h.OrderID, h.Session, h.Count, h.TimeoutString(), h.Data)
					}
				}
			})
		}
		if err != nil {
			return err
		}
		past := map[string]string{"create": "created", "delete": "deleted"}[verb]
		return e.emit(semaphoreResult{Op: verb, Path: path, Name: name, OK: true}, func(w io.Writer) {
			fmt.Fprintf(w, "%s semaphore %s on %s\n", past, name, path)
		})
	})
}
