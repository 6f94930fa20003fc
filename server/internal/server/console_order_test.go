package server_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/console"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

var (
	rowKey   = regexp.MustCompile(`<tr class="ticket" data-key="([^"]*)">`)
	nextLink = regexp.MustCompile(`<a id="next" href="([^"]*)">`)
)

// ticketPages follows the tickets pages from url by their Next links and
// returns the keys of every page, in order.
func ticketPages(t *testing.T, base, url string) (pages [][]string) {
	t.Helper()
	for len(pages) < 30 {
		resp, body := consoleDo(t, http.DefaultClient, "GET", base+url, bearer(monitorToken))
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, body)
		}
		var keys []string
		for _, m := range rowKey.FindAllStringSubmatch(body, -1) {
			keys = append(keys, html.UnescapeString(m[1]))
		}
		pages = append(pages, keys)
		m := nextLink.FindStringSubmatch(body)
		if m == nil {
			return pages
		}
		url = html.UnescapeString(m[1])
	}
	t.Fatalf("more than 30 pages from %s", url)
	return nil
}

// By time left, the tickets pages walk one order over every key of the
// prefix, soonest lease end first: the first page holds the shortest
// leases wherever their keys sort, the Next link continues that order, the
// last page ends it, and a follower pages the leader's order alike.
func TestConsoleTicketsByTimeLeftAcrossPages(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithConfig(consoleOn))
	li := c.LeaderIndex(t)
	r := testcluster.Hello(t, c.Addr(li), ordersToken)
	const n = console.PageSize + 20
	// Leases 3 s apart in an order unlike the keys' (31 is prime to n), all
	// asked at once: the grants' own spread is far below 3 s.
	lease := func(i int) uint8 { return uint8(20 + 3*((i*31)%n)) }
	// grantAll acquires the keys from..to-1 of name, lease lease(i), all
	// asked at once.
	grantAll := func(name string, from, to int, lease func(int) uint8) {
		ids := map[uint32]bool{}
		for i := from; i < to; i++ {
			ids[r.Acquire(fmt.Sprintf(name, i), testcluster.Owner(i+1), 0, lease(i))] = true
		}
		for len(ids) > 0 {
			f := r.Recv()
			if f.Type != wire.TypeGranted || !ids[f.ID] {
				t.Fatalf("acquire: got %s for request %d: %s", f.Type, f.ID, f.Text)
			}
			delete(ids, f.ID)
		}
	}
	grantAll("orders/%03d", 0, n, lease)
	// Behind them, more keys than the core reads in one part, with the
	// longest lease: the walk over every key goes on part after part.
	const fillers = 600
	for i := n; i < n+fillers; i += 50 {
		grantAll("orders/zz-%03d", i, i+50, func(int) uint8 { return 250 })
	}
	r.Final(r.Acquire("shared/x", testcluster.Owner(999), 0, 1))
	want := make([]string, n)
	leaseOf := map[string]int{}
	for i := range want {
		want[i] = fmt.Sprintf("orders/%03d", i)
		leaseOf[want[i]] = int(lease(i))
	}
	slices.SortFunc(want, func(a, b string) int { return leaseOf[a] - leaseOf[b] })

	for _, s := range []int{li, (li + 1) % 3} {
		base := "http://" + c.Server(s).HTTPAddr().String() + "/console/"
		pages := ticketPages(t, base, "tickets?prefix=orders%2F&sort=left")
		all := slices.Concat(pages...)
		if len(all) != n+fillers || len(pages[0]) != console.PageSize {
			t.Fatalf("server %d: pages of %v keys, want %d in pages of %d", s, lens(pages), n+fillers, console.PageSize)
		}
		if got := all[:n]; !slices.Equal(got, want) {
			t.Errorf("server %d: by time left the pages list\n%v\nwant\n%v", s, got, want)
		}
		seen := map[string]bool{}
		for _, k := range all {
			if seen[k] {
				t.Errorf("server %d: %s listed twice", s, k)
			}
			seen[k] = true
		}
		last := ticketPages(t, base, "tickets?prefix=orders%2F&sort=left&last=1")
		if !slices.Equal(last[0], all[len(all)-console.PageSize:]) {
			t.Errorf("server %d: the last page by time left lists\n%v\nwant\n%v", s, last[0], all[len(all)-console.PageSize:])
		}
	}
	// A page by time left asked without the cursor's lease end is refused
	// with what to do, not shown in another order.
	resp, body := consoleDo(t, http.DefaultClient, "GET", "http://"+c.Server(li).HTTPAddr().String()+"/console/tickets?sort=left&after=orders%2F001", bearer(monitorToken))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "needs end") {
		t.Errorf("sort=left with after but no end: %d %s", resp.StatusCode, body)
	}
}

func lens(pages [][]string) []int {
	out := make([]int, len(pages))
	for i, p := range pages {
		out[i] = len(p)
	}
	return out
}
