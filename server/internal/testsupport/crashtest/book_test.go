package crashtest

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// The book is the clients' shared knowledge: every request, recorded before
// it is sent and updated when its answer (or the loss of its answer) is
// known. It checks each answer against what the clients knew when the request
// was sent, settles indeterminate requests from later describes, and keeps
// the history for the linearizability check.

const lease = 250 // seconds: no lease expires during a test

// relState is what is known about a grant's release.
type relState int

const (
	held        relState = iota // granted, no release sent
	releasing                   // release sent, answer pending
	relLost                     // release sent, answer lost with its connection
	relTimedOut                 // release sent, no answer in time: it may still take effect
)

type grant struct {
	key    string
	token  uint64
	owner  wire.Owner
	worker int
	sent   time.Time // when the acquire was sent: the lease runs out no earlier than sent+lease
	rel    relState
	relOp  int // history index of the release
}

type acqState int

const (
	acqInFlight acqState = iota
	acqLost
	acqTimedOut
)

// acq is an acquire without a known outcome.
type acq struct {
	key    string
	owner  wire.Owner
	worker int
	floor  uint64 // the largest token any client had seen when it was sent
	sent   time.Time
	state  acqState
	op     int // history index
}

type keyBook struct {
	owner    int // the worker that alone uses this key, -1 for a shared key
	grants   map[uint64]*grant
	released map[uint64]bool // tokens whose release took effect
	acqs     map[wire.Owner]*acq
}

type stats struct {
	answered, lost, timedOut                 int
	grants, releases, describes, notAcquired int
	settledGranted, settledNot               int
	settledReleased, settledNotReleased      int
	verifiedKeys, verifications              int
}

type book struct {
	t     testing.TB
	mu    sync.Mutex
	start time.Time

	maxSeen uint64            // the largest token any client has seen
	tokens  map[uint64]string // every token seen granted -> its key
	keys    map[string]*keyBook
	hist    []histOp
	st      stats
	errs    int
	wByLost int // W answers explained only by a lost acquire that never took effect
}

type histOp struct {
	porcupine.Operation
	drop    bool  // never sent, or settled as never in effect: not part of the history
	settled int64 // for a lost request settled as never in effect: when that was seen
}

func newBook(t testing.TB) *book {
	return &book{t: t, start: time.Now(), tokens: map[uint64]string{}, keys: map[string]*keyBook{}}
}

// never is the return time of a request whose outcome is unknown: it may take
// effect at any time after it was sent.
const never = int64(math.MaxInt64 / 2)

func (b *book) now() int64 { return int64(time.Since(b.start)) }

func (b *book) violation(format string, args ...any) {
	b.errs++
	if b.errs <= 25 {
		b.t.Errorf("VIOLATION: "+format, args...)
	}
}

// addKey registers a key; owner is the worker that alone uses it, or -1.
func (b *book) addKey(key string, owner int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys[key] = &keyBook{owner: owner, grants: map[uint64]*grant{}, released: map[uint64]bool{}, acqs: map[wire.Owner]*acq{}}
}

func (b *book) addOp(client int, key string, in opIn) int {
	in.key = key
	b.hist = append(b.hist, histOp{Operation: porcupine.Operation{ClientId: client, Input: in, Call: b.now(), Return: never, Output: opOut{unknown: true}}})
	return len(b.hist) - 1
}

func (b *book) answer(op int, out opOut) {
	b.hist[op].Output = out
	b.hist[op].Return = b.now()
}

func (b *book) observe(token uint64) {
	if token > b.maxSeen {
		b.maxSeen = token
	}
}

// beginAcquire records an acquire about to be sent.
func (b *book) beginAcquire(worker int, key string, owner wire.Owner) *acq {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := &acq{key: key, owner: owner, worker: worker, floor: b.maxSeen, sent: time.Now(), state: acqInFlight}
	a.op = b.addOp(worker, key, opIn{kind: acquireOp, owner: owner})
	b.keys[key].acqs[owner] = a
	return a
}

func (b *book) endAcquire(a *acq, f wire.Frame, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kb := b.keys[a.key]
	switch o {
	case notSent:
		delete(kb.acqs, a.owner)
		b.hist[a.op].drop = true
		return
	case lost:
		a.state = acqLost
		b.st.lost++
		return
	case timedOut:
		a.state = acqTimedOut
		b.st.timedOut++
		return
	}
	b.st.answered++
	delete(kb.acqs, a.owner)
	switch f.Type {
	case wire.TypeGranted:
		b.st.grants++
		b.answer(a.op, opOut{ok: true, token: f.Token})
		b.granted(kb, a, f.Token, "acknowledged grant")
	case wire.TypeNotAcquired:
		b.st.notAcquired++
		b.answer(a.op, opOut{})
		if kb.owner >= 0 && b.mustBeFree(kb) {
			b.violation("acquire of %q answered W, but it was free: only its client uses it, and every grant of it was released with an acknowledgement", a.key)
		}
	default:
		b.hist[a.op].drop = true
		b.violation("acquire of %q (wait 0, lease %d s) answered %s reason %d, want G or W", a.key, lease, f.Type, f.Reason)
	}
}

// mustBeFree: nothing this book knows of can hold the key.
func (b *book) mustBeFree(kb *keyBook) bool {
	return len(kb.grants) == 0 && len(kb.acqs) == 0
}

// granted records that a's owner holds the key under token, and checks the
// token against everything seen before the acquire was sent.
func (b *book) granted(kb *keyBook, a *acq, token uint64, how string) {
	if token <= a.floor {
		b.violation("%s of %q has token %d, not above token %d that clients had seen before the acquire was sent", how, a.key, token, a.floor)
	}
	if k, dup := b.tokens[token]; dup {
		b.violation("%s of %q has token %d, already granted for %q", how, a.key, token, k)
	}
	for _, g := range kb.grants {
		if g.rel == held {
			b.violation("%s of %q (token %d) while the acknowledged grant %d, never released, held it", how, a.key, token, g.token)
		}
	}
	b.tokens[token] = a.key
	b.observe(token)
	kb.grants[token] = &grant{key: a.key, token: token, owner: a.owner, worker: a.worker, sent: a.sent, rel: held}
}

// heldBy lists the grants a worker holds and has not begun to release.
func (b *book) heldBy(worker int) []*grant {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*grant
	for _, kb := range b.keys {
		for _, g := range kb.grants {
			if g.worker == worker && g.rel == held {
				out = append(out, g)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].token < out[j].token })
	return out
}

func (b *book) beginRelease(g *grant) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g.rel = releasing
	g.relOp = b.addOp(g.worker, g.key, opIn{kind: releaseOp, token: g.token})
}

func (b *book) endRelease(g *grant, f wire.Frame, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kb := b.keys[g.key]
	switch o {
	case notSent:
		g.rel = held
		b.hist[g.relOp].drop = true
		return
	case lost:
		g.rel = relLost
		b.st.lost++
		return
	case timedOut:
		g.rel = relTimedOut
		b.st.timedOut++
		return
	}
	b.st.answered++
	switch f.Type {
	case wire.TypeReleased:
		b.st.releases++
		b.answer(g.relOp, opOut{ok: true})
		delete(kb.grants, g.token)
		kb.released[g.token] = true
	case wire.TypeNotHeld:
		b.answer(g.relOp, opOut{})
		delete(kb.grants, g.token)
		if time.Since(g.sent) < (lease-10)*time.Second {
			b.violation("release of %q token %d answered N: an acknowledged grant was lost (its lease of %d s cannot have run out)", g.key, g.token, lease)
		}
	default:
		b.hist[g.relOp].drop = true
		b.violation("release of %q token %d answered %s reason %d, want R", g.key, g.token, f.Type, f.Reason)
	}
}

func (b *book) beginDescribe(client int, key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addOp(client, key, opIn{kind: describeOp})
}

// endDescribe records a describe's answer; it reports whether f is an I frame.
func (b *book) endDescribe(op int, f wire.Frame, o outcome) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o != answered {
		b.hist[op].drop = true // a read: without its answer it is nothing
		return false
	}
	if f.Type != wire.TypeInfo {
		b.hist[op].drop = true
		b.violation("describe answered %s, want I", f.Type)
		return false
	}
	b.st.describes++
	held := f.Flags&1 != 0
	b.answer(op, opOut{ok: held, token: f.Token, owner: f.Owner})
	if held {
		b.observe(f.Token)
	}
	return true
}

// unsettled returns a key on which worker has a lost request.
func (b *book) unsettled(worker int) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, kb := range b.keys {
		for _, a := range kb.acqs {
			if a.worker == worker && a.state == acqLost {
				return k, true
			}
		}
		for _, g := range kb.grants {
			if g.worker == worker && g.rel == relLost {
				return k, true
			}
		}
	}
	return "", false
}

// settle decides the indeterminate requests on key of the clients mine
// selects from a describe (op) answered by a serving leader on a connection
// opened after those requests were lost. A lost request can no longer take
// effect then: a leader serves only once its takeover entry has committed,
// which decides every earlier entry. A timed-out request may still be pending
// in the leader, so only what the describe shows in effect is settled.
//
// A lost acquire is in effect iff the describe shows its owner holding the
// key: nobody else knows its token to release it, and no lease runs out. A
// lost release is in effect iff its token no longer holds the key: nobody
// else releases that token.
func (b *book) settle(key string, op int, mine func(worker int) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settleLocked(b.keys[key], key, op, mine)
}

func (b *book) settleLocked(kb *keyBook, key string, op int, mine func(worker int) bool) {
	out := b.hist[op].Output.(opOut)
	ret := b.hist[op].Return
	for owner, a := range kb.acqs {
		if !mine(a.worker) || a.state == acqInFlight {
			continue
		}
		if out.ok && out.owner == owner {
			delete(kb.acqs, owner)
			b.st.settledGranted++
			// It took effect before the describe answered.
			b.hist[a.op].Output, b.hist[a.op].Return = opOut{ok: true, token: out.token}, ret
			b.granted(kb, a, out.token, "indeterminate acquire seen in effect")
		} else if a.state == acqLost {
			delete(kb.acqs, owner)
			b.st.settledNot++
			b.hist[a.op].drop, b.hist[a.op].settled = true, ret
		}
	}
	for tok, g := range kb.grants {
		if !mine(g.worker) || (g.rel != relLost && g.rel != relTimedOut) {
			continue
		}
		if !(out.ok && out.token == tok) {
			b.st.settledReleased++
			b.hist[g.relOp].Output, b.hist[g.relOp].Return = opOut{ok: true}, ret
			delete(kb.grants, tok)
			kb.released[tok] = true
		} else if g.rel == relLost {
			b.st.settledNotReleased++
			b.hist[g.relOp].drop, b.hist[g.relOp].settled = true, ret
			g.rel = held
		}
	}
}

// keyNames lists every key, sorted.
func (b *book) keyNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for k := range b.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// verifyKey checks a describe of key (op) taken while no request is in
// flight, after a restart: every acknowledged grant not released holds the
// key under its token, no released token does, every lost request is settled
// either way, and the holder is someone a client asked for. It reports
// whether the key is held.
func (b *book) verifyKey(key string, op int, where string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	kb := b.keys[key]
	for _, a := range kb.acqs {
		if a.state == acqInFlight {
			b.violation("test harness: acquire of %q in flight during verification", key)
		}
	}
	b.settleLocked(kb, key, op, func(int) bool { return true })
	out := b.hist[op].Output.(opOut)
	b.st.verifiedKeys++
	for tok, g := range kb.grants {
		switch g.rel {
		case releasing:
			b.violation("test harness: release of %q in flight during verification", key)
		case held:
			if !(out.ok && out.token == tok) && time.Since(g.sent) < (lease-10)*time.Second {
				b.violation("%s: %q lost the acknowledged grant %d (owner %x): describe shows %s", where, key, tok, g.owner[:4], descText(out))
				delete(kb.grants, tok)
			}
		}
	}
	if !out.ok {
		return false
	}
	if kb.released[out.token] {
		b.violation("%s: %q is held by token %d, whose release was acknowledged", where, key, out.token)
	} else if g, ok := kb.grants[out.token]; !ok {
		b.violation("%s: %q is held by token %d (owner %x) that no client was granted nor asked for", where, key, out.token, out.owner[:4])
	} else if g.owner != out.owner {
		b.violation("%s: %q token %d has owner %x, granted to owner %x", where, key, out.token, out.owner[:4], g.owner[:4])
	}
	return true
}

func descText(o opOut) string {
	if !o.ok {
		return "free"
	}
	return fmt.Sprintf("held by token %d owner %x", o.token, o.owner[:4])
}

// history returns the operations for the linearizability check.
//
// An acquire answered W is marked contended when another acquire of the key
// was in flight at some time during it, including one whose answer was lost
// and that never took effect: the server answers wait 0 with W while another
// attempt on the key is being committed (docs/protocol.md: W is "not
// acquired", always a safe answer), and that attempt may then die with its
// leader.
func (b *book) history() []porcupine.Operation {
	b.mu.Lock()
	defer b.mu.Unlock()
	type span struct {
		i         int
		call, end int64
	}
	acquires := map[string][]span{}
	for i, h := range b.hist {
		in := h.Input.(opIn)
		if in.kind != acquireOp {
			continue
		}
		switch {
		case !h.drop:
			acquires[in.key] = append(acquires[in.key], span{i, h.Call, h.Return})
		case h.settled != 0:
			acquires[in.key] = append(acquires[in.key], span{i, h.Call, h.settled})
		}
	}
	var out []porcupine.Operation
	b.wByLost = 0
	for i, h := range b.hist {
		if h.drop {
			continue
		}
		op := h.Operation
		if in := op.Input.(opIn); in.kind == acquireOp && !op.Output.(opOut).ok && !op.Output.(opOut).unknown {
			byLost := false
			for _, s := range acquires[in.key] {
				if s.i != i && s.call <= op.Return && s.end >= op.Call {
					in.contended = true
					op.Input = in
					if !b.hist[s.i].drop {
						byLost = false
						break
					}
					byLost = true
				}
			}
			if byLost {
				b.wByLost++
			}
		}
		out = append(out, op)
	}
	return out
}

// keyHistory describes every request on key, also those left out of the
// history, by call time.
func (b *book) keyHistory(key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ops []histOp
	for _, h := range b.hist {
		if h.Input.(opIn).key == key {
			ops = append(ops, h)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var lines []string
	for _, h := range ops {
		ret := "never"
		if h.Return != never {
			ret = fmt.Sprint(time.Duration(h.Return))
		}
		note := ""
		switch {
		case h.drop && h.settled != 0:
			note = fmt.Sprintf("   (answer lost; seen not in effect at %v)", time.Duration(h.settled))
		case h.drop:
			note = "   (not sent, or no answer to a read)"
		}
		lines = append(lines, fmt.Sprintf("  client %d [%v .. %s] %s%s", h.ClientId, time.Duration(h.Call), ret,
			ticketModel.DescribeOperation(h.Input, h.Output), note))
	}
	return strings.Join(lines, "\n")
}

func (b *book) summary() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.st
	return fmt.Sprintf("requests answered %d (grants %d, W %d, releases %d, describes %d); indeterminate: lost %d, timed out %d; "+
		"settled: acquires in effect %d / not %d, releases in effect %d / not %d; keys verified %d in %d verifications; largest token %d; "+
		"W answered while only a lost acquire that never took effect was in flight: %d",
		s.answered+s.describes, s.grants, s.notAcquired, s.releases, s.describes, s.lost, s.timedOut,
		s.settledGranted, s.settledNot, s.settledReleased, s.settledNotReleased, s.verifiedKeys, s.verifications, b.maxSeen, b.wByLost)
}
