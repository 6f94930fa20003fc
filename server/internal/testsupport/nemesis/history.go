package nemesis

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OpKind is the kind of a recorded request.
type OpKind uint8

const (
	Acquire OpKind = iota + 1
	Release
	Describe
)

func (k OpKind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Release:
		return "release"
	case Describe:
		return "describe"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Outcome is what the client learned about a request.
type Outcome uint8

const (
	Pending Outcome = iota // not completed yet (only while recording)
	// OK is G for an acquire, R for a release, an I answer for a describe.
	OK
	// Refused is W for an acquire, N for a release.
	Refused
	// Unknown: the request may have taken effect (ErrIndeterminate, a
	// cancelled wait, a grant the client released for its budget).
	Unknown
	// NotSent: nothing reached a server (no connection, a capacity
	// reject, a describe without answer). Left out of every check.
	NotSent
)

func (o Outcome) String() string {
	return [...]string{"pending", "ok", "refused", "unknown", "not sent"}[o]
}

// Op is one request: when it was invoked and completed (on the harness's
// monotonic clock, from the start of the run) and what came of it.
type Op struct {
	Index   int
	Worker  int
	Kind    OpKind
	Key     string
	Call    time.Duration
	Return  time.Duration // for Unknown: when the client gave up (the effect may come later)
	Outcome Outcome
	// Token: the granted token (acquire OK), the released token (release),
	// the holder's token (describe OK with Held).
	Token uint64
	// Lease and Wait asked for (acquire).
	Lease, Wait time.Duration
	// Deadline: for a granted acquire, the ticket's conservative deadline
	// (Ticket.Deadline) on the same clock as Call/Return.
	Deadline time.Duration
	// Held: a describe found the key held (by Token).
	Held bool
	Err  string
}

func (o Op) String() string {
	s := fmt.Sprintf("#%d w%d %s(%s", o.Index, o.Worker, o.Kind, o.Key)
	if o.Kind == Release {
		s += fmt.Sprintf(", %d", o.Token)
	}
	s += fmt.Sprintf(") [%v, %v] -> %v", o.Call.Round(time.Microsecond), o.Return.Round(time.Microsecond), o.Outcome)
	switch {
	case o.Kind == Acquire && o.Outcome == OK:
		s += fmt.Sprintf(" token %d deadline %v", o.Token, o.Deadline.Round(time.Microsecond))
	case o.Kind == Describe && o.Outcome == OK && o.Held:
		s += fmt.Sprintf(" held by %d", o.Token)
	case o.Kind == Describe && o.Outcome == OK:
		s += " free"
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// History records operations from many goroutines.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts the clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Start is time zero of the history.
func (h *History) Start() time.Time { return h.start }

// Now is the time since Start (monotonic).
func (h *History) Now() time.Duration { return time.Since(h.start) }

// Since converts an absolute time (with a monotonic reading) to history time.
func (h *History) Since(t time.Time) time.Duration { return t.Sub(h.start) }

// Begin records the invocation of an operation and returns its index.
func (h *History) Begin(worker int, kind OpKind, key string, token uint64) int {
	now := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	i := len(h.ops)
	h.ops = append(h.ops, Op{Index: i, Worker: worker, Kind: kind, Key: key, Token: token, Call: now})
	return i
}

// End records the completion of operation i; f fills in the outcome.
func (h *History) End(i int, f func(*Op)) {
	now := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	op := &h.ops[i]
	op.Return = now
	f(op)
	if op.Outcome == Pending {
		op.Outcome = Unknown
	}
}

// Ops is a copy of the history.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	copy(out, h.ops)
	return out
}

// byKey returns the completed, sent operations of each key, by call time.
func byKey(ops []Op) (map[string][]Op, []string) {
	m := map[string][]Op{}
	for _, op := range ops {
		if op.Outcome == NotSent || op.Outcome == Pending {
			continue
		}
		m[op.Key] = append(m[op.Key], op)
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k)
		sort.SliceStable(v, func(i, j int) bool { return v[i].Call < v[j].Call })
	}
	sort.Strings(keys)
	return m, keys
}

// releaseNotHeld classifies a refused release read back from a history
// file, where only the error's text is left: N to a retry after the first
// attempt's answer was lost (ticketing.ErrNotHeldAfterRetry, whose message
// says "earlier attempt" as it did before that sentinel existed) is
// unknown, any other N is Refused. Live runs use errors.Is.
func releaseNotHeld(errText string) Outcome {
	if strings.Contains(errText, "earlier attempt") {
		return Unknown
	}
	return Refused
}

var opLine = regexp.MustCompile(`#(\d+) w(\d+) (acquire|release|describe)\(([^,)]+)(?:, (\d+))?\) \[([^,]+), ([^\]]+)\] -> (ok|refused|unknown|not sent|pending)(?: token (\d+) deadline (\S+))?(?: held by (\d+))?(?: free)?(?: \((.*)\))?$`)

// ParseHistory reads back the operations of a history.txt written by a run
// (lines of faults are skipped), so that a recorded history can be checked
// again (ticketjepsen -check). Times are rounded to microseconds there.
func ParseHistory(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if !strings.Contains(text, " -> ") {
			continue // a fault or heal
		}
		m := opLine.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("history line %d: not an operation: %q", line, text)
		}
		var op Op
		var err error
		bad := func(e error) {
			if err == nil && e != nil {
				err = e
			}
		}
		var u uint64
		op.Index, err = strconv.Atoi(m[1])
		w, e := strconv.Atoi(m[2])
		bad(e)
		op.Worker = w
		op.Kind = map[string]OpKind{"acquire": Acquire, "release": Release, "describe": Describe}[m[3]]
		op.Key = m[4]
		if m[5] != "" {
			u, e = strconv.ParseUint(m[5], 10, 64)
			bad(e)
			op.Token = u
		}
		op.Call, e = time.ParseDuration(m[6])
		bad(e)
		op.Return, e = time.ParseDuration(m[7])
		bad(e)
		op.Outcome = map[string]Outcome{"pending": Pending, "ok": OK, "refused": Refused, "unknown": Unknown, "not sent": NotSent}[m[8]]
		if m[9] != "" {
			u, e = strconv.ParseUint(m[9], 10, 64)
			bad(e)
			op.Token = u
			op.Deadline, e = time.ParseDuration(m[10])
			bad(e)
		}
		if m[11] != "" {
			u, e = strconv.ParseUint(m[11], 10, 64)
			bad(e)
			op.Held, op.Token = true, u
		}
		op.Err = m[12]
		if op.Kind == Release && op.Outcome == Refused {
			op.Outcome = releaseNotHeld(op.Err)
		}
		if err != nil {
			return nil, fmt.Errorf("history line %d: %v: %q", line, err, text)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}
