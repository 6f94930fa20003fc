// Command compare reads the JSON lines that ticketbench, etcdbench and
// redisbench print with -json (one object per run, the same schema,
// "system" telling them apart) and prints a markdown table with
// Ticketing/etcd ratios, and Ticketing/Redis ratios where Redis ran.
//
//	go run ./bench/compare results.jsonl
//
// Runs are paired per row (workload, nodes, clients): the k-th Ticketing
// result of a row with the k-th etcd result of that row, which
// bench/compare.sh runs back to back (A B A B), so every ratio printed
// comes from one pass of the same run; the k-th Redis result of a row joins
// that pair. Nothing here imports etcd or Redis: the main module does not
// depend on them.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// result is the shared schema of ticketbench and etcdbench.
type result struct {
	System    string      `json:"system"`
	Workload  string      `json:"workload"`
	Nodes     int         `json:"nodes"`
	Clients   int         `json:"clients"`
	DurationS float64     `json:"duration_s"`
	Ops       int64       `json:"ops"`
	OpsPerSec float64     `json:"ops_per_sec"`
	Errors    int64       `json:"errors"`
	Latency   percentiles `json:"latency_ms"`
	Acquire   percentiles `json:"acquire_latency_ms"`
	RSS       int64       `json:"server_rss_bytes"`
	Notes     string      `json:"notes"`
}

type percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// note returns the value of key=value in the notes ("" when absent).
func (r *result) note(key string) string {
	for _, f := range strings.FieldsFunc(r.Notes, func(c rune) bool { return c == ' ' || c == ';' }) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

func (r *result) noteFloat(key string) (float64, bool) {
	v, err := strconv.ParseFloat(r.note(key), 64)
	return v, err == nil
}

type rowKey struct {
	workload string
	nodes    int
	clients  int
	conns    int // Brokers / clientv3.Clients the workers share (0: not part of the row)
}

// connsOf reads how many client connections (Brokers, clientv3.Clients) a
// run's workers shared; 0 when the run does not say.
func connsOf(r *result) int {
	for _, k := range []string{"brokers", "clientv3_clients", "redis_clients"} {
		if v, ok := r.noteFloat(k); ok {
			return int(v)
		}
	}
	return 0
}

// fsyncFloor is the median p50 of the disk's write+fdatasync runs
// (ticketbench -workload fsync, system "disk") in the input.
func fsyncFloor(results []*result) (float64, bool) {
	var v []float64
	for _, r := range results {
		if r.System == "disk" && r.Workload == "fsync" {
			v = append(v, r.Latency.P50)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	return v[(len(v)-1)/2], true
}

// pair is one Ticketing run and the etcd run made next to it, and the
// Redis run made with them when the row has one.
type pair struct {
	rep     int
	t, e, r *result
	missing string
}

func main() {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	title := fs.String("title", "Ticketing vs etcd", "table heading")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: compare [-title T] [results.jsonl ...]   (stdin when no file)")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits
	var results []*result
	read := func(r io.Reader, name string) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for ln := 1; sc.Scan(); ln++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || !strings.HasPrefix(line, "{") {
				continue
			}
			res, err := parse(line)
			if err != nil {
				fmt.Fprintf(os.Stderr, "compare: %s:%d: %v\n", name, ln, err)
				continue
			}
			results = append(results, res)
		}
	}
	if fs.NArg() == 0 {
		read(os.Stdin, "stdin")
	}
	for _, p := range fs.Args() {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		read(f, p)
		_ = f.Close() // read only
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "compare: no results")
		os.Exit(1)
	}
	if _, err := os.Stdout.WriteString(render(*title, results)); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func parse(line string) (*result, error) {
	var r result
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// pairs groups results by row and pairs them in order of appearance.
func pairs(results []*result) (map[rowKey][]pair, []rowKey) {
	byRow := map[rowKey]map[string][]*result{}
	var keys []rowKey
	for _, r := range results {
		if r.System == "disk" {
			continue // the fsync floor is not a row of its own (see fsyncFloor)
		}
		k := rowKey{r.Workload, r.Nodes, r.Clients, connsOf(r)}
		if r.Workload == "hold" || r.Workload == "connections" {
			k.clients, k.conns = 0, 0 // sample / trickle size is not what the row is about
		}
		if byRow[k] == nil {
			byRow[k] = map[string][]*result{}
			keys = append(keys, k)
		}
		byRow[k][r.System] = append(byRow[k][r.System], r)
	}
	out := map[rowKey][]pair{}
	for k, m := range byRow {
		t, e, rd := m["ticketing"], m["etcd"], m["redis"]
		for i := 0; i < max(len(t), len(e)); i++ {
			p := pair{rep: i + 1}
			if i < len(rd) {
				p.r = rd[i]
			}
			if i < len(t) {
				p.t = t[i]
			} else {
				p.missing = "no Ticketing run"
			}
			if i < len(e) {
				p.e = e[i]
			} else {
				p.missing = "no etcd run"
			}
			out[k] = append(out[k], p)
		}
	}
	order := map[string]int{"uncontended": 0, "contended": 1, "hold": 2, "connections": 3}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.nodes != b.nodes {
			return a.nodes < b.nodes
		}
		if order[a.workload] != order[b.workload] {
			return order[a.workload] < order[b.workload]
		}
		if a.clients != b.clients {
			return a.clients > b.clients
		}
		return a.conns < b.conns
	})
	return out, keys
}

// metric is one figure of a row: how to read it from a result, its unit,
// and its target when there is one.
type metric struct {
	name   string
	unit   string
	get    func(*result) (float64, bool)
	target func(t, e, r *result) (string, bool, bool) // text, met, applicable
}

func fixed(f func(*result) float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) { return f(r), true }
}

// cpuPerOp is the servers' CPU time per op (pair or handoff) in µs: how
// much work one op costs, which the machine's noise hardly changes.
var cpuPerOp = metric{"server CPU per op", "µs", func(r *result) (float64, bool) {
	v, ok := r.noteFloat("server_cpu_s")
	if !ok || r.Ops == 0 {
		return 0, false
	}
	return v / float64(r.Ops) * 1e6, true
}, nil}

// genCPUPerOp is the load generator's CPU per op (the client side).
var genCPUPerOp = metric{"generator CPU per op", "µs", func(r *result) (float64, bool) {
	v, ok := r.noteFloat("bench_cpu_s")
	if !ok || r.Ops == 0 {
		return 0, false
	}
	return v / float64(r.Ops) * 1e6, true
}, nil}

// cpuCores are the cores the servers and the generator used in the window.
var cpuCores = []metric{
	{"server CPU", "cores", func(r *result) (float64, bool) { return r.noteFloat("server_cpu_cores") }, nil},
	{"generator CPU", "cores", func(r *result) (float64, bool) { return r.noteFloat("bench_cpu_cores") }, nil},
}

// floor is the disk's fsync floor of this input (0 when not measured).
var floor float64

func metricsFor(k rowKey) (string, []metric) {
	ratioTarget := func(min float64) func(t, e, r *result) (string, bool, bool) {
		return func(t, e, r *result) (string, bool, bool) {
			if e == nil || e.OpsPerSec == 0 {
				return fmt.Sprintf("≥%gx etcd", min), false, false
			}
			return fmt.Sprintf("≥%gx etcd", min), t.OpsPerSec >= min*e.OpsPerSec, true
		}
	}
	switch {
	case k.workload == "uncontended" && k.clients == 1:
		maxRatio := 0.45
		if k.nodes > 1 {
			maxRatio = 0.55
		}
		ms := []metric{
			{"pair p50", "ms", fixed(func(r *result) float64 { return r.Latency.P50 }),
				func(t, e, r *result) (string, bool, bool) {
					txt := fmt.Sprintf("≤%gx etcd", maxRatio)
					if e == nil || e.Latency.P50 == 0 {
						return txt, false, false
					}
					return txt, t.Latency.P50 <= maxRatio*e.Latency.P50, true
				}},
			{"acquire p50", "ms", fixed(func(r *result) float64 { return r.Acquire.P50 }), nil},
			{"pairs/s", "/s", fixed(func(r *result) float64 { return r.OpsPerSec }), nil},
		}
		if k.nodes == 1 {
			ms = append(ms, metric{"pair p50, against Redis", "ms", fixed(func(r *result) float64 { return r.Latency.P50 }),
				func(t, e, r *result) (string, bool, bool) {
					if r == nil || r.Latency.P50 == 0 {
						return "≤ Redis pair p50", false, false
					}
					return fmt.Sprintf("≤ Redis pair p50 (%.3f ms)", r.Latency.P50), t.Latency.P50 <= r.Latency.P50, true
				}})
			ms[1].target = func(t, e, r *result) (string, bool, bool) {
				if floor == 0 {
					return "≤ 2x fsync floor", false, false
				}
				return fmt.Sprintf("≤ 2x fsync floor (%.3f ms)", floor), t.Acquire.P50 <= 2*floor, true
			}
		}
		return "single client, uncontended", append(append(ms, cpuCores...), cpuPerOp, genCPUPerOp)
	case k.workload == "uncontended":
		target := ratioTarget(8)
		if k.nodes > 1 {
			target = ratioTarget(7)
		}
		if k.conns != 1 && k.conns != 4 {
			target = nil // the targets are for one shared connection and for 4
		}
		p99Target := func(t, e, r *result) (string, bool, bool) {
			if e == nil {
				return "< etcd p50", false, false
			}
			return fmt.Sprintf("< etcd p50 (%.1f ms)", e.Latency.P50), t.Latency.P99 < e.Latency.P50, true
		}
		if k.conns != 1 {
			p99Target = nil
		}
		return fmt.Sprintf("uncontended, %d clients, %d conn(s)", k.clients, k.conns), append([]metric{
			{"pairs/s", "/s", fixed(func(r *result) float64 { return r.OpsPerSec }), target},
			{"pair p50", "ms", fixed(func(r *result) float64 { return r.Latency.P50 }), nil},
			{"pair p99", "ms", fixed(func(r *result) float64 { return r.Latency.P99 }), p99Target},
			{"acquire p99", "ms", fixed(func(r *result) float64 { return r.Acquire.P99 }), nil},
		}, append(cpuCores, cpuPerOp, genCPUPerOp)...)
	case k.workload == "contended":
		ms := []metric{
			{"handoffs/s", "/s", fixed(func(r *result) float64 { return r.OpsPerSec }), ratioTarget(8)},
			{"acquire p50", "ms", fixed(func(r *result) float64 { return r.Acquire.P50 }), nil},
			{"acquire p99", "ms", fixed(func(r *result) float64 { return r.Acquire.P99 }), nil},
		}
		if k.nodes == 1 {
			ms[0].target = ratioTarget(15)
			ms[2].target = func(t, e, r *result) (string, bool, bool) { return "< 15 ms", t.Acquire.P99 < 15, true }
		}
		return fmt.Sprintf("contended, %d clients, %d conn(s)", k.clients, k.conns), append(append(ms, cpuCores...), cpuPerOp, genCPUPerOp)
	case k.workload == "hold":
		return "hold", []metric{
			{"held N", "", func(r *result) (float64, bool) { return r.noteFloat("held") }, nil},
			{"RSS at N, all servers", "MiB", fixed(func(r *result) float64 { return float64(r.RSS) / (1 << 20) }), nil},
			{"RSS at N, per server", "MiB", fixed(func(r *result) float64 { return float64(r.RSS) / float64(max(r.Nodes, 1)) / (1 << 20) }),
				func(t, e, r *result) (string, bool, bool) {
					n, _ := t.noteFloat("held")
					if n < 1_000_000 {
						return "1M held: < 1 GiB", false, false
					}
					return "1M held: < 1 GiB", t.RSS/int64(max(t.Nodes, 1)) < 1<<30, true
				}},
			{"RSS per held ticket", "B", func(r *result) (float64, bool) { return r.noteFloat("rss_per_held_lock_bytes") }, nil},
			{"restart", "s", func(r *result) (float64, bool) { return r.noteFloat("restart_s") },
				func(t, e, r *result) (string, bool, bool) {
					v, ok := t.noteFloat("restart_s")
					return "< 10 s", ok && v < 10, ok
				}},
			{"sample acquire p99", "ms", fixed(func(r *result) float64 { return r.Acquire.P99 }), nil},
		}
	case k.workload == "connections":
		return "idle connections", []metric{
			{"idle connections", "", func(r *result) (float64, bool) { return r.noteFloat("n") }, nil},
			{"RSS idle, before the connections, per server", "MiB", func(r *result) (float64, bool) {
				v, ok := r.noteFloat("rss_before_idle")
				return v / float64(max(r.Nodes, 1)) / (1 << 20), ok
			}, func(t, e, r *result) (string, bool, bool) {
				v, ok := t.noteFloat("rss_before_idle")
				return "< 64 MiB", ok && v/float64(max(t.Nodes, 1)) < 64<<20, ok
			}},
			{"acquire p50", "ms", fixed(func(r *result) float64 { return r.Acquire.P50 }), nil},
			{"acquire p99", "ms", fixed(func(r *result) float64 { return r.Acquire.P99 }),
				func(t, e, r *result) (string, bool, bool) {
					n, _ := t.noteFloat("n")
					if n < 10_000 {
						return "10k conns: < 50 ms", false, false
					}
					return "10k conns: < 50 ms", t.Acquire.P99 < 50, true
				}},
			{"RSS with idle", "MiB", func(r *result) (float64, bool) {
				v, ok := r.noteFloat("rss_with_idle")
				return v / (1 << 20), ok
			}, nil},
		}
	}
	return fmt.Sprintf("%s, %d clients", k.workload, k.clients), []metric{
		{"ops/s", "/s", fixed(func(r *result) float64 { return r.OpsPerSec }), nil},
	}
}

func num(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func ratio(t, e float64, tok, eok bool) string {
	if !tok || !eok || e == 0 {
		return "–"
	}
	r := t / e
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	default:
		return fmt.Sprintf("%.2fx", r)
	}
}

func noise(r *result) string {
	if r == nil {
		return "–"
	}
	if v := r.note("other_cpu_cores"); v != "" {
		return v
	}
	return "–"
}

// cell is one metric of one pair, formatted.
type cell struct{ t, e, ratio, target, met, noise, r, ratioR, noiseR string }

func evaluate(m metric, p pair) cell {
	var tv, ev float64
	var tok, eok bool
	if p.t != nil {
		tv, tok = m.get(p.t)
	}
	if p.e != nil {
		ev, eok = m.get(p.e)
	}
	var rv float64
	var rok bool
	if p.r != nil {
		rv, rok = m.get(p.r)
	}
	c := cell{t: num(tv, tok), e: num(ev, eok), ratio: ratio(tv, ev, tok, eok), noise: noise(p.t) + "/" + noise(p.e),
		r: num(rv, rok), ratioR: ratio(tv, rv, tok, rok), noiseR: noise(p.r)}
	if m.target != nil && p.t != nil {
		txt, ok, applicable := m.target(p.t, p.e, p.r)
		c.target = txt
		switch {
		case !applicable:
			c.met = "n/a"
		case ok:
			c.met = "yes"
		default:
			c.met = "**no**"
		}
	}
	return c
}

func unitOf(m metric) string {
	if m.unit == "" {
		return ""
	}
	return " (" + m.unit + ")"
}

// summary is one line per row and metric, the runs side by side
// ("run 1 / run 2"), each ratio from its own run.
func summary(ps map[rowKey][]pair, keys []rowKey, withRedis bool) string {
	var sb strings.Builder
	sb.WriteString("| nodes | row | metric | Ticketing | etcd | Ticketing/etcd | target | met |")
	sep := "|---|---|---|---|---|---|---|---|"
	if withRedis {
		sb.WriteString(" Redis | Ticketing/Redis |")
		sep += "---|---|"
	}
	sb.WriteString("\n" + sep + "\n")
	for _, k := range keys {
		name, ms := metricsFor(k)
		for _, m := range ms {
			var t, e, r, met, rd, rr []string
			target := ""
			for _, p := range ps[k] {
				c := evaluate(m, p)
				t, e, r = append(t, c.t), append(e, c.e), append(r, c.ratio)
				rd, rr = append(rd, c.r), append(rr, c.ratioR)
				if c.target != "" {
					target, _, _ = strings.Cut(c.target, " (") // the per-run detail is below
					met = append(met, c.met)
				}
			}
			fmt.Fprintf(&sb, "| %d | %s | %s%s | %s | %s | %s | %s | %s |", k.nodes, name, m.name, unitOf(m),
				strings.Join(t, " / "), strings.Join(e, " / "), strings.Join(r, " / "), target, strings.Join(met, " / "))
			if withRedis {
				fmt.Fprintf(&sb, " %s | %s |", strings.Join(rd, " / "), strings.Join(rr, " / "))
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func render(title string, results []*result) string {
	floor, _ = fsyncFloor(results)
	ps, keys := pairs(results)
	withRedis := false
	for _, r := range results {
		withRedis = withRedis || r.System == "redis"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "### %s\n\n", title)
	sb.WriteString("Each cell lists the runs in order (run 1 / run 2 / ...); each ratio is Ticketing/etcd of the same run.\n\n")
	if f, ok := fsyncFloor(results); ok {
		fmt.Fprintf(&sb, "Disk floor in this run (ticketbench -workload fsync, 4 KiB append + fdatasync, queue depth 1): p50 %.3f ms (median of the floor runs).\n\n", f)
	}
	sb.WriteString(summary(ps, keys, withRedis))
	sb.WriteString("\n#### Per run, with machine noise\n\n")
	sb.WriteString("| nodes | row | metric | run | Ticketing | etcd | Ticketing/etcd | target | met | noise T/E |")
	sep := "|---|---|---|---|---|---|---|---|---|---|"
	if withRedis {
		sb.WriteString(" Redis | Ticketing/Redis | noise R |")
		sep += "---|---|---|"
	}
	sb.WriteString("\n" + sep + "\n")
	var notes []string
	for _, k := range keys {
		name, ms := metricsFor(k)
		for _, p := range ps[k] {
			if p.t != nil && p.t.Errors > 0 {
				notes = append(notes, fmt.Sprintf("%d node(s) %s run %d: Ticketing had %d errors", k.nodes, name, p.rep, p.t.Errors))
			}
			if p.e != nil && p.e.Errors > 0 {
				notes = append(notes, fmt.Sprintf("%d node(s) %s run %d: etcd had %d errors", k.nodes, name, p.rep, p.e.Errors))
			}
			if p.r != nil && p.r.Errors > 0 {
				notes = append(notes, fmt.Sprintf("%d node(s) %s run %d: Redis had %d errors", k.nodes, name, p.rep, p.r.Errors))
			}
			if k.workload == "hold" && p.t != nil && p.e != nil {
				tn, _ := p.t.noteFloat("held")
				en, _ := p.e.noteFloat("held")
				if tn != en {
					notes = append(notes, fmt.Sprintf("%d node(s) hold run %d: Ticketing held %.0f tickets, etcd %.0f locks: compare RSS per held ticket, not RSS", k.nodes, p.rep, tn, en))
				}
			}
			if k.workload == "connections" && p.t != nil && p.e != nil {
				tn, _ := p.t.noteFloat("n")
				en, _ := p.e.noteFloat("n")
				if tn != en {
					notes = append(notes, fmt.Sprintf("%d node(s) connections run %d: Ticketing %.0f idle connections, etcd %.0f", k.nodes, p.rep, tn, en))
				}
			}
			for _, m := range ms {
				c := evaluate(m, p)
				fmt.Fprintf(&sb, "| %d | %s | %s%s | %d | %s | %s | %s | %s | %s | %s |",
					k.nodes, name, m.name, unitOf(m), p.rep, c.t, c.e, c.ratio, c.target, c.met, c.noise)
				if withRedis {
					fmt.Fprintf(&sb, " %s | %s | %s |", c.r, c.ratioR, c.noiseR)
				}
				sb.WriteString("\n")
			}
		}
	}
	if withRedis {
		sb.WriteString("\nRedis is one redis-server with appendonly yes and appendfsync always (every grant on disk before its answer), " +
			"the lock built as its careful users build it (SET NX PX and a per-key INCR fencing counter in one Lua script, compare-and-delete release), " +
			"run right after the etcd run of the same pair; it has no 3-node row (its replication is asynchronous).\n")
	}
	sb.WriteString("\nRatios are Ticketing/etcd of the same run (the two measured back to back); " +
		"for latencies and memory lower is better. *noise* is other_cpu_cores: CPU used by other processes on the shared machine during the window (of 2 cores).\n")
	if len(notes) > 0 {
		sb.WriteString("\n")
		for _, n := range notes {
			sb.WriteString("- " + n + "\n")
		}
	}
	return sb.String()
}
