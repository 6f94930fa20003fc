package consoletest

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/console"
	"github.com/ticketing-io/ticketing/server/internal/server"
)

// chromiumPath finds Debian's chromium (test.sh installs it), or
// $TICKETING_CHROMIUM.
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("TICKETING_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install Debian's chromium package (apt-get install chromium; test.sh does) or set TICKETING_CHROMIUM")
	return ""
}

// screenshotDir is where the pages' screenshots are kept:
// $TICKETING_SCREENSHOTS, else a directory under the system's temporary
// directory that outlives the test (its path is logged).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("TICKETING_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ticketing-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// tab is one browser tab and the HTML of the pages it loaded.
type tab struct {
	t     *testing.T
	ctx   context.Context
	shots string
	pages map[string]string // url -> last HTML, to look for secrets
}

// newBrowser starts a headless Chromium for a closed network, in a fresh
// profile; tabs come from newTab.
//
//nolint:revive // context second: the browser lives as long as the test
func newBrowser(t *testing.T, ctx context.Context) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancel)
	// The first context starts the browser; each tab is a context made from it.
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if _, err := chromedp.Run(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browser
}

// newTab opens a tab; with token, every request carries it as a bearer token.
func newTab(t *testing.T, browser context.Context, token, shots string) *tab {
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, shots: shots, pages: map[string]string{}}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	if token != "" {
		h := network.Headers{"Authorization": "Bearer " + token}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
			t.Fatalf("set the token header: %v", err)
		}
	}
	return tb
}

// load opens url and returns the document's HTTP status.
func (tb *tab) load(url string) int64 {
	tb.t.Helper()
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(url))
	if err != nil {
		tb.t.Fatalf("load %s: %v", url, err)
	}
	html, err := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		tb.t.Fatalf("read %s: %v", url, err)
	}
	tb.pages[url] = html
	return resp.Status
}

// count is the number of elements that match sel now (no waiting).
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	nodes, err := chromedp.Run(tb.ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
	if err != nil {
		tb.t.Fatalf("query %s: %v", sel, err)
	}
	return len(nodes)
}

// text is the text of the first element that matches sel, which must exist.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	if tb.count(sel) == 0 {
		tb.t.Fatalf("no element %s on the page", sel)
	}
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// until reloads url until cond holds, for at most 20 s.
func (tb *tab) until(url, what string, cond func() bool) {
	tb.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st := tb.load(url); st == 200 && cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: not seen within 20 s at %s; the page:\n%s", what, url, tb.pages[url])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tb.shots, "console-"+name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// click follows the link sel and waits for the page it loads.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil || resp.Status != 200 {
		tb.t.Fatalf("follow %s: %v (status %v)", sel, err, resp)
	}
}

// keys are the keys of the tickets page shown, in order.
func (tb *tab) keys() []string {
	tb.t.Helper()
	keys, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("tr.ticket")).map(r => r.dataset.key)`))
	if err != nil {
		tb.t.Fatalf("read the keys: %v", err)
	}
	return keys
}

func rowSel(key string) string { return fmt.Sprintf(`tr.ticket[data-key=%q]`, key) }

// TestConsoleInBrowser drives the console of a real three-server cluster
// in headless Chromium: a held key with its token, owner and principal, a
// waiter in its queue, the same view on a follower, the key gone after its
// release, coordination sessions and semaphores, refusals, and a page
// refused without credentials. It keeps a screenshot of each page.
func TestConsoleInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := startCluster(t, 3)
	leader, followers := cl.leader()
	b := cl.broker(ctx)
	shots := screenshotDir(t)
	alloc := newBrowser(t, ctx)
	ops := newTab(t, alloc, monitorToken, shots)
	tickets := "http://" + leader.http + "/console/tickets?prefix=orders%2F"

	const key = "orders/42"
	tk, err := b.Acquire(ctx, key, time.Second, time.Minute, 0)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	d, err := b.Describe(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	owner := hex.EncodeToString(d.Owner[:])
	if _, err := b.Acquire(ctx, "billing/7", time.Second, time.Minute, 0); err != nil {
		t.Fatal(err)
	}

	t.Run("held key with token and owner", func(t *testing.T) {
		ops.t = t
		ops.until(tickets, "the held key", func() bool { return ops.count(rowSel(key)) == 1 })
		if got := ops.text(rowSel(key) + " td.token"); got != fmt.Sprint(tk.Token()) {
			t.Errorf("token cell %q, want %d", got, tk.Token())
		}
		if got := ops.text(rowSel(key) + " td.owner"); got != owner {
			t.Errorf("owner cell %q, want %s", got, owner)
		}
		if got := ops.text(rowSel(key) + " td.principal"); got != "app" {
			t.Errorf("principal cell %q, want app", got)
		}
		if ops.count(rowSel("billing/7")) != 0 {
			t.Error("billing/7 listed under the prefix orders/")
		}
	})

	// A second client waits for the key: it shows in the key's queue.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan error, 1)
	b2 := cl.broker(ctx)
	go func() { _, err := b2.Acquire(waitCtx, key, 60*time.Second, time.Minute, 0); waited <- err }()
	t.Run("waiter in the queue", func(t *testing.T) {
		ops.t = t
		ops.until(tickets, "the waiter", func() bool { return ops.count(rowSel(key)+" li.waiter") == 1 })
		ops.screenshot("tickets")
	})

	t.Run("follower shows the leader's view", func(t *testing.T) {
		ops.t = t
		f := followers[0]
		url := "http://" + f.http + "/console/tickets?prefix=orders%2F"
		ops.until(url, "the held key on the follower", func() bool {
			return ops.count(rowSel(key)) == 1 && ops.count(rowSel(key)+" li.waiter") == 1
		})
		if got := ops.text(rowSel(key) + " td.token"); got != fmt.Sprint(tk.Token()) {
			t.Errorf("follower's token cell %q, want %d", got, tk.Token())
		}
		if src := ops.text("#source"); !strings.Contains(src, "Server "+f.id) || !strings.Contains(src, "leader "+leader.id) {
			t.Errorf("follower's page says %q, want it served by %s from the leader %s", src, f.id, leader.id)
		}
		ops.until("http://"+f.http+"/console/cluster", "the leader on the follower's cluster page", func() bool {
			return ops.count(fmt.Sprintf(`tr.member[data-id=%q] strong`, leader.id)) == 1
		})
	})
	stopWaiting()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Logf("the waiter ended with %v", err)
	}

	t.Run("released key is gone", func(t *testing.T) {
		ops.t = t
		if err := tk.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		ops.until(tickets, "the released key gone", func() bool { return ops.count(rowSel(key)) == 0 })
		if got := ops.text("#matched"); !strings.HasPrefix(got, "0 held keys") {
			t.Errorf("after the release the page says %q", got)
		}
	})

	t.Run("tickets by time left over every page", func(t *testing.T) {
		ops.t = t
		// Leases 3 s apart in an order unlike the keys' (7 is prime to
		// n), asked at once: the grants' own spread is far below 3 s.
		const n = 60
		lease := func(i int) time.Duration { return time.Duration(20+3*((i*7)%n)) * time.Second }
		errs := make(chan error, n)
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("leases/%03d", i)
			go func() { _, err := b.Acquire(ctx, want[i], time.Second, lease(i), 0); errs <- err }()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		leaseOf := map[string]time.Duration{}
		for i, k := range want {
			leaseOf[k] = lease(i)
		}
		slices.SortFunc(want, func(a, b string) int { return cmp.Compare(leaseOf[a], leaseOf[b]) })
		url := "http://" + followers[0].http + "/console/tickets?prefix=leases%2F"
		// The order stands while the leader does: a new one restarts every
		// lease in full at its takeover, so pages read across a change of
		// leader are read again.
		var got []string
		ops.until(url, "the two pages by time left", func() bool {
			if ops.count("tr.ticket") != console.PageSize {
				return false
			}
			ops.click("#sort-left")
			got = ops.keys()
			ops.click("#next")
			got = append(got, ops.keys()...)
			return slices.Equal(got, want)
		})
		ops.load(url + "&sort=left")
		ops.screenshot("tickets-by-time-left")
	})

	t.Run("coordination", func(t *testing.T) {
		ops.t = t
		cb, err := ticketing.Connect(cl.addrs(), ticketing.WithToken(appToken))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cb.Close() })
		cc, err := coordination.New(cb)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		if err := cc.CreateNode(ctx, "/jobs", coordination.NodeConfig{}); err != nil {
			t.Fatal(err)
		}
		s1, err := cc.Session(ctx, "/jobs", coordination.WithDescription("worker-1"))
		if err != nil {
			t.Fatal(err)
		}
		defer s1.Close(ctx)
		if err := s1.CreateSemaphore(ctx, "nightly-report", 1, []byte("report of 2026-12-04")); err != nil {
			t.Fatal(err)
		}
		if _, err := s1.AcquireSemaphore(ctx, "nightly-report", coordination.Exclusive()); err != nil {
			t.Fatal(err)
		}
		s2, err := cc.Session(ctx, "/jobs", coordination.WithDescription("worker-2"))
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(ctx)
		qctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			_, _ = s2.AcquireSemaphore(qctx, "nightly-report", coordination.Exclusive(), coordination.Timeout(time.Minute))
		}()
		sem := `section.node[data-path="/jobs"] tr.semaphore[data-name="nightly-report"]`
		ops.until("http://"+leader.http+"/console/coordination", "the semaphore's owner and waiter", func() bool {
			return ops.count(sem+" td.owners li.holder") == 1 && ops.count(sem+" td.waiters li.holder") == 1
		})
		// Each holder names its session and the session's description.
		if got, want := ops.text(sem+" td.owners"), fmt.Sprintf("session %d (worker-1): ", s1.ID()); !strings.HasPrefix(got, want) {
			t.Errorf("owners %q, want %q and the count", got, want)
		}
		if got, want := ops.text(sem+" td.waiters"), fmt.Sprintf("session %d (worker-2): ", s2.ID()); !strings.HasPrefix(got, want) {
			t.Errorf("waiters %q, want %q and the count", got, want)
		}
		if got := ops.text(sem + " td.data"); got != "report of 2026-12-04" {
			t.Errorf("data %q, want the semaphore's data", got)
		}
		if n := ops.count(`section.node[data-path="/jobs"] tr.session`); n != 2 {
			t.Errorf("%d sessions listed, want 2", n)
		}
		ops.screenshot("coordination")
	})

	t.Run("refused without credentials", func(t *testing.T) {
		anon := newTab(t, alloc, "", shots)
		if st := anon.load("http://" + leader.http + "/console/tickets"); st != 401 {
			t.Errorf("status %d without credentials, want 401", st)
		}
		if anon.count("tr.ticket") != 0 || !strings.Contains(anon.text("body"), "needs the token of a monitor or admin principal") {
			t.Errorf("the refusal page:\n%s", anon.pages["http://"+leader.http+"/console/tickets"])
		}
		app := newTab(t, alloc, appToken, shots)
		if st := app.load("http://" + leader.http + "/console/tickets"); st != 403 {
			t.Errorf("status %d for a client principal, want 403", st)
		}
		if st := anon.load("http://" + followers[0].http + "/console/cluster"); st != 401 {
			t.Errorf("status %d without credentials on a follower, want 401", st)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		ops.t = t
		ops.until("http://"+leader.http+"/console/refusals", "the refused console request", func() bool {
			return ops.count(`tr.refusal td.principal`) > 0 && strings.Contains(ops.text("#refusals"), "app")
		})
		ops.screenshot("refusals")
		ops.until("http://"+leader.http+"/console/cluster", "the cluster page", func() bool { return ops.count("tr.member") == 3 })
		if got := ops.text("#leader"); !strings.HasPrefix(got, leader.id) {
			t.Errorf("leader %q, want %s", got, leader.id)
		}
		// Each member's version, as its Raft handshake stated it, and its
		// log's distance from the commit index.
		for _, p := range cl.procs {
			member := fmt.Sprintf(`tr.member[data-id=%q]`, p.id)
			if got := ops.text(member + " td.version"); got != stampedVersion {
				t.Errorf("member %s's version %q, want %s", p.id, got, stampedVersion)
			}
			leads := ops.count(member+" strong") == 1
			if got := ops.text(member + " td.replication"); leads && got != "leader" || !leads && !strings.HasSuffix(got, " behind") {
				t.Errorf("member %s's replication %q", p.id, got)
			}
		}
		ops.screenshot("cluster")
	})

	// No page ever shows a token or a token's hash.
	for url, html := range ops.pages {
		for _, secret := range []string{monitorToken, appToken, server.HashToken(monitorToken), server.HashToken(appToken)} {
			if strings.Contains(html, secret) {
				t.Errorf("%s shows a token or a token hash", url)
			}
		}
	}
}
