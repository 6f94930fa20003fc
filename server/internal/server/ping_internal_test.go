package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// testPinger is a pinger whose clock is pinned half-way into part 'at' of
// the ping interval.
func testPinger(interval time.Duration, at int64) *pinger {
	p := newPinger(interval, 0)
	p.start = time.Now().Add(-time.Duration(at)*p.part() - p.part()/2)
	return p
}

// joinNew joins a new connection that can queue frames (nothing reads them:
// its writer counts as running, so none starts).
func (p *pinger) joinNew() *conn {
	c := newConn(&Server{cfg: Config{WriteBufferLimit: 1 << 20}}, nil)
	c.writing = true
	p.join(c)
	return c
}

// A server without connections has no part to wake for: its pinger sleeps
// until a connection joins, instead of waking every part.
func TestPingerOfAnIdleServerHasNothingToWakeFor(t *testing.T) {
	pg := testPinger(500*time.Millisecond, 1000)
	if p, ok := pg.nextPart(900); ok {
		t.Fatalf("no connections, yet part %d is due to be pinged", p)
	}
}

// A connection is pinged first about one interval after it joined: in the
// group pinged last, and never by a part that began before it joined, even
// one the pinger has yet to catch up on.
func TestFirstPingComesAboutOneIntervalAfterJoining(t *testing.T) {
	const at = 1000
	pg := testPinger(500*time.Millisecond, at)
	groups := int64(len(pg.groups))
	c := pg.joinNew()
	if want := int((at - 1) % groups); c.ping.group != want {
		t.Fatalf("joined group %d, want %d (the group pinged last)", c.ping.group, want)
	}
	// The pinger, behind by a whole interval, catches up from at-groups.
	p, ok := pg.nextPart(at - groups)
	if !ok {
		t.Fatal("a connection joined, yet no part is due")
	}
	for q := at - groups; q < p; q++ {
		if len(pg.pingable(q, nil)) != 0 {
			t.Fatalf("part %d lists someone before part %d", q, p)
		}
	}
	if p >= c.ping.from {
		t.Fatalf("part %d, which began before the connection joined, may ping it (from part %d)", p, c.ping.from)
	}
	next := at - 1 + groups
	if got := pg.pingable(next, nil); len(got) != 1 || got[0] != c {
		t.Fatalf("part %d (about one interval later) pings %d connections, want the new one", next, len(got))
	}
	if p, ok := pg.nextPart(at); !ok || p != next {
		t.Fatalf("next part to wake for from %d: %d %v, want %d", at, p, ok, next)
	}
}

// A connection that leaves is pinged no more, the others of its group stay,
// and a pinger left without connections has nothing to wake for again.
func TestPingerForgetsALeavingConnection(t *testing.T) {
	pg := testPinger(500*time.Millisecond, 10)
	cs := make([]*conn, 5*len(pg.groups))
	for i := range cs {
		cs[i] = pg.joinNew()
	}
	for _, i := range []int{7, 0, len(cs) - 1, 3} {
		pg.leave(cs[i])
		pg.leave(cs[i]) // twice is harmless
		cs[i] = nil
	}
	listed := map[*conn]bool{}
	for q := int64(0); q < int64(len(pg.groups)); q++ {
		for _, c := range pg.pingable(q, nil) {
			listed[c] = true
		}
	}
	for i, c := range cs {
		if c != nil && !listed[c] {
			t.Fatalf("connection %d, still joined, is in no group", i)
		}
		if c != nil {
			pg.leave(c)
		}
	}
	if len(listed) != len(cs)-4 {
		t.Fatalf("%d connections listed, want %d", len(listed), len(cs)-4)
	}
	if p, ok := pg.nextPart(10); ok {
		t.Fatalf("the only connection left, yet part %d is due", p)
	}
	if pg.members != 0 {
		t.Fatalf("%d members after the only one left", pg.members)
	}
}

// Connections arriving together (a reconnecting fleet) are spread over the
// groups: none holds more than twice the average plus one.
func TestPingerSpreadsConnectionsArrivingTogether(t *testing.T) {
	pg := testPinger(500*time.Millisecond, 77)
	const n = 1000
	for range n {
		pg.joinNew()
	}
	room := 2*n/len(pg.groups) + 1
	for g, m := range pg.groups {
		if len(m) > room {
			t.Fatalf("group %d holds %d of %d connections, more than %d", g, len(m), n, room)
		}
	}
}

// queued decodes the frames c has queued for its writer and forgets them.
func queued(t *testing.T, c *conn) []wire.Frame {
	t.Helper()
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	var frames []wire.Frame
	r := wire.NewReader(bytes.NewReader(out))
	for {
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			break
		}
		f.Text = append([]byte(nil), f.Text...)
		frames = append(frames, f)
	}
	return frames
}

// A connection past its hello is pinged at every look; one from which no
// byte arrived for the two looks after an unanswered ping is ended with E 9
// at the third, and any byte in between starts the count again. Before its
// hello a connection is not pinged at all.
func TestPingerPingsAndEndsASilentConnection(t *testing.T) {
	pg := testPinger(500*time.Millisecond, 10)
	c := pg.joinNew()
	pg.look(c, 1000, 1, time.Now())
	if got := queued(t, c); len(got) != 0 {
		t.Fatalf("a connection before its hello was sent %v", got)
	}
	c.ready.Store(true)
	c.rx.Add(1) // the hello's bytes
	for nonce := uint64(2); nonce <= 4; nonce++ {
		pg.look(c, 1000, nonce, time.Now())
		got := queued(t, c)
		if len(got) != 1 || got[0].Type != wire.TypePing || got[0].Nonce != nonce {
			t.Fatalf("look with nonce %d queued %v, want one P with that nonce", nonce, got)
		}
	}
	c.rx.Add(1) // an O arrives: the count starts again
	for nonce := uint64(5); nonce <= 7; nonce++ {
		pg.look(c, 1000, nonce, time.Now())
		if got := queued(t, c); len(got) != 1 || got[0].Type != wire.TypePing {
			t.Fatalf("look %d after a byte arrived queued %v, want a P", nonce, got)
		}
	}
	pg.look(c, 1000, 8, time.Now())
	got := queued(t, c)
	if len(got) != 1 || got[0].Type != wire.TypeError || wire.Code(got[0].Code) != wire.CodePingTimeout {
		t.Fatalf("the third silent look queued %v, want E %d", got, wire.CodePingTimeout)
	}
	if !c.isClosing() {
		t.Fatal("the silent connection is not closing")
	}
}

// An idle connection that follows the idle interval is pinged once per idle
// interval; one with a request in flight, or that ever carried a
// coordination frame, at every look; one that did not ask for idle pings at
// every look too.
func TestPingerPingsIdleConnectionsAtTheIdleInterval(t *testing.T) {
	const idle = 20 * time.Second
	p := newPinger(500*time.Millisecond, idle)
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	join := func(follows bool) *conn {
		c := p.joinNew()
		c.idlePings = follows
		c.ready.Store(true)
		return c
	}
	pinged := func(c *conn) bool {
		t.Helper()
		c.rx.Add(1) // it answers
		p.look(c, 1000, 1, clock)
		return len(queued(t, c)) == 1
	}
	follows, older := join(true), join(false)
	if !pinged(follows) || !pinged(older) {
		t.Fatal("the first look pinged not both")
	}
	clock = clock.Add(idle / 2)
	if pinged(follows) {
		t.Fatal("an idle connection was pinged again half an idle interval later")
	}
	if !pinged(older) {
		t.Fatal("a connection that did not ask for idle pings was not pinged at every look")
	}
	follows.busy.Store(1) // an acquire waits in a queue
	if !pinged(follows) {
		t.Fatal("a connection with an acquire in flight was not pinged at the next look")
	}
	follows.busy.Store(0)
	if pinged(follows) {
		t.Fatal("idle again, the connection was pinged less than an idle interval after its last ping")
	}
	clock = clock.Add(idle)
	if !pinged(follows) {
		t.Fatal("an idle connection was not pinged an idle interval after its last ping")
	}
	follows.coord.Store(true)
	if !pinged(follows) {
		t.Fatal("a connection that carried coordination was pinged at the idle interval")
	}
}
