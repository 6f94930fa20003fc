package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// ContentSecurityPolicy is sent with every console response: nothing but
// the console's own stylesheet and images loads, no script runs, forms post
// only back to the console, and no other site may frame it.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// RefreshSeconds is the period of the opt-in automatic refresh. The views
// are cached for a moment by the server, so many open pages cost the
// leader about one read per page and period.
const RefreshSeconds = 10

// PageSize is how many held keys one tickets page lists.
const PageSize = 50

// Options wire the console to a server.
type Options struct {
	// NodeID names the server rendering the pages; Version is its release.
	NodeID, Version string
	// Local describes the rendering server's own state (role and
	// readiness), shown on every page beside the leader's view.
	Local func() string
	// Authorize decides whether the request may see the console; when it
	// may not, it returns the HTTP status (401 or 403) and a message.
	Authorize func(r *http.Request) (status int, why string)
	// Read returns the view of q, from the leader; r carries the caller's
	// credentials, which a follower passes on to the leader.
	Read func(ctx context.Context, r *http.Request, q Query) (*View, error)
}

// Handler serves the console under /console/.
func Handler(o Options) http.Handler {
	h := &handler{o: o, pages: map[string]*template.Template{}}
	base := template.Must(template.New("base").Funcs(funcs).ParseFS(templateFiles, "templates/base.html"))
	for _, p := range Pages {
		h.pages[p] = template.Must(template.Must(base.Clone()).ParseFS(templateFiles, "templates/"+p+".html"))
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	h.static = http.StripPrefix("/console/static/", http.FileServer(http.FS(static)))
	return h
}

type handler struct {
	o      Options
	pages  map[string]*template.Template
	static http.Handler
}

func secure(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	if status, why := h.o.Authorize(r); status != 0 {
		if status == http.StatusUnauthorized {
			// Bearer, not Basic: a browser shows the refusal instead of
			// prompting; people come through a client certificate or a
			// proxy that adds the token (docs/deployment.md).
			w.Header().Set("WWW-Authenticate", `Bearer realm="ticketd console"`)
		}
		http.Error(w, why, status)
		return
	}
	path := r.URL.Path
	if strings.HasPrefix(path, "/console/static/") {
		h.static.ServeHTTP(w, r)
		return
	}
	page := strings.TrimPrefix(path, "/console/")
	// Relative redirects (http.Redirect would make them absolute), so that
	// the console works under a proxy's path prefix.
	if path == "/console" || page == "" {
		to := PageCluster
		if path == "/console" {
			to = "console/" + PageCluster
		}
		w.Header().Set("Location", to)
		w.WriteHeader(http.StatusFound)
		return
	}
	tmpl := h.pages[page]
	if tmpl == nil {
		http.NotFound(w, r)
		return
	}
	qv := r.URL.Query()
	q := Query{Page: page}
	if page == PageTickets {
		q.Prefix, q.After, q.Last = qv.Get("prefix"), qv.Get("after"), qv.Get("last") == "1"
		if q.SortLeft = qv.Get("sort") == "left"; q.SortLeft && q.After != "" {
			end, err := strconv.ParseInt(qv.Get("end"), 10, 64)
			if err != nil {
				http.Error(w, "the tickets page by time left needs end (the Unix ms at which the lease of the key after ends) beside after; follow the page's Next link", http.StatusBadRequest)
				return
			}
			q.AfterEnd = end
		}
		if q.Last {
			q.After, q.AfterEnd = "", 0
		}
	}
	d := pageData{NodeID: h.o.NodeID, Version: h.o.Version, Local: h.o.Local(), Page: page, Title: page, Nav: Pages, Query: q, Refresh: qv.Get("refresh") == "1",
		SortLeft: q.SortLeft, At: time.Now().UTC().Format(time.RFC3339)}
	d.links(qv)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	status := http.StatusOK
	v, err := h.o.Read(ctx, r, q)
	if err != nil {
		d.Err = err.Error()
		status = http.StatusBadGateway
	} else {
		d.View = v
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "base", &d); err != nil {
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pageData is what the templates see.
type pageData struct {
	NodeID, Local, Page string
	Version             string
	SortLeft            bool // the tickets page in the order of time left
	Title, At           string
	Nav                 []string
	Query               Query
	Refresh             bool
	RefreshURL, AutoURL string
	NoAutoURL           string
	FirstURL, LastURL   string
	SortLeftURL         string
	SortKeyURL          string
	View                *View
	Err                 string
}

func (d *pageData) links(qv url.Values) {
	with := func(set map[string]string) string {
		v := url.Values{}
		for k, vs := range qv {
			if k == "prefix" || k == "after" || k == "end" || k == "last" || k == "sort" || k == "refresh" {
				v[k] = vs
			}
		}
		for k, x := range set {
			if x == "" {
				v.Del(k)
			} else {
				v.Set(k, x)
			}
		}
		if len(v) == 0 {
			return d.Page
		}
		return d.Page + "?" + v.Encode()
	}
	d.RefreshURL = with(nil)
	d.AutoURL = with(map[string]string{"refresh": "1"})
	d.NoAutoURL = with(map[string]string{"refresh": ""})
	d.FirstURL = with(map[string]string{"after": "", "end": "", "last": ""})
	d.LastURL = with(map[string]string{"after": "", "end": "", "last": "1"})
	// Changing the order starts again from the first page of the new one.
	d.SortLeftURL = with(map[string]string{"sort": "left", "after": "", "end": "", "last": ""})
	d.SortKeyURL = with(map[string]string{"sort": "", "after": "", "end": "", "last": ""})
}

var funcs = template.FuncMap{
	"dur": func(ms int64) string {
		if ms < 0 {
			return "due"
		}
		return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	// next is the URL of the tickets page after the key next (whose lease
	// ends at end, in the order by time left).
	"next": func(d *pageData, next string, end int64) string {
		v := url.Values{}
		if d.Query.Prefix != "" {
			v.Set("prefix", d.Query.Prefix)
		}
		v.Set("after", next)
		if d.Refresh {
			v.Set("refresh", "1")
		}
		if d.SortLeft {
			v.Set("sort", "left")
			v.Set("end", strconv.FormatInt(end, 10))
		}
		return PageTickets + "?" + v.Encode()
	},
	// key shows a key as text when it is printable UTF-8, else as hex.
	"key": func(k string) string {
		for _, r := range k {
			if r == '\uFFFD' || r < 0x20 || r == 0x7f {
				return "0x" + hex.EncodeToString([]byte(k))
			}
		}
		return k
	},
	"yes": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
	"count": func(c uint64) string {
		if c == ^uint64(0) {
			return "exclusive"
		}
		return fmt.Sprint(c)
	},
}
