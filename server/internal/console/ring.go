package console

import (
	"context"
	"log/slog"
	"sync"
)

// Ring keeps the latest refusals, a bounded number, for the refusals page.
type Ring struct {
	mu   sync.Mutex
	recs []Refusal
	next int // where the next record goes once full
	size int
}

// NewRing returns a ring that keeps the latest size records.
func NewRing(size int) *Ring { return &Ring{size: size} }

// Add records r, dropping the oldest record when the ring is full.
func (g *Ring) Add(r Refusal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recs) < g.size {
		g.recs = append(g.recs, r)
		return
	}
	g.recs[g.next] = r
	g.next = (g.next + 1) % g.size
}

// Refusals returns the records kept, newest first.
func (g *Ring) Refusals() *Refusals {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := &Refusals{Kept: g.size, Records: make([]Refusal, 0, len(g.recs))}
	for i := len(g.recs) - 1; i >= 0; i-- {
		out.Records = append(out.Records, g.recs[(g.next+i)%len(g.recs)])
	}
	return out
}

// AuditTee returns a log handler that passes every record to inner and
// also keeps each audit record of a refusal (message "audit", outcome
// "denied" or "unauthenticated") in ring. It reads the records the server
// writes anyway, so that the page shows exactly what the audit log says.
func AuditTee(inner slog.Handler, ring *Ring) slog.Handler {
	return &auditTee{inner: inner, ring: ring}
}

type auditTee struct {
	inner slog.Handler
	ring  *Ring
	attrs []slog.Attr // from WithAttrs
	// grouped: a group was opened, so a record's own attributes are not
	// the audit record's.
	grouped bool
}

// Enabled lets warnings through even when the inner handler would drop
// them: refusals are logged at warning level and the ring keeps them.
func (t *auditTee) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || t.inner.Enabled(ctx, l)
}

func (t *auditTee) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		t.keep(r)
	}
	if !t.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return t.inner.Handle(ctx, r)
}

func (t *auditTee) keep(r slog.Record) {
	rec := Refusal{At: r.Time}
	set := func(a slog.Attr) bool {
		v := a.Value.Resolve().String()
		switch a.Key {
		case "principal":
			rec.Principal = v
		case "op":
			rec.Op = v
		case "outcome":
			rec.Outcome = v
		case "reason":
			rec.Reason = v
		case "key":
			rec.Key = v
		case "remote":
			rec.Remote = v
		}
		return true
	}
	for _, a := range t.attrs {
		set(a)
	}
	if !t.grouped {
		r.Attrs(set)
	}
	if rec.Outcome == "denied" || rec.Outcome == "unauthenticated" {
		t.ring.Add(rec)
	}
}

func (t *auditTee) WithAttrs(as []slog.Attr) slog.Handler {
	if t.grouped {
		return &auditTee{inner: t.inner.WithAttrs(as), ring: t.ring, attrs: t.attrs, grouped: true}
	}
	return &auditTee{inner: t.inner.WithAttrs(as), ring: t.ring, attrs: append(append([]slog.Attr(nil), t.attrs...), as...)}
}

// WithGroup: attributes in a group are not the audit record's own, so the
// ring sees only what was given before it.
func (t *auditTee) WithGroup(name string) slog.Handler {
	return &auditTee{inner: t.inner.WithGroup(name), ring: t.ring, attrs: t.attrs, grouped: true}
}
