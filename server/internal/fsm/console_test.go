package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// holding returns a state holding every key of keys.
func holding(tb testing.TB, keys []string) *State {
	tb.Helper()
	s := New()
	const chunk = 10000
	for i := 0; i < len(keys); i += chunk {
		b := Batch{Time: 1000}
		for j, k := range keys[i:min(i+chunk, len(keys))] {
			b.Ops = append(b.Ops, Op{Kind: OpAcquire, Key: k, Owner: Owner{byte(j), byte(j >> 8), 1}, LeaseMs: 60000})
		}
		for _, r := range s.Apply(b) {
			if r.Status != Granted {
				tb.Fatalf("setup: %v", r.Status)
			}
		}
	}
	return s
}

// The sorted index follows the holds through grants, releases, expiries,
// clones and a snapshot's round trip.
func TestHoldsPageFollowsReleasesClonesAndSnapshots(t *testing.T) {
	s := holding(t, []string{"a/1", "a/2", "a/3", "b/1"})
	clone := s.Clone()
	h, _ := s.Get("a/2")
	if r := s.Apply(Batch{Time: 2000, Ops: []Op{{Kind: OpRelease, Key: "a/2", Token: h.Token}, {Kind: OpAcquire, Key: "a/0", Owner: Owner{9}, LeaseMs: 1000}}}); r[0].Status != Released || r[1].Status != Granted {
		t.Fatalf("release, acquire: %+v", r)
	}
	keys := func(st *State) (out []string) {
		page, _ := st.HoldsPage("a/", "", 10)
		for _, hk := range page {
			out = append(out, hk.Key)
		}
		return out
	}
	if got := keys(s); !slices.Equal(got, []string{"a/0", "a/1", "a/3"}) {
		t.Errorf("after the release: %q", got)
	}
	if got := keys(clone); !slices.Equal(got, []string{"a/1", "a/2", "a/3"}) {
		t.Errorf("the clone taken before: %q", got)
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(back); !slices.Equal(got, []string{"a/0", "a/1", "a/3"}) {
		t.Errorf("after a snapshot's round trip: %q", got)
	}
	h1, _ := back.Get("a/1")
	if r := back.Apply(Batch{Time: h1.ExpiresAt, Ops: []Op{{Kind: OpExpire, Key: "a/1", Token: h1.Token}}}); r[0].Status != Released {
		t.Fatalf("expire: %+v", r)
	}
	if got := keys(back); !slices.Equal(got, []string{"a/0", "a/3"}) {
		t.Errorf("after the expiry: %q", got)
	}
}

// Paging through the held keys of a prefix lists each of them once, in key
// order, whatever the page size; the counts and the last-page flag agree.
func TestHoldsPageWalksEveryKeyInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []string
	for i := 0; i < 500; i++ {
		keys = append(keys, fmt.Sprintf("%s/%d", []string{"orders", "billing", "ord"}[rng.IntN(3)], rng.IntN(100000)))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	s := holding(t, keys)
	for _, prefix := range []string{"", "orders/", "ord", "billing/1", "nothing"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		for _, size := range []int{1, 7, 50, 1000} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				page, more := s.HoldsPage(prefix, after, size)
				for _, hk := range page {
					if h, _ := s.Get(hk.Key); h != hk.Hold {
						t.Fatalf("key %q: hold %+v, want %+v", hk.Key, hk.Hold, h)
					}
					got = append(got, hk.Key)
				}
				if !more {
					break
				}
				if len(page) != size {
					t.Fatalf("prefix %q size %d: a page of %d before the last", prefix, size, len(page))
				}
				after = page[len(page)-1].Key
			}
			if !slices.Equal(got, want) {
				t.Fatalf("prefix %q size %d: paged %d keys %q..., want %d", prefix, size, len(got), got[:min(5, len(got))], len(want))
			}
		}
		if n, capped := s.CountPrefix(prefix, len(want)); n != len(want) || capped {
			t.Errorf("prefix %q: counted %d (capped %v), want %d", prefix, n, capped, len(want))
		}
		if len(want) > 1 {
			if n, capped := s.CountPrefix(prefix, len(want)-1); n != len(want)-1 || !capped {
				t.Errorf("prefix %q, limit %d: counted %d (capped %v)", prefix, len(want)-1, n, capped)
			}
		}
	}
}

// BenchmarkHoldsPage1M is the first tickets page of the console with
// 1,000,000 held keys: over all keys, and under a prefix that 1 in 10 have.
func BenchmarkHoldsPage1M(b *testing.B) {
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d/job/%08d", i%10, i)
	}
	// Built directly: a million applies would cost the benchmark run
	// (test.sh runs every benchmark once) half a minute on a busy machine.
	s := New()
	for i, k := range keys {
		s.holds[k] = Hold{Token: uint64(i + 1), Owner: Owner{byte(i), byte(i >> 8)}, LeaseMs: 60000}
		s.order.ReplaceOrInsert(k)
	}
	for _, prefix := range []string{"", "tenant-3/"} {
		b.Run(fmt.Sprintf("prefix=%q", prefix), func(b *testing.B) {
			for b.Loop() {
				page, _ := s.HoldsPage(prefix, "", 50)
				if len(page) != 50 {
					b.Fatalf("page of %d", len(page))
				}
			}
		})
	}
}

// sameState is reflect.DeepEqual for states: the sorted index of held keys
// is compared by its keys (its comparison function never compares equal).
func sameState(a, b *State) bool {
	keys := func(s *State) (out []string) {
		s.order.Ascend(func(k string) bool { out = append(out, k); return true })
		return out
	}
	if !slices.Equal(keys(a), keys(b)) {
		return false
	}
	ac, bc := *a, *b
	ac.order, bc.order = nil, nil
	return reflect.DeepEqual(&ac, &bc)
}

// HoldsLastPage is the tail of the keys with a prefix, in key order, for
// every kind of prefix: empty, ordinary, one ending in 0xff bytes (whose
// successor carries), and one that no key has.
func TestHoldsLastPage(t *testing.T) {
	keys := []string{"a", "a/1", "a/2", "a/3", "a\xff", "a\xff\xff/1", "a\xff\xff/2", "b/1", "b\xff", "c"}
	s := holding(t, keys)
	page := func(prefix string, limit int) ([]string, bool) {
		p, more := s.HoldsLastPage(prefix, limit)
		var out []string
		for _, hk := range p {
			out = append(out, hk.Key)
		}
		return out, more
	}
	for _, c := range []struct {
		prefix string
		limit  int
		want   []string
		more   bool
	}{
		{"", 3, []string{"b/1", "b\xff", "c"}, true},
		{"", 20, keys, false},
		{"a/", 2, []string{"a/2", "a/3"}, true},
		{"a/", 3, []string{"a/1", "a/2", "a/3"}, false},
		{"a\xff", 2, []string{"a\xff\xff/1", "a\xff\xff/2"}, true},
		{"a\xff\xff", 5, []string{"a\xff\xff/1", "a\xff\xff/2"}, false},
		{"b", 5, []string{"b/1", "b\xff"}, false},
		{"d", 5, nil, false},
	} {
		got, more := page(c.prefix, c.limit)
		if !slices.Equal(got, c.want) || more != c.more {
			t.Errorf("HoldsLastPage(%q, %d) = %q, %v; want %q, %v", c.prefix, c.limit, got, more, c.want, c.more)
		}
	}
}
