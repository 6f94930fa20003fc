package crashtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

const (
	workers        = 4
	privateKeys    = 6 // per worker
	sharedKeys     = 3
	verifierClient = workers // porcupine client id of the verifier
)

// cycles is the number of kill cycles: def, or TICKETING_CRASH_CYCLES.
func cycles(t *testing.T, def int) int {
	if s := os.Getenv("TICKETING_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TICKETING_CRASH_CYCLES=%q: want a positive number", s)
		}
		return n
	}
	return def
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("TICKETING_CRASH_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("TICKETING_CRASH_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (TICKETING_CRASH_SEED=%d repeats this test's random choices)", s, s)
	return s
}

// load is several clients acquiring (wait 0, lease 250 s), releasing and
// describing, each with exact bookkeeping in the book. pause stops them
// between two requests, so that nothing is in flight while a verifier looks.
type load struct {
	t        *testing.T
	b        *book
	addrs    []string
	gate     sync.RWMutex
	stop     atomic.Bool
	wg       sync.WaitGroup
	answered atomic.Int64
}

func startLoad(t *testing.T, b *book, addrs []string, seed uint64) *load {
	l := &load{t: t, b: b, addrs: addrs}
	for k := 0; k < sharedKeys; k++ {
		b.addKey(fmt.Sprintf("shared/%d", k), -1)
	}
	for w := 0; w < workers; w++ {
		for k := 0; k < privateKeys; k++ {
			b.addKey(fmt.Sprintf("w%d/%d", w, k), w)
		}
	}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go l.worker(w, rand.New(rand.NewPCG(seed, uint64(w))))
	}
	t.Cleanup(l.halt)
	return l
}

func (l *load) halt() {
	l.stop.Store(true)
	l.wg.Wait()
}

func (l *load) pause()  { l.gate.Lock() }
func (l *load) resume() { l.gate.Unlock() }

// waitAnswered waits until n more requests have been answered.
func (l *load) waitAnswered(n int) {
	l.t.Helper()
	target := l.answered.Load() + int64(n)
	deadline := time.Now().Add(60 * time.Second)
	for l.answered.Load() < target {
		if time.Now().After(deadline) {
			l.t.Fatalf("the clients got no %d answers within 60 s (%d short): the cluster stopped serving", n, target-l.answered.Load())
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, with a deadline
	}
}

func (l *load) worker(id int, rng *rand.Rand) {
	defer l.wg.Done()
	c := newClient(l.addrs)
	c.next = id
	defer c.close()
	var seq uint64
	for !l.stop.Load() {
		l.gate.RLock()
		l.step(id, c, rng, &seq)
		l.gate.RUnlock()
	}
}

func (l *load) step(id int, c *wclient, rng *rand.Rand, seq *uint64) {
	if !c.connected() {
		if err := c.connect(); err != nil {
			time.Sleep(25 * time.Millisecond) // back off while no leader serves
			return
		}
	}
	var (
		o   outcome
		err error
	)
	defer func() {
		if o == answered {
			l.answered.Add(1)
		}
		if errors.Is(err, errProtocol) {
			l.t.Errorf("client %d: %v", id, err)
		}
	}()
	// Settle this client's lost requests first, with a describe on the new connection.
	if key, ok := l.b.unsettled(id); ok {
		var f wire.Frame
		op := l.b.beginDescribe(id, key)
		f, o, err = c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
		if l.b.endDescribe(op, f, o) {
			l.b.settle(key, op, func(w int) bool { return w == id })
		}
		return
	}
	mine := l.b.heldBy(id)
	switch {
	case len(mine) > 0 && (len(mine) >= 3 || rng.IntN(100) < 45):
		g := mine[rng.IntN(len(mine))]
		if time.Since(mine[0].sent) > 60*time.Second {
			g = mine[0] // keep every hold far from its lease's end
		}
		l.b.beginRelease(g)
		var f wire.Frame
		f, o, err = c.do(&wire.Frame{Type: wire.TypeRelease, Token: g.token, Key: []byte(g.key)})
		l.b.endRelease(g, f, o)
	case rng.IntN(100) < 10:
		key := fmt.Sprintf("shared/%d", rng.IntN(sharedKeys))
		op := l.b.beginDescribe(id, key)
		var f wire.Frame
		f, o, err = c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
		l.b.endDescribe(op, f, o)
	default:
		key := fmt.Sprintf("shared/%d", rng.IntN(sharedKeys))
		if rng.IntN(100) < 60 {
			key = fmt.Sprintf("w%d/%d", id, rng.IntN(privateKeys))
		}
		for _, g := range mine {
			if g.key == key {
				return // already ours
			}
		}
		*seq++
		var owner wire.Owner
		owner[0] = byte(id)
		binary.BigEndian.PutUint64(owner[1:], *seq)
		binary.BigEndian.PutUint32(owner[9:], rng.Uint32())
		a := l.b.beginAcquire(id, key, owner)
		var f wire.Frame
		f, o, err = c.do(&wire.Frame{Type: wire.TypeAcquire, Owner: owner, Wait: 0, Lease: lease, Key: []byte(key)})
		l.b.endAcquire(a, f, o)
	}
}

// verify describes every key through the serving leader at addr while the
// load is paused, and checks the book against it and against the server's
// own status (held count, last token). regain, when not nil, is called when
// addr stops serving (an election on a starved machine) to make it lead again.
func verify(t *testing.T, b *book, addr, where string, regain func()) {
	t.Helper()
	c := newClient([]string{addr})
	defer c.close()
	deadline := time.Now().Add(startTimeout)
	heldKeys := 0
	for _, key := range b.keyNames() {
		for {
			if !c.connected() {
				if err := c.connect(); err != nil {
					if time.Now().After(deadline) {
						t.Fatalf("%s: verifier cannot reach the leader at %s: %v", where, addr, err)
					}
					if regain != nil {
						regain()
					}
					time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
					continue
				}
			}
			op := b.beginDescribe(verifierClient, key)
			f, o, err := c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
			if b.endDescribe(op, f, o) {
				if b.verifyKey(key, op, where) {
					heldKeys++
				}
				break
			}
			if time.Now().After(deadline) || errors.Is(err, errProtocol) {
				t.Fatalf("%s: describe %q: %v %v", where, key, o, err)
			}
		}
	}
	st, err := adminStatus(addr)
	if err != nil {
		t.Fatalf("%s: status: %v", where, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st.verifications++
	if st.Held != heldKeys {
		b.violation("%s: the server counts %d held tickets, describes of every key the clients used show %d", where, st.Held, heldKeys)
	}
	if st.LastToken < b.maxSeen {
		b.violation("%s: the server's last token %d is below token %d that clients have seen", where, st.LastToken, b.maxSeen)
	}
}

func TestCrashSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	n := cycles(t, 5)
	rng := rand.New(rand.NewPCG(seed(t), 1))
	c := startCluster(t, 1)
	b := newBook(t)
	l := startLoad(t, b, c.addrs(), rng.Uint64())
	p := c.procs[0]
	for cycle := 1; cycle <= n && !t.Failed(); cycle++ {
		l.waitAnswered(10 + rng.IntN(150)) // then SIGKILL, whatever is in flight
		p.kill()
		p.start()
		p.mustReady()
		l.pause()
		verify(t, b, p.client, fmt.Sprintf("after kill %d of %d", cycle, n), nil)
		l.resume()
	}
	if !t.Failed() {
		l.waitAnswered(20)
	}
	l.pause()
	verify(t, b, p.client, "at the end", nil)
	l.resume()
	l.halt()
	checkLinearizable(t, b)
	t.Logf("%d kills: %s", n, b.summary())
	logTempSnapshots(t, c)
}

func TestCrashThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	n := cycles(t, 4)
	rng := rand.New(rand.NewPCG(seed(t), 3))
	c := startCluster(t, 3)
	b := newBook(t)
	l := startLoad(t, b, c.addrs(), rng.Uint64())
	kills := map[string]int{}
	for cycle := 1; cycle <= n && !t.Failed(); cycle++ {
		l.waitAnswered(10 + rng.IntN(150))
		li := c.leader()
		victim, role := li, "leader"
		// The leader most of the time; a follower in the second of every
		// three cycles (short schedule) or three times in ten (long one).
		if (n <= 6 && cycle%3 == 2) || (n > 6 && rng.IntN(100) < 30) {
			victim, role = (li+1+rng.IntN(2))%3, "follower"
		}
		kills[role]++
		p := c.procs[victim]
		p.kill()
		l.waitAnswered(5 + rng.IntN(60)) // the other two serve meanwhile
		p.start()
		p.mustReady()
		l.pause()
		where := fmt.Sprintf("after kill %d of %d (%s %s)", cycle, n, role, p.id)
		waitConverged(t, c, where)
		// Check the restarted server's own state: make it the leader and ask it.
		moveLeader(t, c, victim)
		verify(t, b, p.client, where, func() { moveLeader(t, c, victim) })
		l.resume()
	}
	if !t.Failed() {
		l.waitAnswered(20)
	}
	l.pause()
	last := c.leader()
	verify(t, b, c.procs[last].client, "at the end", func() { moveLeader(t, c, last) })
	l.resume()
	l.halt()
	checkLinearizable(t, b)
	t.Logf("%d kills (%d leader, %d follower): %s", n, kills["leader"], kills["follower"], b.summary())
	logTempSnapshots(t, c)
}

// waitConverged waits until every server reports the same held count and
// last token (the restarted one has caught up).
func waitConverged(t *testing.T, c *cluster, where string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		var sts []status
		ok := true
		for _, p := range c.procs {
			st, err := adminStatus(p.client)
			if err != nil {
				ok = false
				break
			}
			sts = append(sts, st)
		}
		if ok {
			for _, st := range sts[1:] {
				if st.Held != sts[0].Held || st.LastToken != sts[0].LastToken {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the servers did not converge within %v: %+v", where, startTimeout, sts)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

// moveLeader transfers leadership to server i and waits until it serves.
func moveLeader(t *testing.T, c *cluster, i int) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		li := c.leader()
		if li == i {
			return
		}
		code, body, err := adminDo(c.procs[li].client, fmt.Sprintf(`{"op":"leader.transfer","id":%q}`, c.procs[i].id))
		if err == nil && code == 0 {
			wait := time.Now().Add(10 * time.Second)
			for !serves(c.procs[i].client) && time.Now().Before(wait) {
				time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
			}
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("leadership transfer to %s: code %d %s %v", c.procs[i].id, code, body, err)
		}
		time.Sleep(50 * time.Millisecond) // retry a refused transfer (e.g. while it catches up)
	}
}

// logTempSnapshots reports the snapshots that kills left half-written: Raft
// skips them (with a warning at every start) and never removes them.
func logTempSnapshots(t *testing.T, c *cluster) {
	for _, p := range c.procs {
		tmp, _ := filepath.Glob(filepath.Join(p.dataDir, "raft", "snapshots", "*.tmp"))
		var size int64
		for _, d := range tmp {
			filepath.Walk(d, func(_ string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					size += info.Size()
				}
				return nil
			})
		}
		if len(tmp) > 0 {
			t.Logf("%s: %d half-written snapshots left in raft/snapshots (%d bytes)", p.id, len(tmp), size)
		}
	}
}
