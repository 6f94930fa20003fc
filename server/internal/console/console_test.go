package console

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The ring keeps the latest records, newest first, and no more than its size.
func TestRingKeepsTheLatest(t *testing.T) {
	g := NewRing(3)
	for _, op := range []string{"a", "b", "c", "d", "e"} {
		g.Add(Refusal{Op: op})
	}
	var got []string
	for _, r := range g.Refusals().Records {
		got = append(got, r.Op)
	}
	if strings.Join(got, "") != "edc" {
		t.Fatalf("ring holds %q, want e d c", got)
	}
}

// The tee keeps audit records of refusals, with their attributes, passes
// every record on, and keeps refusals even when the log level hides them.
func TestAuditTee(t *testing.T) {
	var out bytes.Buffer
	ring := NewRing(10)
	log := slog.New(AuditTee(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}), ring))
	log.With("principal", "orders").Warn("audit", "op", "acquire", "outcome", "denied", "reason", "key", "key", "billing/1", "remote", "10.0.0.9:4000")
	log.Warn("audit", "op", "hello", "outcome", "unauthenticated", "remote", "10.0.0.8:1")
	log.Info("audit", "op", "admin status", "outcome", "ok") // not a refusal
	log.Warn("something else", "outcome", "denied")          // not an audit record
	log.Error("shown")
	recs := ring.Refusals().Records
	if len(recs) != 2 {
		t.Fatalf("kept %d records, want 2: %+v", len(recs), recs)
	}
	if r := recs[1]; r.Principal != "orders" || r.Op != "acquire" || r.Reason != "key" || r.Key != "billing/1" || r.Remote != "10.0.0.9:4000" || r.At.IsZero() {
		t.Errorf("first refusal kept as %+v", r)
	}
	if recs[0].Outcome != "unauthenticated" {
		t.Errorf("second refusal kept as %+v", recs[0])
	}
	if s := out.String(); strings.Contains(s, "audit") || !strings.Contains(s, "shown") {
		t.Errorf("the inner handler's level was not kept: %q", s)
	}
}

// No template or asset runs script or carries inline style: the policy
// forbids both, so either would be a broken page.
func TestNoInlineScriptOrStyle(t *testing.T) {
	for _, fsys := range []fs.FS{templateFiles, staticFiles} {
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			low := strings.ToLower(string(b))
			for _, bad := range []string{"<script", "style=", "<style", "javascript:", " onclick", " onload", " onerror"} {
				if strings.Contains(low, bad) {
					t.Errorf("%s contains %q", path, bad)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Keys are escaped, and a key that is not printable text is shown in hex.
func TestPagesEscapeKeys(t *testing.T) {
	h := Handler(Options{NodeID: "n1", Local: func() string { return "leader, ready" }, Authorize: func(*http.Request) (int, string) { return 0, "" },
		Read: func(_ context.Context, _ *http.Request, q Query) (*View, error) {
			return &View{From: "n1", Tickets: &Tickets{Matched: 2, Rows: []Ticket{
				{Key: `<img src=x onerror=alert(1)>`, GrantedAt: time.Unix(1, 0)},
				{Key: "bin\x00\xff"},
			}}}, nil
		}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/tickets", nil))
	body := rec.Body.String()
	if rec.Code != 200 || strings.Contains(body, "<img") || !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the key is not escaped (%d):\n%s", rec.Code, body)
	}
	if !strings.Contains(body, "0x62696e00ff") {
		t.Errorf("a binary key is not shown in hex:\n%s", body)
	}
}

// The root redirects to the cluster page with a relative location, so that
// the console works under a reverse proxy's path prefix.
func TestRedirectsAreRelative(t *testing.T) {
	h := Handler(Options{NodeID: "n1", Local: func() string { return "" }, Authorize: func(*http.Request) (int, string) { return 0, "" },
		Read: func(context.Context, *http.Request, Query) (*View, error) { return &View{}, nil }})
	for path, want := range map[string]string{"/console/": "cluster", "/console": "console/cluster"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusFound || rec.Header().Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want 302 to %q", path, rec.Code, rec.Header().Get("Location"), want)
		}
		if rec.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
			t.Errorf("GET %s: no policy on the redirect", path)
		}
	}
}
