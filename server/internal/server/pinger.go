package server

import (
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// The pinger cuts each ping interval into parts of pingStep (at most
// maxPingGroups parts) and pings one group of connections in each part.
// Pinging every connection at the same instant sent 10,000 pings in one
// burst: the server's writers, the clients' readers and writers and then the
// server's readers all woke together, and every other connection's answers
// waited behind them for hundreds of milliseconds.
const (
	pingStep      = 10 * time.Millisecond
	maxPingGroups = 50
)

// pingGroupsFor is how many groups the connections are pinged in.
func pingGroupsFor(interval time.Duration) int {
	return max(1, min(maxPingGroups, int(interval/pingStep)))
}

// pingState is what the pinger keeps for one connection; only the pinger
// touches it, except group and from, which are set under pinger.mu.
type pingState struct {
	rx     uint64    // the connection's read count at the last look
	missed int       // looks in a row that found no byte since the one before
	last   time.Time // when it was last pinged (looked at)
	// group is the group of connections it is pinged with, slot its place
	// in that group, and from the first part of the ping interval (counted
	// from the pinger's start) that may ping it: the parts before it began
	// before the connection joined.
	group, slot int
	from        int64
}

// pinger sends P to every connection once each interval (or once each idle
// interval to a connection that agreed to it in its hello and has nothing
// in flight), one group of connections per part of the interval, and ends
// connections that sent nothing (not even O) for two looks after an
// unanswered ping.
type pinger struct {
	interval time.Duration
	idle     time.Duration // the idle interval; 0: none
	start    time.Time
	// groups holds the connections of each part (under mu). Slices, not
	// maps: every connection is looked at once per interval, and copying a
	// part's slice costs a fraction of iterating a map of it.
	groups  [][]*conn
	members int           // under mu
	wake    chan struct{} // a connection joined: the loop may sleep too long
	mu      sync.Mutex
	scratch []*conn // the loop's list of one part's connections, reused
	now     func() time.Time
}

func newPinger(interval, idle time.Duration) *pinger {
	p := &pinger{interval: interval, idle: idle, start: time.Now(), wake: make(chan struct{}, 1), now: time.Now}
	p.groups = make([][]*conn, pingGroupsFor(interval))
	return p
}

// part is the length of one part of the ping interval.
func (p *pinger) part() time.Duration {
	return p.interval / time.Duration(len(p.groups))
}

// join starts pinging c. Its group is the one pinged last, so that the
// first ping comes about one interval after the connection was accepted, as
// every later one does; but a group takes at most twice the average plus
// one, so that connections arriving together (a reconnecting fleet) are
// still spread: then the group pinged last that has room. Some group always
// has room, since one holds no more than the average.
func (p *pinger) join(c *conn) {
	p.mu.Lock()
	groups := int64(len(p.groups))
	pinged := int64(time.Since(p.start) / p.part()) // parts begun and ended so far
	room := 2*p.members/int(groups) + 1
	group := 0
	for back := groups; back >= 1; back-- { // the group pinged longest ago first, the last one wins
		if g := int(((pinged-back)%groups + groups) % groups); len(p.groups[g]) < room {
			group = g
		}
	}
	c.ping.group, c.ping.slot, c.ping.from = group, len(p.groups[group]), pinged
	p.groups[group] = append(p.groups[group], c)
	p.members++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // a wake is pending already
	}
}

// leave stops pinging c.
func (p *pinger) leave(c *conn) {
	p.mu.Lock()
	g := p.groups[c.ping.group]
	if i := c.ping.slot; i < len(g) && g[i] == c {
		last := len(g) - 1
		g[i] = g[last]
		g[i].ping.slot = i
		g[last] = nil
		p.groups[c.ping.group] = g[:last]
		p.members--
	}
	p.mu.Unlock()
}

// run pings until stop is closed. It sleeps until the next part whose
// group has connections, so an idle server does not wake every part for
// nothing. Each part's pings carry their own nonce.
func (p *pinger) run(stop <-chan struct{}) {
	groups := int64(len(p.groups))
	part := p.part()
	timer := time.NewTimer(part)
	defer timer.Stop()
	var parts int64 // the next part to ping, counted from start
	var nonce uint64
	for {
		// After a pause (or a sleep with no connections) catch up on one
		// interval at most.
		parts = max(parts, int64(time.Since(p.start)/part)-groups)
		var wake <-chan time.Time
		if next, ok := p.nextPart(parts); ok {
			timer.Reset(time.Until(p.start.Add(time.Duration(next+1) * part)))
			wake = timer.C
		}
		select {
		case <-stop:
			return
		case <-p.wake:
		case <-wake:
		}
		due := int64(time.Since(p.start) / part) // parts ended so far
		parts = max(parts, due-groups)
		for ; parts < due; parts++ {
			nonce++
			p.pingPart(parts, nonce)
		}
	}
}

// nextPart is the first part from 'from' on, within one interval, whose
// group has connections; false when no group has any.
func (p *pinger) nextPart(from int64) (int64, bool) {
	groups := int64(len(p.groups))
	p.mu.Lock()
	defer p.mu.Unlock()
	for q := from; q < from+groups; q++ {
		if len(p.groups[q%groups]) > 0 {
			return q, true
		}
	}
	return 0, false
}

// pingable lists the connections of part q's group into dst; look skips
// those that joined after the part began.
func (p *pinger) pingable(q int64, dst []*conn) []*conn {
	g := int(q % int64(len(p.groups)))
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(dst, p.groups[g]...)
}

// pingPart pings, for part q of the interval, the connections of its group
// that are past their hello and joined before the part began, and ends
// those from which no byte arrived for two looks after an unanswered ping.
func (p *pinger) pingPart(q int64, nonce uint64) {
	p.scratch = p.pingable(q, p.scratch[:0])
	now := p.now()
	for _, c := range p.scratch {
		p.look(c, q, nonce, now)
	}
	clear(p.scratch) // hold no closed connection until the next part
}

// look checks one connection for part q and pings it, unless it joined
// after the part began, or it is idle and was pinged less than an idle
// interval ago. It is cheap for the idle ones: no lock, no clock.
func (p *pinger) look(c *conn, q int64, nonce uint64, now time.Time) {
	st := &c.ping
	if q < st.from || !c.ready.Load() {
		return // before the hello only its own deadline applies
	}
	if p.idle > 0 && now.Sub(st.last) < p.idle && c.idle() {
		// Looked at every interval all the same, so that the first ping
		// after a request arrives comes within one interval.
		return
	}
	rx := c.rx.Load()
	if rx == st.rx {
		st.missed++
	} else {
		st.rx, st.missed = rx, 0
	}
	if st.missed > 2 { // two whole intervals since an unanswered ping
		c.fatalErr(wire.CodePingTimeout, "nothing received for two ping intervals after an unanswered ping")
		return
	}
	st.last = now
	c.sendPing(nonce)
}
